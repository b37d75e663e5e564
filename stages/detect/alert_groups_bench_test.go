package detect

import (
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/internal/testsupport/testbatch"
)

// BenchmarkAlertFold: the alert groups' cost a batch in a stream below their bound: 8,192
// records of 1,000 keys on four partitions, 1% flagged, cooldown 10m (the partitions' clocks
// read every record; the groups only the flagged ones).
func BenchmarkAlertFold(b *testing.B) {
	t0 := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	rows := make([]testbatch.Row, 8192)
	for i := range rows {
		rows[i] = testbatch.Row{Partition: int32(i / 2048), Offset: int64(i), Key: []byte(fleetKey(i % 1000)),
			Time: t0.Add(time.Duration(i) * time.Millisecond), Features: []float32{0},
			Score: batch.Score{Scored: true, Outlier: i%100 == 0}}
	}
	bt := testbatch.New(b, memory.DefaultAllocator, "t", []string{"x"}, false, true, rows)
	defer bt.Release()
	var g alertGroups
	b.ResetTimer()
	for range b.N {
		g.fold(bt, 10*time.Minute)
	}
}

// BenchmarkAlertFoldPastLimit: the worst case past the bound: every record of every batch
// (8,192 a batch, 1 ms apart, cooldown 1h) a new key's alert within its cooldown, so that the
// groups stay at maxAlertKeys and each new one needs room (ns/op: a batch's fold). Folded: each
// key's alert followed by a record folded into it (4,096 keys a batch), so that every group
// evicted carries its count (alert_carry.go), the carried counts past their bound too.
func BenchmarkAlertFoldPastLimit(b *testing.B) {
	for _, folded := range []bool{false, true} {
		b.Run(map[bool]string{false: "alerts", true: "folded"}[folded], func(b *testing.B) { benchFoldPastLimit(b, folded) })
	}
}

func benchFoldPastLimit(b *testing.B, folded bool) {
	t0 := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	var g alertGroups
	next := 0
	batchOf := func() *batch.Batch {
		rows := make([]testbatch.Row, 8192)
		for i := 0; i < len(rows); i++ {
			rows[i] = flaggedRow(fleetKey(next), int32(next%4), t0.Add(time.Duration(next)*time.Millisecond))
			if folded && i+1 < len(rows) {
				i++
				rows[i] = rows[i-1]
			}
			next++
		}
		return testbatch.New(b, memory.DefaultAllocator, "t", []string{"x"}, false, true, rows)
	}
	for range 2 * maxAlertKeys / 8192 { // (the groups at the bound first)
		bt := batchOf()
		g.fold(bt, time.Hour)
		bt.Release()
	}
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		bt := batchOf()
		b.StartTimer()
		g.fold(bt, time.Hour)
		b.StopTimer()
		bt.Release()
		b.StartTimer()
	}
}
