package detect

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"runtime"
	"testing"

	"github.com/outlierd/outlierd/internal/algo/solvingset"
	"github.com/outlierd/outlierd/internal/testsupport/cputime"
)

// knownSelf is a KeyedSelfWeigher that answers at once with weights computed before, set s's
// at s (the same keys built again, in the same order): the batched builds' host part alone.
type knownSelf [][]float64

func (k knownSelf) SelfWeightsCovered(dims, kk int) bool { return true }

func (k knownSelf) SelfWeights(sets [][][]float32, ks []int, out [][]float64) error {
	for s := range sets {
		copy(out[s], k[s])
	}
	return nil
}

// BenchmarkKeyBuilds: a batch's due keys' builds at the defaults (keys.window 200, keys.k 10, 3
// features; keyWindow's windows), 400 keys an op (a batch of 20,000 records at a million keys
// rebuilds about that many: one build per 50 records of a key), every key's model made: on the
// cores, each build whole (buildKeys, the stage's path without a device: "cores"); batched with
// the calibrations in one device call (buildKeysBatched) on the GPU ("gpu", skipped without
// one) and with a device that answers at once ("host-part": the batched builds' host work
// alone). Reports µs a key (wall) and the host's CPU µs a key.
func BenchmarkKeyBuilds(b *testing.B) {
	cfg := Default()
	cfg.KeyBy = KeyByKey
	r := rand.New(rand.NewPCG(3, 4))
	const keys = 400
	due := keyWindows(&cfg, keys, r, 37)
	known := knownSelf{}
	for _, st := range due {
		m, err := buildKeyModel(st, &cfg)
		if err != nil {
			b.Fatal(err)
		}
		w := make([]float64, len(m.Ref.Points[0]))
		solvingset.KNNWeightsSelf(m.Ref.Points, m.Ref.K, w)
		known = append(known, w)
	}
	for _, where := range []string{"cores", "gpu", "host-part"} {
		b.Run(where, func(b *testing.B) {
			var sw KeyedSelfWeigher
			switch where {
			case "gpu":
				st, err := openGPUShared(b).KeyedStore(3, cfg.Keys.Window)
				if err != nil {
					b.Fatal(err)
				}
				defer st.Close()
				sw = st
			case "host-part":
				sw = known
			}
			out := make([]*Ranker, keys)
			build := func() {
				switch where {
				case "cores":
					buildKeys(due, out, &cfg)
				default:
					buildKeysBatched(due, out, &cfg, sw)
				}
			}
			build()
			for t, m := range out {
				if m == nil {
					b.Fatalf("key %d: no model", t)
				}
			}
			stop := cputime.Profile(b, fmt.Sprintf("keybuilds-hot-%s-%d", where, b.N))
			cpu0 := cputime.Seconds()
			b.ResetTimer()
			for range b.N {
				build()
			}
			b.StopTimer()
			stop()
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*keys), "µs/key")
			b.ReportMetric((cputime.Seconds()-cpu0)*1e6/float64(b.N*keys), "cpu-µs/key")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// TestBuildKeysBatchedOversizeWindowsNoRoom: a window past keyBuildMaxRows takes the general
// build (prepare declines it), so the batched builds keep no room for its R: beside the same
// builds on the cores (buildKeys), buildKeysBatched allocates next to nothing more. (The room
// was reserved by every due key's window size: 20 bytes a record, 1.6 MB here, and at a large
// keys.window hundreds of MB a batch that nothing used.)
func TestBuildKeysBatchedOversizeWindowsNoRoom(t *testing.T) {
	// One worker: each path's builds take the keyBuild scratch from a pool that the GC empties
	// before each measurement, so with a worker per core each path allocates between one and
	// GOMAXPROCS scratches as the scheduling falls (on a 16-core host 0.9 MB apart, more than
	// half the room: the test failed there); with one worker both reuse one.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	cfg := Default()
	cfg.KeyBy = KeyByKey
	cfg.Keys.Window = keyBuildMaxRows + 904 // 5,000 records: each build general
	r := rand.New(rand.NewPCG(5, 6))
	due := keyWindows(&cfg, 16, r, 0)
	room := 20 * len(due) * cfg.Keys.Window
	out := make([]*Ranker, len(due))
	sw := &twinSelf{}
	allocated := func(f func()) uint64 {
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		f()
		runtime.ReadMemStats(&m1)
		return m1.TotalAlloc - m0.TotalAlloc
	}
	cores := func() { buildKeys(due, out, &cfg) }
	batched := func() { buildKeysBatched(due, out, &cfg, sw) }
	cores() // (the pools' scratch warm for both)
	batched()
	c, b := allocated(cores), allocated(batched)
	for i, m := range out {
		if m == nil {
			t.Fatalf("key %d: no model", i)
		}
	}
	if sw.calls != 0 {
		t.Fatalf("%d device calls for windows the device's builds do not take", sw.calls)
	}
	// The general builds allocate about the same in both (20 MB; the pools' scratch, emptied by
	// the GC before each, varies by about 0.2 MB from run to run); half the room is far above
	// that and the batched path's own bookkeeping (a few slices of 16 keys).
	if b > c+uint64(room/2) {
		t.Fatalf("buildKeysBatched allocated %d bytes, buildKeys %d: %d more (the unused room: %d)", b, c, b-c, room)
	}
}

// TestBuildKeysBatchedReusedRoom: buildKeysBatched's room is kept from call to call
// (batchedRooms), so a call finds the last call's rows and weights in it; every key's part must
// be written before its finish reads it. A room larger than the call needs, poisoned (rows past
// any window, NaN weights and tail scores), is put in the pool before each call: the models must
// be the general build's bit for bit, the first call's models still so after the later calls
// reused the room (no model holds any of it), and the poisoned room must have been taken at
// least once (sync.Pool may drop an item, so a few tries).
func TestBuildKeysBatchedReusedRoom(t *testing.T) {
	cfg := Default()
	cfg.KeyBy = KeyByKey
	r := rand.New(rand.NewPCG(9, 10))
	due := keyWindows(&cfg, 40, r, 7)
	due[3].size = 57 // (a partial window: a shorter part of the room)
	wants := generalModels(t, &cfg, due)
	taken := 0
	var first []*Ranker // (the first try's models, checked again after the later tries reused the room)
	for try := range 8 {
		room := &batchedRoom{rows: make([]int32, 2*len(due)*cfg.Keys.Window), vals: make([]float64, 4*len(due)*cfg.Keys.Window)}
		for i := range room.rows {
			room.rows[i] = 1 << 20
		}
		for i := range room.vals {
			room.vals[i] = math.NaN()
		}
		batchedRooms.Put(room)
		got := make([]*Ranker, len(due))
		buildKeysBatched(due, got, &cfg, &twinSelf{fail: try%2 == 1})
		checkModels(t, fmt.Sprintf("try %d", try), got, wants)
		if !math.IsNaN(room.vals[0]) {
			taken++
		}
		if try == 0 {
			first = got
		}
	}
	if taken == 0 {
		t.Fatal("no call took the poisoned room: the test tested nothing")
	}
	checkModels(t, "the first models after the room's reuse", first, wants) // (a model holds none of the room)
}

// TestBuildKeysBatchedReusedRoomGeneralKey: a call that finds the room the call before it left
// must not see that call's prepared keys: where a key of this call takes the general build (its
// window outside keyBuild's shortcuts: here a -0) at a place whose key the call before prepared,
// the model is still its own general build's, not a finish of the last call's R at that place
// (buildKeysBatched clears its prepared keys before the room goes back to the pool). The calls
// alternate all-prepared batches and batches with such keys; sync.Pool may drop the room
// between calls, so several rounds.
func TestBuildKeysBatchedReusedRoomGeneralKey(t *testing.T) {
	cfg := Default()
	cfg.KeyBy = KeyByKey
	r := rand.New(rand.NewPCG(13, 14))
	plain, mixed := make([]*keyState, 24), make([]*keyState, 24)
	for i := range plain {
		plain[i] = keyWindow(&cfg, i, r, 7)
		mixed[i] = keyWindow(&cfg, i, r, 7)
	}
	for _, i := range []int{0, 5, 23} {
		mixed[i].cols[1][9] = float32(math.Copysign(0, -1)) // (prepare declines -0)
	}
	wantPlain, wantMixed := generalModels(t, &cfg, plain), generalModels(t, &cfg, mixed)
	for try := range 12 {
		due, wants := plain, wantPlain
		if try%2 == 1 {
			due, wants = mixed, wantMixed
		}
		got := make([]*Ranker, len(due))
		buildKeysBatched(due, got, &cfg, &twinSelf{})
		checkModels(t, fmt.Sprintf("try %d", try), got, wants)
	}
}

// generalModels are the due keys' models by the general build (buildKeyModelGeneral).
func generalModels(t *testing.T, cfg *Config, due []*keyState) []*Ranker {
	t.Helper()
	ms := make([]*Ranker, len(due))
	for i, st := range due {
		m, err := buildKeyModelGeneral(st, cfg)
		if err != nil {
			t.Fatal(err)
		}
		ms[i] = m
	}
	return ms
}

// checkModels fails t unless every got[i] is wants[i] bit for bit.
func checkModels(t *testing.T, what string, got, wants []*Ranker) {
	t.Helper()
	for i, want := range wants {
		if got[i] == nil {
			t.Fatalf("%s key %d: no model", what, i)
		}
		if d := sameBits(reflect.ValueOf(got[i]), reflect.ValueOf(want), "Ranker"); d != "" {
			t.Fatalf("%s key %d: %s", what, i, d)
		}
	}
}
