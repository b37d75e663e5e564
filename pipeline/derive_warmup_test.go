package pipeline

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/stages/detect"
	"github.com/outlierd/outlierd/stages/ingest"
	"github.com/outlierd/outlierd/stages/sink"
)

// TestRestartRollingWarmupPagesNoKey: the derive state is in memory, so after a restart every
// key's rolling columns start afresh (a std of one value is 0, the stuck sensor's signature)
// while the models, restored from detect.state_dir, learnt full windows. The records of a clean
// stream whose windows are still filling must page no key, under the global model and under
// key_by: key (each key's model restored from its keys' state). Before warm26 every key's first
// record after the restart was flagged. The Arrow output writes the derived values (not null).
//
// 20 keys round robin in one partition, each at its own level (10 x its number) with N(0, 1)
// noise on temp and hum; each one's std over 16 and temp's mean over 16. 200 records a key
// before the restart (the models built), 40 a key after it.
func TestRestartRollingWarmupPagesNoKey(t *testing.T) {
	for _, keyBy := range []detect.KeyBy{detect.KeyByNone, detect.KeyByKey} {
		t.Run(string(keyBy), func(t *testing.T) { restartWarmup(t, keyBy) })
	}
}

func restartWarmup(t *testing.T, keyBy detect.KeyBy) {
	const keys, before, after, last = 20, 200, 40, 16
	br := testsupport.KfakeBroker(t)
	in, out, dlq, group := testsupport.UniqueName("in"), testsupport.UniqueName("out"), testsupport.UniqueName("dlq"), testsupport.UniqueName("group")
	testsupport.CreateTopics(t, br, map[string]int{in: 1, out: 1, dlq: 1})
	r := rand.New(rand.NewPCG(26, 16))
	produce := func(from, n int) {
		recs := make([]*kgo.Record, n)
		for t := range recs {
			k := (from + t) % keys
			recs[t] = &kgo.Record{Topic: in, Partition: 0, Key: fmt.Appendf(nil, "s%02d", k),
				Value: fmt.Appendf(nil, `{"temp":%.4f,"hum":%.4f}`, float64(10*k)+r.NormFloat64(), float64(10*k)+r.NormFloat64())}
		}
		testsupport.Produce(t, br, recs...)
	}
	cfg := sensorConfig(br, in, out, dlq, group, sink.EmitAll)
	cfg.Ingest.Features, cfg.Ingest.Uncertainty = []string{"temp", "hum"}, nil
	cfg.Ingest.Derive = &ingest.Derive{Features: []ingest.DerivedFeature{
		{Kind: ingest.DeriveStd, Of: "temp", Last: last}, {Kind: ingest.DeriveStd, Of: "hum", Last: last},
		{Kind: ingest.DeriveMean, Of: "temp", Last: last}}}
	cfg.Sink.Format = sink.FormatArrow
	cfg.Detect.FlagBy, cfg.Detect.KeyBy = detect.FlagBySignificance, keyBy
	cfg.Detect.Window, cfg.Detect.MinRecords, cfg.Detect.Distance.N = 2000, 1000, 50
	cfg.Detect.StateDir = t.TempDir()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	produce(0, keys*before)
	runUntilOut(t, cfg, keys*before)
	produce(keys*before, keys*after)
	runUntilOut(t, cfg, keys*after) // the restart: the models loaded, the derive state empty

	var paged []string
	seen := 0
	for _, m := range testsupport.ReadTopic(t, br, out, 1) {
		rd, err := ipc.NewReader(bytes.NewReader(m.Value))
		if err != nil {
			t.Fatal(err)
		}
		sch := rd.Schema()
		col := func(name string) int { return sch.FieldIndices(name)[0] }
		off, flag, score, why, std := col("_offset"), col(sink.ColOutlier), col(sink.ColScore), col(sink.ColExplanation), col("temp.std16")
		for rd.Next() {
			rec := rd.Record()
			for k := range int(rec.NumRows()) {
				o := int(rec.Column(off).(*array.Int64).Value(k))
				if o < keys*before || o >= keys*(before+last-1) { // (a key's window fills at its 16th record)
					continue
				}
				seen++
				if rec.Column(std).IsNull(k) { // (the batch's null marks it warming; the output writes the value)
					t.Fatalf("offset %d: temp.std16 null in the Arrow output", o)
				}
				if rec.Column(flag).(*array.Boolean).Value(k) {
					paged = append(paged, fmt.Sprintf("offset %d (key s%02d's record %d after the restart) score %.2f: %s", o, o%keys, (o-keys*before)/keys+1,
						rec.Column(score).(*array.Float64).Value(k), rec.Column(why).(*array.String).Value(k)))
				}
			}
		}
		rd.Release()
	}
	if seen != keys*(last-1) {
		t.Fatalf("%d records of warming windows after the restart read from the output, want %d", seen, keys*(last-1))
	}
	if len(paged) > 0 {
		t.Errorf("%d of the %d clean records whose windows were filling after the restart flagged:\n%s", len(paged), seen, strings.Join(paged, "\n"))
	}
}
