package detect

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/outlierd/outlierd/internal/algo/solvingset"
	"github.com/outlierd/outlierd/internal/core/config"
)

// readyStage is a stage whose first model (version 1) serves, built from rows [0, 1500) of d.
func readyStage(t *testing.T, mem memory.Allocator, cfg Config) (*Stage, func(lo, hi int) []int) {
	t.Helper()
	d := testData(6000, 11)
	s := newTestStage(t, cfg)
	feed(t, s, mem, d, 0, 1500, 250)
	if s.Model() == nil || s.Model().Version != 1 {
		t.Fatalf("model %v, want version 1", s.Model())
	}
	// flagged scores rows [lo, hi) at a fixed stream index and returns the flagged rows.
	flagged := func(lo, hi int) []int {
		var out []int
		for i, sc := range scoreWith(t, s, mem, d, lo, hi) {
			if sc.Outlier {
				out = append(out, lo+i)
			}
		}
		return out
	}
	return s, flagged
}

func TestReconfigureThresholdsApplyLive(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	cfg := testConfig()
	cfg.Combine = CombineDensity
	s, flagged := readyStage(t, mem, cfg)
	before := flagged(2000, 3000)
	m := s.Model()

	next := cfg
	next.Density.Eta, next.Density.Delta = 1, 0.9 // a stricter density test: more records flagged
	r, err := s.Reconfigure(next)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"detect.density.eta", "detect.density.delta"}; !slices.Equal(r.Live, want) || len(r.Rebuild) != 0 || r.RebuildStarted {
		t.Errorf("Reconfigure = %+v, want live %v and no rebuild", r, want)
	}
	if s.builds.running || s.Model() != m {
		t.Fatal("a threshold change rebuilt or replaced the model")
	}
	after := flagged(2000, 3000)
	t.Logf("density verdicts on 1000 records: %d flagged with eta 0.5 delta 0.5, %d with eta 1 delta 0.9", len(before), len(after))
	if len(after) <= len(before) {
		t.Errorf("eta 0.5 -> 1, delta 0.5 -> 0.9 flagged %d records, before %d: want more", len(after), len(before))
	}

	// The combine rule: distance alone flags what the solving set predicts, whatever eta says.
	next.Combine = CombineDistance
	if _, err := s.Reconfigure(next); err != nil {
		t.Fatal(err)
	}
	dist := flagged(2000, 3000)
	if reflect.DeepEqual(dist, after) {
		t.Error("combine density -> distance did not change the verdicts")
	}
	if s.Model() != m || s.Model().Version != 1 {
		t.Error("the model changed on a combine change")
	}
}

func TestReconfigureWStarPolicy(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	cfg := testConfig()
	cfg.Combine = CombineDistance
	s, flagged := readyStage(t, mem, cfg)
	built := s.Model()
	before := flagged(1500, 3500)

	next := cfg
	next.Distance.N = 5 // fewer top outliers: a higher w*, taken from the top weights
	r, err := s.Reconfigure(next)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Live, []string{"detect.distance.n"}) || s.builds.running {
		t.Fatalf("n 20 -> 5: %+v, building %v; want live, no rebuild", r, s.builds.running)
	}
	m := s.Model()
	// The model was built from min_records = half the window: n scales to it (EffectiveN).
	eff5, eff20 := EffectiveN(5, cfg.Window, built.WindowRecords), EffectiveN(20, cfg.Window, built.WindowRecords)
	if built.WindowRecords != 1000 || eff5 != 3 || eff20 != 10 {
		t.Fatalf("model of %d records, effective n %d and %d; want 1000 records, 3 and 10", built.WindowRecords, eff5, eff20)
	}
	if m.Version != built.Version || m.Distance.WStar != built.TopWeights[eff5-1] || m.Distance.WStar <= built.Distance.WStar {
		t.Errorf("n=5: version %d w* %v, want version %d and w* = TopWeights[%d] = %v > %v",
			m.Version, m.Distance.WStar, built.Version, eff5-1, built.TopWeights[eff5-1], built.Distance.WStar)
	}
	after := flagged(1500, 3500)
	t.Logf("distance verdicts on 2000 records: %d flagged with n=20, %d with n=5", len(before), len(after))
	if len(before) == 0 || len(after) >= len(before) {
		t.Errorf("a higher w* flagged %d records, before %d: want fewer, and some before", len(after), len(before))
	}
	if built.Distance.WStar != built.TopWeights[eff20-1] {
		t.Error("the built model was changed in place")
	}

	// An n beyond the weights the model knows needs the window: a rebuild.
	next.Distance.N = 2*len(built.TopWeights) + 10
	r, err = s.Reconfigure(next)
	if err != nil {
		t.Fatal(err)
	}
	if !r.RebuildStarted {
		t.Fatalf("n beyond the top weights: %+v, want a rebuild", r)
	}
	s.collect(true)
	eff := EffectiveN(next.Distance.N, cfg.Window, s.Model().WindowRecords)
	if m := s.Model(); m.Version != 2 || m.Params.N != next.Distance.N || len(m.TopWeights) < eff {
		t.Errorf("after the rebuild: version %d n %d with %d top weights, want 2, %d and >= %d", m.Version, m.Params.N, len(m.TopWeights), next.Distance.N, eff)
	}
}

func TestReconfigureRebuilds(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	cfg := testConfig()
	s, _ := readyStage(t, mem, cfg)

	next := cfg
	next.Distance.K = 5
	r, err := s.Reconfigure(next)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Rebuild, []string{"detect.distance.k"}) || !r.RebuildStarted {
		t.Fatalf("k change: %+v, want a rebuild started", r)
	}
	if s.Model().Version != 1 {
		t.Error("the old model must serve until the rebuild ends")
	}
	// A change while that build runs: the built model (k=5, clusters 20) is stale on arrival
	// and a second build follows at the next batch.
	next.Density.Clusters = 10
	if r, err = s.Reconfigure(next); err != nil || r.RebuildStarted {
		t.Fatalf("clusters change during a build: %+v %v, want a rebuild scheduled, not started", r, err)
	}
	s.collect(true)
	if m := s.Model(); m.Version != 2 || m.Params.K != 5 || !s.ext.rebuildDue {
		t.Fatalf("version %d k %d due %v, want 2, 5 and a rebuild due", m.Version, m.Params.K, s.ext.rebuildDue)
	}
	d := testData(1600, 12)
	feed(t, s, mem, d, 0, 100, 100) // the next batch starts the due build
	s.collect(true)
	if m := s.Model(); m.Version != 3 || m.Params.K != 5 || m.MicroClusters.Q() != 10 {
		t.Errorf("version %d k %d q %d, want 3, 5, 10", m.Version, m.Params.K, m.MicroClusters.Q())
	}

	// A smaller window keeps the newest records (and their identities) and rebuilds.
	next.Window = 1200
	if r, err = s.Reconfigure(next); err != nil || !r.RebuildStarted {
		t.Fatalf("window change: %+v %v", r, err)
	}
	if s.win.Cap() != 1200 || s.win.Len() != 1200 || s.recs.held() != 1200 {
		t.Errorf("window cap %d len %d, identities %d; want 1200 each", s.win.Cap(), s.win.Len(), s.recs.held())
	}
	s.collect(true)
	if m := s.Model(); m.Version != 4 || m.WindowRecords != 1200 {
		t.Errorf("version %d from %d records, want 4 from 1200", m.Version, m.WindowRecords)
	}
}

func TestReconfigureRejects(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	cfg := testConfig()
	s, flagged := readyStage(t, mem, cfg)
	before := flagged(2000, 2500)
	cases := []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"invalid eta", func(c *Config) { c.Density.Eta = 2 }, "detect.density.eta: must be in (0, 1]"},
		{"invalid and valid together", func(c *Config) { c.Combine = CombineAll; c.Distance.K = 0 }, "detect.distance.k: must be in"},
		{"state dir", func(c *Config) { c.StateDir = t.TempDir() }, "detect.state_dir cannot change while running"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			next := cfg
			c.edit(&next)
			if _, err := s.Reconfigure(next); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
			if !reflect.DeepEqual(s.Config(), cfg) || s.builds.running || s.Model().Version != 1 {
				t.Error("a rejected configuration changed the stage")
			}
			if after := flagged(2000, 2500); !slices.Equal(after, before) {
				t.Error("verdicts changed after a rejected configuration")
			}
		})
	}
}

// TestChangeKindsCoverConfig: every key of Config has a kind on purpose (a field added later
// without one would silently need a restart; this makes the choice explicit).
func TestChangeKindsCoverConfig(t *testing.T) {
	a, b := Config{}, Config{}
	v := reflect.ValueOf(&b).Elem()
	var set func(v reflect.Value)
	set = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Struct:
			for i := range v.NumField() {
				set(v.Field(i))
			}
		case reflect.String:
			v.SetString("x")
		case reflect.Int, reflect.Int64:
			v.SetInt(1)
		case reflect.Uint64:
			v.SetUint(1)
		case reflect.Float64:
			v.SetFloat(1)
		case reflect.Bool:
			v.SetBool(true)
		default:
			t.Fatalf("field kind %s: extend this test", v.Kind())
		}
	}
	set(v)
	keys := config.Diff("detect", a, b)
	if len(keys) != 51 {
		t.Errorf("%d keys: %v", len(keys), keys)
	}
	for _, k := range keys {
		if _, ok := changeKinds[strings.TrimPrefix(k, "detect.")]; !ok {
			t.Errorf("key %s has no change kind", k)
		}
	}
}

// TestWindowReloadKeepsMembership: after a reload of detect.window, records that arrive are new
// to the serving model, never taken for members of its window (scored without counting
// themselves): their weights are w_k(q, S) of new queries, even when they repeat the readings
// of members. The window's own record count restarts with the new window, so it cannot be what
// membership is judged by; the records' identities (offsets) are.
func TestWindowReloadKeepsMembership(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	cfg := testConfig()
	s, _ := readyStage(t, mem, cfg) // model 1 from the first 1000 records; 1500 pushed
	d := testData(6000, 11)
	// The window part of a reload alone (Reconfigure also starts a rebuild, which could serve
	// first): model 1 keeps serving the records that arrive next.
	// 600 records: the window restarts its count at 600, inside model 1's window [0, 1000).
	if err := s.resizeWindow(600); err != nil {
		t.Fatal(err)
	}
	// The records that arrive repeat rows 0..200 (a producer re-sending old readings): some are
	// points of the solving set, where a wrong "member" verdict makes a difference (the member
	// skips one point at distance 0).
	out, err := s.Process(context.Background(), makeBatchAt(t, mem, d, 0, 200, true, 5000))
	if err != nil || len(out) != 1 {
		t.Fatalf("Process: %d batches, %v", len(out), err)
	}
	b := out[0]
	defer b.Record.Release()
	m := s.Model()
	if b.ModelVersion != 1 || m.Version != 1 {
		t.Fatalf("scored by model %d, serving %d; want 1", b.ModelVersion, m.Version)
	}
	means, sds, err := s.columns(b)
	if err != nil {
		t.Fatal(err)
	}
	nm, _ := m.Normalised(means, sds)
	want, asMember := make([]float64, b.Len()), make([]float64, b.Len())
	solvingset.KNNWeights(m.Distance.Points, nm, m.Distance.K, 0, want)
	solvingset.KNNWeightsMembers(m.Distance.Points, nm, m.Distance.K, 0, asMember)
	telling := 0
	for i, sc := range b.Scores {
		if sc.Weight != want[i] {
			t.Fatalf("record %d (model %d): weight %v, want %v as a new record", i, m.Version, sc.Weight, want[i])
		}
		if want[i] != asMember[i] {
			telling++
		}
	}
	if telling == 0 {
		t.Fatal("no record's weight depends on membership: the test proves nothing")
	}
}

// TestReconfigureDistanceSpaceRebuilds: detect.distance_space is a rebuild key: a reload that
// switches it starts a build in the new space, the old model serving until it ends; and back.
// A guard (no defect found).
func TestReconfigureDistanceSpaceRebuilds(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	cfg := testConfig()
	s, _ := readyStage(t, mem, cfg)
	next := cfg
	for i, space := range []DistanceSpace{SpaceWhitened, SpaceStandardised} {
		next.DistanceSpace = space
		r, err := s.Reconfigure(next)
		if err != nil || !slices.Equal(r.Rebuild, []string{"detect.distance_space"}) || !r.RebuildStarted {
			t.Fatalf("distance_space -> %s: %+v %v, want a rebuild started", space, r, err)
		}
		if s.Model().Version != uint64(i+1) {
			t.Fatalf("distance_space -> %s: version %d serves before the build ends, want %d", space, s.Model().Version, i+1)
		}
		s.collect(true)
		if m := s.Model(); m.Version != uint64(i+2) || m.Ranker.space() != space {
			t.Fatalf("after the rebuild: version %d in the %s space, want %d in %s", m.Version, m.Ranker.space(), i+2, space)
		}
	}
}
