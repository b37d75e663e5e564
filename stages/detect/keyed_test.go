package detect

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/algo/quality"
	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/internal/testsupport/testbatch"
)

// fleetRow is one reading of a fleet: its sensor, value and label.
type fleetRow struct {
	key   string
	value float32
	spike bool
}

// fleet is issue 21's fleet: sensors with baselines spread over 0..1000 and noise sd 1..5,
// readings in random sensor order, spikes of +8 sd of the sensor's own noise on rate of them.
func fleet(sensors, rows int, rate float64, seed uint64) []fleetRow {
	return joiningFleet(sensors, rows, 0, rate, seed, "sensor-%03d")
}

// joiningFleet is fleet where sensor s sends from row s*joinEvery on (0: every sensor from
// the first row), each row from a sensor drawn uniformly among those joined; keys are
// fmt.Sprintf(name, s).
func joiningFleet(sensors, rows, joinEvery int, rate float64, seed uint64, name string) []fleetRow {
	r := rand.New(rand.NewPCG(seed, 21))
	base, sd := make([]float64, sensors), make([]float64, sensors)
	for i := range sensors {
		base[i], sd[i] = 1000*r.Float64(), 1+4*r.Float64()
	}
	out := make([]fleetRow, rows)
	for i := range out {
		joined := sensors
		if joinEvery > 0 {
			joined = min(sensors, i/joinEvery+1)
		}
		s := r.IntN(joined)
		v := base[s] + sd[s]*r.NormFloat64()
		spike := r.Float64() < rate
		if spike {
			v += 8 * sd[s]
		}
		out[i] = fleetRow{key: fmt.Sprintf(name, s), value: float32(v), spike: spike}
	}
	return out
}

// runFleet feeds rows (offsets: their offsets, partition 0) through a new keyed stage in
// batches of 500 and returns the records' scores in order.
func runFleet(t testing.TB, cfg Config, rows []fleetRow, offsets []int64) []batch.Score {
	t.Helper()
	s, mem, done := fleetStage(t, cfg)
	defer done()
	return feedRows(t, s, mem, rows, 0, len(rows), func(i int) int64 { return offsets[i] }, inPartition0)
}

// fleetStage is a stage of cfg over the fleet's one feature, "value", and a checked allocator for
// the batches fed to it; done closes the stage and checks that every batch's memory came back.
func fleetStage(t testing.TB, cfg Config) (s *Stage, mem *memory.CheckedAllocator, done func()) {
	t.Helper()
	mem = memory.NewCheckedAllocator(memory.DefaultAllocator)
	s, err := NewStage(cfg, []string{"value"}, false, Deps{Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	return s, mem, func() {
		s.Close()
		mem.AssertSize(t, 0)
	}
}

// atRow and inPartition0 are feedRows' offset and partition of a stream read at once: record i
// at offset i, every key in partition 0.
func atRow(i int) int64 { return int64(i) }

func inPartition0(string) int32 { return 0 }

// feedRows runs rows[lo:hi] through s in batches of 500 (record i at offset(i), in partition
// partition(its key), one second after the one before) and returns their scores in order.
func feedRows(t testing.TB, s *Stage, mem memory.Allocator, rows []fleetRow, lo, hi int, offset func(int) int64, partition func(string) int32) []batch.Score {
	t.Helper()
	t0 := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	out := make([]batch.Score, 0, hi-lo)
	take := func(bs []*batch.Batch) {
		for _, b := range bs {
			out = append(out, b.Scores...)
			b.Release()
		}
	}
	for at := lo; at < hi; at += 500 {
		var tr []testbatch.Row
		for i := at; i < min(at+500, hi); i++ {
			tr = append(tr, testbatch.Row{Partition: partition(rows[i].key), Offset: offset(i), Key: []byte(rows[i].key),
				Time: t0.Add(time.Duration(i) * time.Second), Features: []float32{rows[i].value}})
		}
		bs, err := s.Process(context.Background(), testbatch.New(t, mem, "fleet", []string{"value"}, false, false, tr))
		if err != nil {
			t.Fatal(err)
		}
		take(bs)
		s.collect(true)
	}
	bs, err := s.Flush()
	if err != nil {
		t.Fatal(err)
	}
	take(bs)
	return out
}

// keyedConfig is the default configuration with key_by: key and, to keep the test short, a
// global window of 5000 (the keys' settings stay the defaults).
func keyedConfig() Config {
	cfg := Default()
	cfg.KeyBy = KeyByKey
	cfg.Window, cfg.MinRecords, cfg.Distance.N = 5000, 1000, 5
	return cfg
}

// TestFleetPerKeyModels: 200 sensors, baselines over 0..1000, noise sd 1..5, 0.2% spikes of +8
// sd of the sensor's own noise (issue 21's fleet): one model for the topic cannot see them (a
// spike of one sensor sits inside the others' range); a model per key does: AP >= 0.9, recall
// >= 0.8, precision >= 0.5 over the whole stream of 1000 readings a sensor, the keys' warm-up
// (keys.min_records = 30 readings each, 3% of the stream, scored by the global model, which
// misses their spikes) included. (With keys.min_records 50, at 600 readings a sensor the warm-up
// was 8% and the whole stream's AP 0.86, the warm keys' own 0.96.)
func TestFleetPerKeyModels(t *testing.T) {
	rows := fleet(200, 200000, 0.002, 1) // 1000 readings a sensor, 30 of them warm-up
	offs := make([]int64, len(rows))
	label := make([]bool, len(rows))
	for i := range rows {
		offs[i], label[i] = int64(i), rows[i].spike
	}
	for _, keyed := range []bool{false, true} {
		cfg := keyedConfig()
		if !keyed {
			cfg.KeyBy = KeyByNone
		}
		sc := runFleet(t, cfg, rows, offs)
		scores, flags := make([]float64, len(sc)), make([]bool, len(sc))
		warming := 0
		for i, s := range sc {
			scores[i], flags[i] = s.Score, s.Outlier
			if s.Warming {
				warming++
			}
		}
		c := quality.Count(flags, label)
		ap := quality.AveragePrecision(scores, label)
		var ws []float64
		var wl []bool
		for i, s := range sc {
			if s.ByKey {
				ws, wl = append(ws, s.Score), append(wl, label[i])
			}
		}
		if keyed {
			t.Logf("AP of the records scored by their key's model: %.3f", quality.AveragePrecision(ws, wl))
		}
		t.Logf("keyed %v: spikes %d, flagged %d, precision %.3f, recall %.3f, AP %.3f, scored while warming %d", keyed, c.TP+c.FN, c.TP+c.FP, c.Precision(), c.Recall(), ap, warming)
		if keyed && (ap < 0.9 || c.Recall() < 0.8 || c.Precision() < 0.5) {
			t.Errorf("per key: AP %.3f, recall %.3f, precision %.3f: want >= 0.9, 0.8, 0.5", ap, c.Recall(), c.Precision())
		}
		if !keyed && c.Recall() > 0.5 {
			t.Errorf("one model for the fleet found %.2f of the spikes: the test no longer shows the need", c.Recall())
		}
	}
}

// TestWarmKeyScoresAsAlone: once a key is warm, its records get the same scores and verdicts in
// the keyed stream as when that key's records are replayed alone (its model depends on its own
// records only). Under keys.tail: own only: under fleet (the default) a key's scores are also
// read against the tail of the fleet's other keys' records (keyed_fleet.go).
func TestWarmKeyScoresAsAlone(t *testing.T) {
	rows := fleet(20, 20000, 0.002, 2)
	offs := make([]int64, len(rows))
	for i := range rows {
		offs[i] = int64(i)
	}
	cfg := keyedConfig()
	cfg.Keys.Tail = TailOwn
	all := runFleet(t, cfg, rows, offs)
	var alone []fleetRow
	var aloneOffs []int64
	var idx []int
	for i, r := range rows {
		if r.key == "sensor-007" {
			alone, aloneOffs, idx = append(alone, r), append(aloneOffs, offs[i]), append(idx, i)
		}
	}
	cfg.Window, cfg.MinRecords, cfg.Density.Clusters = 500, 100, 50 // the key alone's global model (it scores only the warm-up)
	solo := runFleet(t, cfg, alone, aloneOffs)
	warm := 0
	for t2, i := range idx {
		a, b := all[i], solo[t2]
		if a.ByKey != b.ByKey {
			t.Fatalf("record %d of the key: by key %v in the fleet, %v alone", t2, a.ByKey, b.ByKey)
		}
		if !a.ByKey {
			continue
		}
		warm++
		if math.Float64bits(a.Score) != math.Float64bits(b.Score) || a.Outlier != b.Outlier || a.Suppressed != b.Suppressed {
			t.Fatalf("record %d of the key: score %v flag %v in the fleet, %v %v alone", t2, a.Score, a.Outlier, b.Score, b.Outlier)
		}
		// The whole record, not only the verdict: a warm key's record carries its key's
		// model's fields alone (none of the global model's, which differs between the fleet
		// and the key alone). But Recent: the key's ring of recent scores holds its warm-up
		// records' scores, which the global model gave.
		a.Recent, b.Recent = 0, 0
		if fa, fb := scoreText(a), scoreText(b); fa != fb {
			t.Fatalf("record %d of the key:\nin the fleet %s\nalone        %s", t2, fa, fb)
		}
	}
	if warm < len(idx)/2 {
		t.Fatalf("%d of %d records scored by the key's model", warm, len(idx))
	}
}

// scoreText is every field of a score, floats by their bits.
func scoreText(s batch.Score) string {
	return fmt.Sprintf("%+v score %x recent %x dens %x dist %x eta %x weight %x wstar %x", s, math.Float64bits(s.Score), math.Float64bits(s.Recent),
		math.Float64bits(s.DensityScore), math.Float64bits(s.DistanceScore), math.Float64bits(s.EtaProbability), math.Float64bits(s.Weight), math.Float64bits(s.WStar))
}

// countingDetector counts the records a global detector scores.
type countingDetector struct {
	Detector
	rows *int
}

func (c countingDetector) Score(q *Query, out []batch.Score) error {
	*c.rows += len(out)
	return c.Detector.Score(q, out)
}

// TestWarmKeysSkipGlobalScoring: with key_by set, the global model scores the records of keys
// still warming and no record of a warm key (their key's model judges them alone): its
// detectors see exactly the batch's records whose key had no model when the batch began, and a
// warm key's record carries none of the paper's global fields (density and distance verdicts,
// eta-probability, w_k(q,S), w*, subspace, hypercube), with the hypercube on so that it would.
// The global model still learns from every record: its window holds the whole stream.
func TestWarmKeysSkipGlobalScoring(t *testing.T) {
	cfg := keyedConfig()
	cfg.Hypercube.Enabled = true
	rows := joiningFleet(40, 12000, 100, 0.01, 4, "sensor-%03d") // keys join through the stream: some warming in most batches
	s, mem, done := fleetStage(t, cfg)
	defer done()
	var seen int
	for i, d := range s.detectors {
		s.detectors[i] = countingDetector{d, &seen}
	}
	t0 := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	var byKey, warming, allWarm int
	for at := 0; at < len(rows); at += 500 {
		var tr []testbatch.Row
		cold := 0
		for i := at; i < at+500; i++ {
			tr = append(tr, testbatch.Row{Offset: int64(i), Key: []byte(rows[i].key), Time: t0.Add(time.Duration(i) * time.Second), Features: []float32{rows[i].value}})
			if st := s.keyed.keys[rows[i].key]; st == nil || st.model == nil {
				cold++
			}
		}
		modelled := s.model != nil
		seen = 0
		bs, err := s.Process(context.Background(), testbatch.New(t, mem, "fleet", []string{"value"}, false, false, tr))
		if err != nil {
			t.Fatal(err)
		}
		if modelled {
			if want := cold * len(s.detectors); seen != want {
				t.Fatalf("batch at %d: the global detectors scored %d records (over %d detectors), want the %d of keys without a model", at, seen, len(s.detectors), cold)
			}
			if cold == 0 {
				allWarm++
			}
		}
		for _, b := range bs {
			for _, sc := range b.Scores {
				switch {
				case sc.ByKey:
					byKey++
					if sc.DensityOutlier || sc.DistanceOutlier || sc.EtaProbability != 0 || sc.Weight != 0 || sc.WStar != 0 || sc.Subspace != nil || sc.SubspaceOf != "" || sc.Hypercube != nil {
						t.Fatalf("a warm key's record carries the global model's fields: %+v", sc)
					}
				case sc.Warming && sc.Scored:
					warming++
					if sc.Hypercube == nil || sc.WStar == 0 {
						t.Fatalf("a warming key's record without the global model's fields: %+v", sc)
					}
				}
			}
			b.Release()
		}
		s.collect(true)
	}
	if byKey < len(rows)/2 || warming == 0 || allWarm == 0 {
		t.Fatalf("%d records by key, %d warming, %d batches all warm: the stream misses the point", byKey, warming, allWarm)
	}
	if s.win.Len() != cfg.Window {
		t.Fatalf("the global window holds %d records, want %d: it learns from every record", s.win.Len(), cfg.Window)
	}
}

// TestKeysEvictedLeastRecentlySeen: past keys.max_keys the key seen least recently goes (and
// starts cold again); the stats count live, warming, evictions and bytes.
func TestKeysEvictedLeastRecentlySeen(t *testing.T) {
	cfg := keyedConfig()
	cfg.Keys.MaxKeys = 3
	k := newKeyedScorer()
	for _, key := range []string{"a", "b", "c", "a", "d"} {
		k.state(key, &cfg, 2)
	}
	if _, ok := k.keys["b"]; ok || len(k.keys) != 3 || k.evictions != 1 {
		t.Fatalf("keys %v, evictions %d: want b evicted (least recently seen)", k.keys, k.evictions)
	}
	st := k.stats()
	if st.Warming != 3 || st.Live != 0 || st.Bytes != 3*(keyBytes(cfg.Keys.Window, 2, false)+recentBytes(cfg.RecentScores, cfg.RecentBlocks())+1) { // (+1: each key's name, a byte)
		t.Fatalf("stats %+v", st)
	}
}

// BenchmarkKeyedStage: the detect stage with key_by: key and the default settings, 3 features,
// batches of 1000 records of random keys, every key's window full before the timer (each key's
// keys.window records pushed first: its steady state); reports records/s, the bytes a key is accounted, and
// the heap's growth over the warm-up per key (after a GC).
func BenchmarkKeyedStage(b *testing.B) {
	for _, c := range []struct {
		keys int
		tail KeysTail
	}{{1000, TailOwn}, {10000, TailOwn}, {100000, TailOwn}, {1000, TailFleet}, {10000, TailFleet}, {100000, TailFleet}} {
		keys, name := c.keys, fmt.Sprintf("keys=%d", c.keys)
		if c.tail != TailOwn { // (keys.tail: fleet, keyed_fleet.go; the default's names as they were)
			name += ",tail=" + string(c.tail)
		}
		b.Run(name, func(b *testing.B) {
			if keys > 10000 && testing.Short() {
				b.Skip("100,000 keys: a 20M-record warm-up")
			}
			cfg := Default()
			cfg.KeyBy, cfg.Keys.Tail = KeyByKey, c.tail
			mem := memory.NewGoAllocator()
			s, err := NewStage(cfg, []string{"a", "b", "c"}, false, Deps{Log: zerolog.Nop()})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			r := rand.New(rand.NewPCG(5, 5))
			names := make([][]byte, keys)
			for i := range names {
				names[i] = []byte(fmt.Sprintf("key-%06d", i))
			}
			var off int64
			t0 := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
			next := func(key func(i int) int) *batch.Batch {
				rows := make([]testbatch.Row, 1000)
				for i := range rows {
					k := key(i)
					rows[i] = testbatch.Row{Offset: off, Key: names[k], Time: t0,
						Features: []float32{float32(k) + float32(r.NormFloat64()), float32(r.NormFloat64()), float32(r.NormFloat64())}}
					off++
				}
				return testbatch.New(b, mem, "bench", []string{"a", "b", "c"}, false, false, rows)
			}
			process := func(bt *batch.Batch) {
				out, err := s.Process(context.Background(), bt)
				if err != nil {
					b.Fatal(err)
				}
				for _, o := range out {
					o.Release()
				}
			}
			var m0, ms runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&m0)
			for n := 0; n < keys*cfg.Keys.Window; n += 1000 { // fill every key's window, in turn
				process(next(func(i int) int { return (n + i) % keys }))
			}
			s.collect(true)
			runtime.GC()
			runtime.ReadMemStats(&ms)
			st := s.KeyStats()
			batches := make([]*batch.Batch, b.N)
			for i := range batches {
				batches[i] = next(func(int) int { return r.IntN(keys) })
			}
			b.ResetTimer()
			stop := benchCPUProfile(b) // (OUTLIERD_BENCH_CPUPROFILE: the timed part alone)
			for _, bt := range batches {
				process(bt)
			}
			stop()
			b.StopTimer()
			b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "records/s")
			b.ReportMetric(float64(st.Bytes)/float64(keys), "bytes/key")
			// The heap's growth over the warm-up, per key: the keys' state, and the global window
			// and model filled meanwhile (at most a few MB: noticeable per key at 1,000 keys only).
			b.ReportMetric((float64(ms.HeapAlloc)-float64(m0.HeapAlloc))/float64(keys), "heap-bytes/key")
			if st.Live != keys {
				b.Fatalf("%d keys warm of %d", st.Live, keys)
			}
		})
	}
}
