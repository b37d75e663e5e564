package detect

import (
	"strconv"
	"testing"

	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/internal/testsupport/testbatch"
)

// BenchmarkCapAlarms is capAlarms on a batch of 65,536 records of 1,000 interleaved keys: under
// key_by: none with no series in alarm and with one throughout (its first record flagged, the
// others held), and under
// key_by: key with every key warm, one key's record flagged by the global model first (its
// key's own records then decided by its cap: nothing looked up) or none. ns/op over 65,536 records; allocs/op are
// per batch (a record's own allocation would be 65,536 of them).
func BenchmarkCapAlarms(b *testing.B) {
	const n = 1 << 16
	for _, c := range []struct {
		name    string
		keyBy   KeyBy
		alarmed bool
	}{{"none", KeyByNone, false}, {"none-alarm", KeyByNone, true}, {"key", KeyByKey, false}, {"key-alarm", KeyByKey, true}} {
		b.Run(c.name, func(b *testing.B) {
			mem := memory.NewGoAllocator()
			rows := make([]testbatch.Row, n)
			for i := range rows {
				rows[i] = testbatch.Row{Offset: int64(i), Features: []float32{0}, Key: []byte("sensor-" + strconv.Itoa(i%1000))}
			}
			bt := testbatch.New(b, mem, "fleet", []string{"x"}, false, false, rows)
			defer bt.Release()
			cfg := Default()
			cfg.KeyBy = c.keyBy
			bt.Scores = make([]batch.Score, n)
			for i := range bt.Scores {
				bt.Scores[i] = batch.Score{Scored: true, Score: 0.5, Threshold: cfg.MinScore, ByKey: c.keyBy == KeyByKey}
			}
			if c.alarmed { // sensor-0's first record flagged, the next held (key_by: none): in alarm throughout
				bt.Scores[0] = batch.Score{Scored: true, Score: 9, Threshold: cfg.MinScore, Outlier: true}
				for i := 1000; i < n && c.keyBy == KeyByNone; i += 1000 {
					bt.Scores[i].Score = 4
				}
			}
			s := &Stage{cfg: cfg, recs: newWindowRing(64), pending: map[*batch.Batch]uint64{}, alarms: newAlarmCap(cfg.Window)}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if c.alarmed {
					bt.Scores[0].Outlier = true
				}
				s.capAlarms(bt, true)
			}
		})
	}
}
