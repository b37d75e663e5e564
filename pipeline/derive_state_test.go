package pipeline

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/stages/detect"
	"github.com/outlierd/outlierd/stages/ingest"
	"github.com/outlierd/outlierd/stages/sink"
)

// deriveRestart runs a keyed stream with std, mean and diff columns through a pipeline stopped
// cleanly and started again on the same state_dir (between hook: what the test does to
// state_dir while it is stopped), and returns the derived columns' values written after the
// restart by offset, with those of an uninterrupted Deriver over the same records.
//
// 5 keys round robin in one partition, each at its own level, values of the form 10 k + i/16
// (exact in float32, so the decoder's value and the reference's are the same bits).
func deriveRestart(t *testing.T, between func(dir string)) (got, want map[int][]float32, cols []string) {
	const keys, before, after, last = 5, 40, 20, 16
	br := testsupport.KfakeBroker(t)
	in, out, dlq, group := testsupport.UniqueName("in"), testsupport.UniqueName("out"), testsupport.UniqueName("dlq"), testsupport.UniqueName("group")
	testsupport.CreateTopics(t, br, map[string]int{in: 1, out: 1, dlq: 1})
	r := rand.New(rand.NewPCG(27, 1))
	vals := make([]float32, keys*(before+after))
	for i := range vals {
		vals[i] = float32(10*(i%keys)) + float32(r.IntN(64))/16
	}
	produce := func(from, n int) {
		recs := make([]*kgo.Record, n)
		for t := range recs {
			o := from + t
			recs[t] = &kgo.Record{Topic: in, Partition: 0, Key: fmt.Appendf(nil, "s%02d", o%keys),
				Value: fmt.Appendf(nil, `{"temp":%g}`, vals[o])}
		}
		testsupport.Produce(t, br, recs...)
	}
	cfg := sensorConfig(br, in, out, dlq, group, sink.EmitAll)
	cfg.Ingest.Features, cfg.Ingest.Uncertainty = []string{"temp"}, nil
	cfg.Ingest.Derive = &ingest.Derive{Features: []ingest.DerivedFeature{
		{Kind: ingest.DeriveStd, Of: "temp", Last: last}, {Kind: ingest.DeriveMean, Of: "temp", Last: last},
		{Kind: ingest.DeriveDiff, Of: "temp"}}}
	cfg.Sink.Format = sink.FormatArrow
	cfg.Detect.FlagBy, cfg.Detect.KeyBy = detect.FlagBySignificance, detect.KeyByNone
	cfg.Detect.Window, cfg.Detect.MinRecords, cfg.Detect.Distance.N, cfg.Detect.Density.Clusters = 2000, 100, 20, 20
	cfg.Detect.StateDir = t.TempDir()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	cols = cfg.Ingest.Columns()[1:]
	produce(0, keys*before)
	runUntilOut(t, cfg, keys*before)
	if between != nil {
		between(cfg.Detect.StateDir)
	}
	produce(keys*before, keys*after)
	runUntilOut(t, cfg, keys*after)

	checked, err := cfg.Ingest.Check()
	if err != nil {
		t.Fatal(err)
	}
	ref := checked.NewDeriver()
	want = map[int][]float32{}
	for o, v := range vals {
		d := ref.Apply(&ingest.Decoded{Values: []float32{v}}, 0, int64(o), fmt.Appendf(nil, "s%02d", o%keys), time.Unix(0, 0))
		if o >= keys*before {
			want[o] = append([]float32(nil), d.Values[1:]...)
		}
	}
	got = map[int][]float32{}
	for _, m := range testsupport.ReadTopic(t, br, out, 1) {
		rd, err := ipc.NewReader(bytes.NewReader(m.Value))
		if err != nil {
			t.Fatal(err)
		}
		sch := rd.Schema()
		off := sch.FieldIndices("_offset")[0]
		for rd.Next() {
			rec := rd.Record()
			for k := range int(rec.NumRows()) {
				o := int(rec.Column(off).(*array.Int64).Value(k))
				if o < keys*before {
					continue
				}
				var row []float32
				for _, c := range cols {
					row = append(row, rec.Column(sch.FieldIndices(c)[0]).(*array.Float32).Value(k))
				}
				got[o] = row
			}
		}
		rd.Release()
	}
	if len(got) != keys*after {
		t.Fatalf("%d records after the restart read from the output, want %d", len(got), keys*after)
	}
	return got, want, cols
}

// TestDeriveStateSurvivesRestart: ingest.derive's series are saved to detect.state_dir at a clean
// stop and loaded at the start, so that after a restart the derived columns (std, mean, diff)
// continue bit for bit as an uninterrupted run's: not warming again (a std of one value, 0; a
// diff of 0 at each key's first record). Failed before derivestate27 (the state in memory only).
func TestDeriveStateSurvivesRestart(t *testing.T) {
	got, want, cols := deriveRestart(t, nil)
	bad := 0
	for o, w := range want {
		for j := range w {
			if got[o][j] != w[j] {
				if bad++; bad <= 10 {
					t.Errorf("offset %d: %s = %v after the restart, %v uninterrupted", o, cols[j], got[o][j], w[j])
				}
			}
		}
	}
}

// TestDeriveStateColdWhenRefused: a derive state file that is corrupt, or of a newer format, is
// a cold start (logged), not a failed one: the first record of each key after the restart reads
// as a new series' (std 0, diff 0).
func TestDeriveStateColdWhenRefused(t *testing.T) {
	for name, spoil := range map[string]func(b []byte){
		"corrupt": func(b []byte) { b[len(b)/2] ^= 0xff },
		"newer":   func(b []byte) { b[8]++ }, // the format version (sealed's header)
	} {
		t.Run(name, func(t *testing.T) {
			got, _, cols := deriveRestart(t, func(dir string) {
				path := filepath.Join(dir, ingest.DeriveStateFileName)
				b, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("no derive state saved at the stop: %v", err)
				}
				spoil(b)
				if err := os.WriteFile(path, b, 0o644); err != nil {
					t.Fatal(err)
				}
			})
			for o := 200; o < 205; o++ { // each key's first record after the restart
				for j, c := range cols {
					if c != "temp.mean16" && got[o][j] != 0 {
						t.Errorf("offset %d: %s = %v, want 0 (a cold series)", o, c, got[o][j])
					}
				}
			}
		})
	}
}

// TestDeriveStateSavedPeriodically: the derive state is saved with a new model while the
// pipeline runs (a crash then loses only what came after), not only at a clean stop.
func TestDeriveStateSavedPeriodically(t *testing.T) {
	br := testsupport.KfakeBroker(t)
	in, out, dlq, group := testsupport.UniqueName("in"), testsupport.UniqueName("out"), testsupport.UniqueName("dlq"), testsupport.UniqueName("group")
	testsupport.CreateTopics(t, br, map[string]int{in: 1, out: 1, dlq: 1})
	produce := func(from, n int) {
		recs := make([]*kgo.Record, n)
		for t := range recs {
			recs[t] = &kgo.Record{Topic: in, Partition: 0, Key: fmt.Appendf(nil, "s%d", (from+t)%3),
				Value: fmt.Appendf(nil, `{"temp":%d}`, (from+t)%17)}
		}
		testsupport.Produce(t, br, recs...)
	}
	cfg := sensorConfig(br, in, out, dlq, group, sink.EmitAll)
	cfg.Ingest.Features, cfg.Ingest.Uncertainty = []string{"temp"}, nil
	cfg.Ingest.Derive = &ingest.Derive{Features: []ingest.DerivedFeature{{Kind: ingest.DeriveStd, Of: "temp", Last: 8}}}
	cfg.Detect.Window, cfg.Detect.MinRecords, cfg.Detect.Distance.N, cfg.Detect.Density.Clusters = 2000, 100, 20, 20
	cfg.Detect.RefreshInterval = time.Second
	cfg.Detect.StateDir = t.TempDir()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(cfg.Detect.StateDir, ingest.DeriveStateFileName)
	produce(0, 200)
	r := startPipeline(t, cfg, nil)
	defer r.stop(t, cfg.Run.ShutdownTimeout+10*time.Second)
	deadline := time.Now().Add(30 * time.Second)
	for n := 200; ; n += 10 {
		if _, err := os.Stat(path); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no derive state in state_dir while running, after %d records (model version %d)", n, r.p.Stats().ModelVersion.Load())
		}
		produce(n, 10) // (the save is made between two fetches)
		time.Sleep(100 * time.Millisecond)
	}
}
