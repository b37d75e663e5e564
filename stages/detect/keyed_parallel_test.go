package detect

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/outlierd/outlierd/internal/testsupport/testbatch"
)

// TestKeyedParallelMatchesSerial: through the whole stage (the global model, the keys' models,
// the caps, the recent ranks, the explanations), the keys' parallel path on 8 workers gives
// every record the serial path's scores bit for bit, and leaves the same keys in the same
// least-recently-seen order with the same stats: a fleet within keys.max_keys (every batch
// parallel, keys rebuilt several times a batch) and one growing past it (parallel while the new
// keys fit, serial once they evict).
func TestKeyedParallelMatchesSerial(t *testing.T) {
	defer func(p int) { parallelGrain = p }(parallelGrain)
	parallelGrain = 16
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(8))
	for _, c := range []struct {
		name                   string
		sensors, rows, joining int
		maxKeys                int
		maxBytesKeys           int // keys.max_bytes: this many warm keys' bytes (0: no bound)
	}{
		{"within max_keys", 40, 12000, 0, 100000, 0},
		{"growing past max_keys", 130, 16000, 100, 120, 0},
		{"growing past max_bytes", 130, 16000, 100, 100000, 60},
	} {
		t.Run(c.name, func(t *testing.T) {
			rows := joiningFleet(c.sensors, c.rows, c.joining, 0.01, 3, "sensor-%03d")
			cfg := keyedConfig()
			cfg.Keys.MaxKeys = c.maxKeys
			cfg.Keys.MaxBytes = int64(c.maxBytesKeys) * (keyBytes(cfg.Keys.Window, 1, true) + recentBytes(cfg.RecentScores, cfg.RecentBlocks()))
			run := func(serial bool) ([]string, *keyedScorer) {
				s, mem, done := fleetStage(t, cfg)
				defer done()
				s.keyed.serial = serial
				sc := feedRows(t, s, mem, rows, 0, len(rows), atRow, inPartition0)
				out := make([]string, len(sc))
				for i, x := range sc { // (%+v: NaN equals NaN; the bits of the score besides)
					out[i] = fmt.Sprintf("%+v %x %x", x, math.Float64bits(x.Score), math.Float64bits(x.Recent))
				}
				return out, s.keyed
			}
			want, ks := run(true)
			got, kp := run(false)
			if len(got) != len(want) {
				t.Fatalf("%d scores, want %d", len(got), len(want))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("record %d: parallel %s\nserial %s", i, got[i], want[i])
				}
			}
			if ks.stats() != kp.stats() || !reflect.DeepEqual(recencyOrder(ks), recencyOrder(kp)) {
				t.Fatalf("stats %+v and %+v, or the keys' order differ", ks.stats(), kp.stats())
			}
			if (c.maxKeys < c.sensors || c.maxBytesKeys > 0) && ks.stats().Evictions == 0 || ks.stats().Live == 0 {
				t.Fatalf("stats %+v: no key evicted or none warm: the case misses its point", ks.stats())
			}
			t.Logf("stats %+v", kp.stats())
		})
	}
}

// TestKeyedParallelNearMaxBytes: a warm fleet whose bytes sit near keys.max_bytes takes the
// parallel path for a batch that makes no key (the serial path evicts only when it makes one)
// and for one whose new key fits with its first model; not for one whose new key may not fit.
// Before, the bound counted a first model for every record of the batch, warm keys' included
// (500 records: about 6 MB at the defaults), so such a fleet took the serial path batch after
// batch (the docs say: while the keys held fit max_bytes with the batch's new ones).
func TestKeyedParallelNearMaxBytes(t *testing.T) {
	rows := joiningFleet(40, 12000, 0, 0.01, 3, "sensor-%03d")
	cfg := keyedConfig()
	s, mem, done := fleetStage(t, cfg)
	defer done()
	feedRows(t, s, mem, rows, 0, len(rows), atRow, inPartition0)
	k := s.keyed
	if st := k.stats(); st.Live != 40 || st.Warming != 0 {
		t.Fatalf("stats %+v: want the 40 keys warm", st)
	}
	w := cfg.Keys.Window
	newKey := keyBytes(w, 1, true) + recentBytes(cfg.RecentScores, cfg.RecentBlocks()) + int64(len("sensor-new")) // a new key with its first model, and its name
	held := make([]*keyState, 0, 40)
	k.lru.each(func(st *keyState) { held = append(held, st) })
	batchOf := func(fresh bool) ([]*keyState, *array.Binary) {
		kb := array.NewBinaryBuilder(memory.DefaultAllocator, arrow.BinaryTypes.Binary)
		defer kb.Release()
		sts := make([]*keyState, 500)
		for i := range sts {
			st := held[i%len(held)]
			if fresh && i == 250 {
				kb.Append([]byte("sensor-new"))
				continue
			}
			sts[i] = st
			kb.Append([]byte(st.key))
		}
		return sts, kb.NewBinaryArray()
	}
	for _, c := range []struct {
		name     string
		fresh    bool
		headroom int64
		want     bool
	}{
		{"no new key, 1 KB left", false, 1 << 10, true},
		{"a new key that fits", true, newKey, true},
		{"a new key that may not fit", true, newKey - 1, false},
	} {
		sts, keys := batchOf(c.fresh)
		cc := cfg
		cc.Keys.MaxBytes = k.bytes + c.headroom
		before := len(k.keys)
		got := k.makeNewKeys(sts, keys, &cc, 1, nil)
		keys.Release()
		if got != c.want {
			t.Errorf("%s: parallel %v, want %v", c.name, got, c.want)
		}
		if got && c.fresh { // (made: drop it again, untouched, for the next case)
			st := k.keys["sensor-new"]
			k.bytes -= k.bytesOf(w, 1, false) + recentBytes(cfg.RecentScores, cfg.RecentBlocks()) + int64(len(st.key))
			delete(k.keys, st.key)
		}
		if len(k.keys) != before {
			t.Fatalf("%s: %d keys held, want %d", c.name, len(k.keys), before)
		}
	}
}

// TestKeyedRowsLeftToTheirKeys: the global model leaves the records of warm keys to their key's
// model (globalRows: it does not score them) and scores afterwards those whose key did not score
// them (evicted before them within the batch: scoreLeftOver), and the keys' pass runs beside the
// global scoring into scores of its own merged afterwards (keyedBeside, with a keyed device);
// every record's scores, verdicts and explanations, the keys' stats and order are those of the
// global model scoring every record (globalScoresAll, its fields then cleared on the records
// their key scored) and the keys' pass after the global decision, bit for bit, on a fleet
// growing past keys.max_keys, on the serial and parallel paths, on the CPU and with a keyed
// device (its CPU twin); and the case of a warm key's record left to the global model occurs.
func TestKeyedRowsLeftToTheirKeys(t *testing.T) {
	defer func(p int) { parallelGrain = p }(parallelGrain)
	parallelGrain = 16
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(8))
	defer func(c, b bool) { globalScoresAll, keyedBeside = c, b }(globalScoresAll, keyedBeside)
	t0 := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	var rows []fleetRow
	cfg := keyedConfig()
	run := func(every, beside, serial, dev bool) (out []string, leftOver, byKey int, k *keyedScorer) {
		globalScoresAll, keyedBeside = every, beside
		s, mem, done := fleetStage(t, cfg)
		defer done()
		s.keyed.serial = serial
		if dev {
			s.keyed.dev = newTwinKeyed(cfg.Keys.Window)
		}
		for at := 0; at < len(rows); at += 500 {
			var tr []testbatch.Row
			warm := map[string]bool{}
			for i := at; i < min(at+500, len(rows)); i++ {
				tr = append(tr, testbatch.Row{Offset: int64(i), Key: []byte(rows[i].key), Time: t0.Add(time.Duration(i) * time.Second), Features: []float32{rows[i].value}})
				if st := s.keyed.keys[rows[i].key]; st != nil && st.model != nil {
					warm[rows[i].key] = true
				}
			}
			bs, err := s.Process(context.Background(), testbatch.New(t, mem, "fleet", []string{"value"}, false, false, tr))
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range bs {
				for i, x := range b.Scores {
					out = append(out, fmt.Sprintf("%+v %x %x", x, math.Float64bits(x.Score), math.Float64bits(x.Recent)))
					if x.Scored && !x.ByKey && warm[rows[at+i].key] && s.model != nil && s.model.Ranker != nil {
						leftOver++
					}
					if x.ByKey {
						byKey++
					}
				}
				b.Release()
			}
			s.collect(true)
		}
		return out, leftOver, byKey, s.keyed
	}
	for _, c := range []struct {
		name                   string
		sensors, rows, joining int
		maxKeys                int
	}{
		{"growing past max_keys", 130, 16000, 100, 120}, // warm keys evicted before their records
		{"within max_keys", 40, 12000, 0, 100000},       // the parallel path, every key warm
	} {
		rows = joiningFleet(c.sensors, c.rows, c.joining, 0.01, 3, "sensor-%03d")
		cfg.Keys.MaxKeys = c.maxKeys
		grows := c.maxKeys < c.sensors
		for _, serial := range []bool{true, false} {
			for _, dev := range []bool{false, true} {
				want, _, _, kw := run(true, false, serial, dev)
				for _, beside := range []bool{false, true} {
					if beside && !dev {
						continue // (beside the global scoring only with the keys' models on a device)
					}
					got, left, byKey, kg := run(false, beside, serial, dev)
					if len(got) != len(want) {
						t.Fatalf("serial %v, device %v, beside %v: %d scores, want %d", serial, dev, beside, len(got), len(want))
					}
					for i := range want {
						if got[i] != want[i] {
							t.Fatalf("serial %v, device %v, beside %v, record %d: %s\nwant %s", serial, dev, beside, i, got[i], want[i])
						}
					}
					if kg.stats() != kw.stats() || !reflect.DeepEqual(recencyOrder(kg), recencyOrder(kw)) {
						t.Fatalf("serial %v, device %v, beside %v: stats %+v, want %+v, or the keys' order differs", serial, dev, beside, kg.stats(), kw.stats())
					}
					if grows && (left == 0 || kg.stats().Evictions == 0) || !grows && byKey < len(got)/2 {
						t.Fatalf("%s, serial %v, device %v: %d records of warm keys left to the global model, %d by key: the case misses its point", c.name, serial, dev, left, byKey)
					}
					t.Logf("%s, serial %v, device %v, beside %v: %d records by key, %d of keys warm before their batch scored by the global model, of %d; %+v", c.name, serial, dev, beside, byKey, left, len(got), kg.stats())
				}
			}
		}
	}
}
