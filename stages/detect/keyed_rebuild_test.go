package detect

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
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
		s, mem, done := fleetStage(t, cfg)
		feedRows(t, s, mem, rows, 0, g, atRow, inPartition0)
		var last *Ranker
		var builds []int // the records of k after which its model changed
		feed := func(lo, hi int) {
			for i := lo; i < hi; i++ { // a record a batch: each record's cadence seen as it comes
				feedRows(t, s, mem, rows, i, i+1, atRow, inPartition0)
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
		done()
	}
}

// TestKeysRebuildRecordsLiveKeepsPhase: a live change of keys.rebuild_records keeps each key's
// place between its rebuilds, so the fleet's rebuilds go on at the new steady rate. Before, a
// halved cadence (50 -> 25) made every key 24 or more records past its last build rebuild at
// its next record: about half the fleet within one pass over it (half a million builds within
// a second at a million keys: 30-40 s of the H100 host's cores, docs/BENCHMARKS.md §13.1.17).
func TestKeysRebuildRecordsLiveKeepsPhase(t *testing.T) {
	const keys = 200
	rows := fleet(keys, 60000, 0, 5) // ~300 records a key, in random order: the keys' phases spread
	cfg := keyedConfig()
	s, mem, done := fleetStage(t, cfg)
	defer done()
	feedRows(t, s, mem, rows, 0, len(rows), atRow, inPartition0)
	// rebuilt feeds one record of every key, in one batch, and counts the keys whose model changed.
	own := map[string]float32{} // a value of each key's own (its last)
	for _, r := range rows {
		own[r.key] = r.value
	}
	off := len(rows)
	rebuilt := func() int {
		pass := make([]fleetRow, keys)
		before := make([]*Ranker, keys)
		for i := range pass {
			key := fmt.Sprintf("sensor-%03d", i)
			pass[i] = fleetRow{key: key, value: own[key]}
			before[i], _ = s.KeyModelOf(pass[i].key)
		}
		feedRows(t, s, mem, pass, 0, keys, func(i int) int64 { return int64(off + i) }, inPartition0)
		off += keys
		n := 0
		for i := range pass {
			if m, _ := s.KeyModelOf(pass[i].key); m != before[i] {
				n++
			}
		}
		return n
	}
	// A pass rebuilds keys/cadence keys on average; 3x that is 5-6 standard deviations above
	// (binomial: 8 +- 2.8 at 25) and far below the burst (about 104).
	if n := rebuilt(); n > 3*keys/50 {
		t.Fatalf("every 50: %d keys of %d rebuilt in one pass over the fleet, want about %d", n, keys, keys/50)
	}
	cfg.Keys.RebuildRecords = 25
	if _, err := s.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	for pass := range 3 {
		if n := rebuilt(); n > 3*keys/25 {
			t.Fatalf("every 25, pass %d after the change: %d keys of %d rebuilt, want about %d", pass, n, keys, keys/25)
		}
	}
}
