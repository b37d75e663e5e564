package detect

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/internal/testsupport/testbatch"
)

// scorerWithModelOfA returns a new scorer of cfg, closed at the test's end, and a model of key a
// (a builder's, of 1000 + keys.min_records readings of a alone) for it to install.
func scorerWithModelOfA(t *testing.T, cfg Config) (*Stage, *Ranker) {
	t.Helper()
	var rows []fleetRow
	r := rand.New(rand.NewPCG(13, 13))
	for range 1000 + cfg.Keys.MinRecords {
		rows = append(rows, fleetRow{key: "a", value: float32(70 + 2*r.NormFloat64())})
	}
	_, leader, done := handoverRun(t, cfg, Deps{}, rows, 1000)
	km, _ := leader.KeyModelOf("a")
	done()
	if km == nil {
		t.Fatal("setup: no model of a")
	}
	s, err := NewStage(cfg, []string{"value"}, false, Deps{Log: zerolog.Nop(), Role: RoleScorer})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, km
}

// handoverRun feeds rows (key, value) through a new keyed stage of cfg and deps, cut into batches
// at cuts (restartFeed), and returns every record's score in order with the stage, open: the
// caller closes it (after reading its keys' models).
func handoverRun(t *testing.T, cfg Config, deps Deps, rows []fleetRow, cuts ...int) ([]batch.Score, *Stage, func()) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	deps.Log = zerolog.Nop()
	s, err := NewStage(cfg, []string{"value"}, false, deps)
	if err != nil {
		t.Fatal(err)
	}
	done := func() {
		s.Close()
		mem.AssertSize(t, 0)
	}
	out := restartFeed(t, s, mem, rows, 0, len(rows), cuts)
	return out, s, done
}

// bandValue is a value whose combined score by r lies within the deadband, [clear, min_score):
// found by bisection above the median of r's key (at 70 here).
func bandValue(t *testing.T, r *Ranker, cfg Config) (float32, float64) {
	t.Helper()
	want := (cfg.clearScore() + cfg.MinScore) / 2
	lo, hi := float32(70), float32(1000)
	for range 60 {
		mid := (lo + hi) / 2
		if r.ScoreRecord([]float32{mid}) < want {
			lo = mid
		} else {
			hi = mid
		}
	}
	sc := r.ScoreRecord([]float32{hi})
	if sc < cfg.clearScore() || sc >= cfg.MinScore {
		t.Fatalf("setup: no value scores within the deadband [%g, %g): %g scores %g", cfg.clearScore(), cfg.MinScore, hi, sc)
	}
	return hi, sc
}

// TestFlagClearContinuesAcrossKeyHandover: under key_by: key a key's series goes on when its own
// model takes over from the global model (the deadband, detect.flag_clear, holds a key's record
// after its series' flagged record, whichever model scored that one). Sensor a's fault starts
// while it warms: its last warming record is flagged by the global model; its first records
// its own model scores sit within the deadband and are held, then cleared below it. Both with
// the handover between batches and within one batch (the key's model built mid-batch, its
// warming record's flag decided after its keys' pass). Before, the key's own cap started fresh
// at its model: the fault was dropped at the handover.
func TestFlagClearContinuesAcrossKeyHandover(t *testing.T) {
	cfg := keyedConfig()
	r := rand.New(rand.NewPCG(7, 7))
	var rows []fleetRow
	for i := range 1200 { // the global model: ten sensors at 70 +- 2
		rows = append(rows, fleetRow{key: fmt.Sprintf("x%d", i%10), value: float32(70 + 2*r.NormFloat64())})
	}
	for range cfg.Keys.MinRecords - 1 { // a warms
		rows = append(rows, fleetRow{key: "a", value: float32(70 + 2*r.NormFloat64())})
	}
	last := len(rows) // a's last warming record: far out, flagged by the global model
	rows = append(rows, fleetRow{key: "a", value: 200})
	// a's model is built from its warm-up (the far-out reading left out: its first build's outcasts);
	// the value its model scores within the deadband comes from a first run up to it.
	_, s0, done0 := handoverRun(t, cfg, Deps{}, rows)
	km, _ := s0.KeyModelOf("a")
	if km == nil {
		t.Fatal("setup: a has no model after its warm-up")
	}
	v, vs := bandValue(t, km, cfg)
	done0()
	first := len(rows)
	rows = append(rows, fleetRow{key: "a", value: v}, fleetRow{key: "x1", value: 70}, fleetRow{key: "a", value: v}, fleetRow{key: "a", value: 70})
	defer func(p int) { parallelGrain = p }(parallelGrain)
	for _, c := range []struct {
		name  string
		cuts  []int
		deps  func() Deps
		grain int // parallelGrain: the keys' parallel path below the batch's records / 2
	}{
		{"between batches", []int{1000, first}, nil, 256},
		{"within a batch", []int{1000}, nil, 256},
		{"each record its batch", []int{1000, last, first, first + 1, first + 2, first + 3}, nil, 256},
		{"within a batch, parallel", []int{1000}, nil, 16},
		{"within a batch, keys on a device", []int{1000}, func() Deps {
			return Deps{Accelerator: &keyedTwinAccel{fakeAccel: fakeAccel{exact: true}}}
		}, 256},
		{"within a batch, keys on a device, parallel", []int{1000}, func() Deps {
			return Deps{Accelerator: &keyedTwinAccel{fakeAccel: fakeAccel{exact: true}}}
		}, 16},
		{"overlapped, chained keys' passes", []int{500, 1000, 1100, last, first, first + 2}, func() Deps {
			return Deps{Accelerator: &keyedTwinAccel{fakeAccel: fakeAccel{exact: true}}, Overlap: OverlapOnGPU}
		}, 256},
	} {
		t.Run(c.name, func(t *testing.T) {
			parallelGrain = c.grain
			var deps Deps
			if c.deps != nil {
				deps = c.deps()
			}
			out, _, done := handoverRun(t, cfg, deps, rows, c.cuts...)
			defer done()
			if w := out[last]; !w.Warming || !w.Outlier || w.Held {
				t.Fatalf("setup: a's last warming record: warming %v flagged %v held %v, score %g", w.Warming, w.Outlier, w.Held, w.Score)
			}
			for i, want := range []struct{ flag, held bool }{{true, true}, {false, false}, {true, true}, {false, false}} {
				sc := out[first+i]
				if rows[first+i].key == "a" && (!sc.ByKey || rows[first+i].value == v && sc.Score != vs) {
					t.Fatalf("setup: record %d scored by its key %v, score %g (want %g)", first+i, sc.ByKey, sc.Score, vs)
				}
				if sc.Outlier != want.flag || sc.Held != want.held {
					t.Errorf("record %d (%s, score %.3f): flagged %v held %v, want %v %v", first+i, rows[first+i].key, sc.Score, sc.Outlier, sc.Held, want.flag, want.held)
				}
				if want.held && (len(sc.Deviations) == 0 || Reason(&sc) == "") {
					t.Errorf("record %d held without an explanation: %q", first+i, Reason(&sc))
				}
			}
		})
	}
}

// TestFlagClearContinuesAfterKeyEviction: a key evicted with its last record flagged by its own
// cap (keys.max_keys reached by a new key) has its next record, warming again and scored by the
// global model, held by that flag when its score is within the deadband, and the series goes on
// on the global model's path until a record below it. Before, the key's series ended with its
// model: the record was not held.
func TestFlagClearContinuesAfterKeyEviction(t *testing.T) {
	cfg := keyedConfig()
	cfg.RefreshRecords, cfg.RecalibrateRecords, cfg.RefreshInterval = 1<<30, 1<<30, time.Hour // (one global model throughout)
	cfg.Keys.MaxKeys = 11
	r := rand.New(rand.NewPCG(8, 8))
	var rows []fleetRow
	for i := range 1200 {
		rows = append(rows, fleetRow{key: fmt.Sprintf("x%d", i%10), value: float32(70 + 2*r.NormFloat64())})
	}
	for range cfg.Keys.MinRecords {
		rows = append(rows, fleetRow{key: "a", value: float32(70 + 2*r.NormFloat64())})
	}
	flagged := len(rows) // a's model's record, far out: flagged by its cap
	rows = append(rows, fleetRow{key: "a", value: 200})
	for i := range 10 { // every other key seen after a, then a new key: a is evicted
		rows = append(rows, fleetRow{key: fmt.Sprintf("x%d", i), value: 70})
	}
	rows = append(rows, fleetRow{key: "z", value: 70})
	next := len(rows)
	// The value the global model scores within the deadband: probe keys' records (each warming)
	// after the same stream, one global model scoring both runs.
	probe := append([]fleetRow(nil), rows...)
	for i := range 400 {
		probe = append(probe, fleetRow{key: fmt.Sprintf("p%d", i), value: 70 + float32(i)*0.1})
	}
	pout, _, pdone := handoverRun(t, cfg, Deps{}, probe, 1000, next)
	pdone()
	want := (cfg.clearScore() + cfg.MinScore) / 2
	w, ws := float32(0), 0.0
	for i, sc := range pout[next:] {
		if sc.Score >= cfg.clearScore() && sc.Score < cfg.MinScore && (w == 0 || math.Abs(sc.Score-want) < math.Abs(ws-want)) {
			w, ws = probe[next+i].value, sc.Score
		}
	}
	if w == 0 {
		t.Fatal("setup: no probe value scores within the deadband by the global model")
	}
	rows = append(rows, fleetRow{key: "a", value: w}, fleetRow{key: "x3", value: 70}, fleetRow{key: "a", value: w}, fleetRow{key: "a", value: 70})
	// a's model's flagged record is its first (decided by capAlarms): evicted in its batch (its
	// flag noted as the key leaves), or in the next (handed back from its cap's position).
	for _, cuts := range [][]int{{1000, next}, {1000}, {1000, flagged + 1}} {
		out, s, done := handoverRun(t, cfg, Deps{}, rows, cuts...)
		evictions := s.keyed.evictions
		done()
		if f := out[flagged]; !f.ByKey || !f.Outlier || f.Held || evictions == 0 {
			t.Fatalf("cuts %v, setup: a's model's record: by key %v flagged %v held %v; %d evictions", cuts, f.ByKey, f.Outlier, f.Held, evictions)
		}
		for i, want := range []struct{ flag, held bool }{{true, true}, {false, false}, {true, true}, {false, false}} {
			sc := out[next+i]
			if rows[next+i].key == "a" && (!sc.Warming || rows[next+i].value == w && sc.Score != ws) {
				t.Fatalf("cuts %v, setup: record %d warming %v, score %g (want %g)", cuts, next+i, sc.Warming, sc.Score, ws)
			}
			if sc.Outlier != want.flag || sc.Held != want.held {
				t.Errorf("cuts %v: record %d (%s, score %.3f): flagged %v held %v, want %v %v", cuts, next+i, rows[next+i].key, sc.Score, sc.Outlier, sc.Held, want.flag, want.held)
			}
		}
	}
}

// TestFlagClearContinuesOnAScorer: on a scorer (run.role scorer) a key's model arrives from the
// builder (InstallKeyModels): the key's first records by it continue the alarm of its last
// record the global model flagged, and a key the builder retires (a tombstone) with its last
// record flagged has its next record, scored by the global model again, held by that flag.
func TestFlagClearContinuesOnAScorer(t *testing.T) {
	cfg := keyedConfig()
	cfg.RefreshRecords, cfg.RecalibrateRecords, cfg.RefreshInterval = 1<<30, 1<<30, time.Hour
	r := rand.New(rand.NewPCG(9, 9))
	var rows []fleetRow
	for i := range 1200 {
		rows = append(rows, fleetRow{key: fmt.Sprintf("x%d", i%10), value: float32(70 + 2*r.NormFloat64())})
	}
	for range cfg.Keys.MinRecords - 1 {
		rows = append(rows, fleetRow{key: "a", value: float32(70 + 2*r.NormFloat64())})
	}
	rows = append(rows, fleetRow{key: "a", value: 200})
	// The builder's side: a role-all stage's global model and a's model, and the values each
	// scores within the deadband.
	_, leader, done := handoverRun(t, cfg, Deps{}, rows, 1000)
	gm := leader.Model()
	km, _ := leader.KeyModelOf("a")
	done()
	if km == nil || gm == nil {
		t.Fatal("setup: no global model or no model of a")
	}
	v, vs := bandValue(t, km, cfg)
	scorer := func() (*Stage, func(rows []fleetRow) []batch.Score, func()) {
		mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
		s, err := NewStage(cfg, []string{"value"}, false, Deps{Log: zerolog.Nop(), Role: RoleScorer})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.InstallModel(gm, nil); err != nil {
			t.Fatal(err)
		}
		off := int64(0)
		feed := func(rows []fleetRow) []batch.Score {
			tr := make([]testbatch.Row, len(rows))
			for i, x := range rows {
				tr[i] = testbatch.Row{Offset: off, Key: []byte(x.key), Features: []float32{x.value}}
				off++
			}
			bs, err := s.Process(context.Background(), testbatch.New(t, mem, "fleet", []string{"value"}, false, false, tr))
			if err != nil || len(bs) != 1 {
				t.Fatalf("%d batches out, %v", len(bs), err)
			}
			out := append([]batch.Score(nil), bs[0].Scores...)
			bs[0].Release()
			return out
		}
		return s, feed, func() { s.Close(); mem.AssertSize(t, 0) }
	}
	// The global model's deadband value: probe keys' records, each warming.
	_, probe, pdone := scorer()
	var pr []fleetRow
	for i := range 400 {
		pr = append(pr, fleetRow{key: fmt.Sprintf("p%d", i), value: 70 + float32(i)*0.1})
	}
	want := (cfg.clearScore() + cfg.MinScore) / 2
	w, ws := float32(0), 0.0
	for i, sc := range probe(pr) {
		if sc.Score >= cfg.clearScore() && sc.Score < cfg.MinScore && (w == 0 || math.Abs(sc.Score-want) < math.Abs(ws-want)) {
			w, ws = pr[i].value, sc.Score
		}
	}
	pdone()
	if w == 0 {
		t.Fatal("setup: no probe value scores within the deadband by the global model")
	}

	s, feed, sdone := scorer()
	defer sdone()
	warm := feed(rows[1000:])
	if f := warm[len(warm)-1]; !f.Warming || !f.Outlier {
		t.Fatalf("setup: a's last record before its model: warming %v flagged %v (score %g)", f.Warming, f.Outlier, f.Score)
	}
	s.InstallKeyModels([]KeyModel{{Key: "a", Version: 1, Model: km}})
	check := func(stage string, got []batch.Score, in []fleetRow, want []bool, score float32, scored float64, byKey bool) {
		t.Helper()
		for i, sc := range got {
			if in[i].key == "a" && in[i].value == score && (sc.ByKey != byKey || sc.Score != scored) {
				t.Fatalf("%s, setup: record %d by its key %v, score %g (want %g)", stage, i, sc.ByKey, sc.Score, scored)
			}
			if sc.Outlier != want[i] || sc.Held != (want[i] && sc.Score < cfg.MinScore) {
				t.Errorf("%s: record %d (%s, score %.3f): flagged %v held %v, want %v", stage, i, in[i].key, sc.Score, sc.Outlier, sc.Held, want[i])
			}
		}
	}
	in := []fleetRow{{"a", v, false}, {"x1", 70, false}, {"a", v, false}}
	check("a's model installed", feed(in), in, []bool{true, false, true}, v, vs, true)
	s.InstallKeyModels([]KeyModel{{Key: "a", Version: 2}}) // (retired: its last record held)
	in = []fleetRow{{"a", w, false}, {"a", w, false}, {"a", 70, false}}
	check("a retired", feed(in), in, []bool{true, true, false}, w, ws, false)
}
