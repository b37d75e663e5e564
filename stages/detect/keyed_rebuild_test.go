package detect

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/rs/zerolog"
)

// TestKeysRebuildRecords: a key's model is built when its window first holds keys.min_records,
// then after every keys.rebuild_records of its records (0: a quarter of keys.window), and a live
// change of it applies from the next record.
func TestKeysRebuildRecords(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const g = 1000 // the global model's min_records (keyedConfig): records before it go to no key
	rows := make([]fleetRow, g+47)
	for i := range rows {
		rows[i] = fleetRow{key: fmt.Sprintf("g%d", i%100), value: float32(20 + r.NormFloat64())}
		if i >= g {
			rows[i].key = "k"
		}
	}
	for _, c := range []struct {
		every int
		want  []int
	}{{0, []int{20, 30, 40}}, {7, []int{20, 27, 34, 41}}, {40, []int{20}}} {
		cfg := keyedConfig()
		cfg.Keys.Window, cfg.Keys.MinRecords, cfg.Keys.K, cfg.Keys.RebuildRecords = 40, 20, 5, c.every
		mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
		s, err := NewStage(cfg, []string{"value"}, false, Deps{Log: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		one := func(i int) int64 { return int64(i) }
		part := func(string) int32 { return 0 }
		feedRows(t, s, mem, rows, 0, g, one, part)
		var last *Ranker
		var builds []int // the records of k after which its model changed
		feed := func(lo, hi int) {
			for i := lo; i < hi; i++ { // a record a batch: each record's cadence seen as it comes
				feedRows(t, s, mem, rows, i, i+1, one, part)
				if m, _ := s.KeyModelOf("k"); m != last {
					builds, last = append(builds, i-g+1), m
				}
			}
		}
		feed(g, g+41)
		if !slices.Equal(builds, c.want) {
			t.Errorf("rebuild_records %d: models after records %v of the key, want %v", c.every, builds, c.want)
		}
		if c.every == 7 { // live: every 3 from now
			cfg.Keys.RebuildRecords = 3
			rc, err := s.Reconfigure(cfg)
			if err != nil || len(rc.Live) != 1 || rc.Live[0] != "detect.keys.rebuild_records" || len(rc.Rebuild) != 0 {
				t.Fatalf("want keys.rebuild_records applied live: %v, %+v", err, rc)
			}
			feed(g+41, g+47)
			if want := []int{20, 27, 34, 41, 44, 47}; !slices.Equal(builds, want) {
				t.Errorf("rebuild_records 7, then 3 from record 41: models after records %v, want %v", builds, want)
			}
		}
		s.Close()
		mem.AssertSize(t, 0)
	}
}
