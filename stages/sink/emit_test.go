package sink

import (
	"context"
	"testing"

	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/internal/testsupport/testbatch"
)

// TestSetEmit: a live reload of emit applies to the next Write; an invalid value is refused and
// the running one stays.
func TestSetEmit(t *testing.T) {
	testsupport.ForEachBroker(t, func(t *testing.T, br testsupport.Broker) {
		for _, format := range []Format{FormatJSON, FormatArrow} {
			t.Run(string(format), func(t *testing.T) {
				mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
				defer mem.AssertSize(t, 0)
				cfg := testConfig(t, br)
				cfg.Emit, cfg.Format = EmitOutliers, format
				s, err := New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				b := testbatch.New(t, mem, "sensors", features, false, true, sampleRows())
				defer b.Record.Release()
				outliers, rows := int64(0), int64(b.Len())
				for _, sc := range b.Scores {
					if sc.Outlier {
						outliers++
					}
				}
				write := func() int64 {
					before := s.Stats().Outputs
					if err := s.Write(context.Background(), b); err != nil {
						t.Fatalf("Write: %v", err)
					}
					return s.Stats().Outputs - before
				}
				// JSON writes one message per record; Arrow one per source partition with rows.
				count := func(all bool) int64 {
					if format == FormatJSON {
						if all {
							return rows
						}
						return outliers
					}
					parts := map[int32]bool{}
					for _, r := range sampleRows() {
						if all || r.Score.Outlier {
							parts[r.Partition] = true
						}
					}
					return int64(len(parts))
				}
				if got, want := write(), count(false); got != want {
					t.Fatalf("emit outliers: %d messages, want %d", got, want)
				}
				if err := s.SetEmit(EmitAll); err != nil {
					t.Fatal(err)
				}
				if s.Config().Emit != EmitAll {
					t.Errorf("Config().Emit = %q after SetEmit(all)", s.Config().Emit)
				}
				if got, want := write(), count(true); got != want {
					t.Fatalf("emit all: %d messages, want %d", got, want)
				}
				if err := s.SetEmit("some"); err == nil {
					t.Error("SetEmit(\"some\"): want an error")
				}
				if got, want := write(), count(true); got != want {
					t.Errorf("after a refused SetEmit: %d messages, want %d (emit all kept)", got, want)
				}
			})
		}
	})
}
