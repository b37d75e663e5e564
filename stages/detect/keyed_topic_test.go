package detect

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/internal/testsupport/testbatch"
)

// TestKeyedBuilderToScorers (issue 21 item 3): a builder's keys' models, taken after each batch
// (TakeKeyModels), sent as the model topic carries them (EncodeKeyModel, DecodeKeyModel) and
// installed on two scorers (InstallKeyModels; one on the CPU, one with its keys' models on the
// kernels' CPU twin):
//   - the builder's keys' models are those of a role-all stage fed the same stream;
//   - every record a scorer scores by its key's model names that model's version and gets
//     exactly the score the model gives it; the device scorer's verdicts are the CPU one's bit
//     for bit;
//   - a key the builder evicts (keys.max_keys) is dropped by the scorers (a tombstone), and
//     the scorers hold exactly the builder's warm keys.
func TestKeyedBuilderToScorers(t *testing.T) {
	features := []string{"a", "b", "c"}
	cfg := keyedConfig()
	cfg.Keys.MaxKeys = 60
	// Under keys.tail: own: a scorer's score is then exactly its installed model's; under fleet
	// (the default) each scorer also reads its own fleet pool (TestScorerRestartContinuesFleetTail).
	cfg.Keys.Tail = TailOwn
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	stage := func(role Role) *Stage {
		s, err := NewStage(cfg, features, false, Deps{Log: zerolog.Nop(), Role: role})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	builder, all, scorer, devScorer := stage(RoleBuilder), stage(RoleAll), stage(RoleScorer), stage(RoleScorer)
	for _, s := range []*Stage{builder, all, scorer, devScorer} {
		defer s.Close()
	}
	devScorer.keyed.dev = newTwinKeyed(cfg.Keys.Window)

	r := rand.New(rand.NewPCG(9, 21))
	const keys = 80 // past max_keys: the least recently seen are evicted
	base := make([][3]float64, keys)
	for k := range base {
		for j := range base[k] {
			base[k][j] = 1000 * r.Float64()
		}
	}
	var off int64
	version := uint64(0)
	byKey, tombstones := 0, 0
	for n := range 60 {
		rows := make([]testbatch.Row, 500)
		for i := range rows {
			k := r.IntN(40)
			if n >= 30 { // the second half: other keys come, the first ones go
				k += 40
			}
			f := make([]float32, 3)
			for j := range f {
				v := base[k][j] + 3*r.NormFloat64()
				if r.Float64() < 0.01 {
					v += 30
				}
				f[j] = float32(v)
			}
			rows[i] = testbatch.Row{Partition: int32(k % 4), Offset: off, Key: []byte(fmt.Sprintf("key-%02d", k)), Time: time.Unix(off, 0), Features: f}
			off++
		}
		var out [4][]*batch.Batch
		for i, s := range []*Stage{builder, all, scorer, devScorer} {
			bs, err := s.Process(context.Background(), testbatch.New(t, mem, "keys", features, false, false, rows))
			if err != nil {
				t.Fatal(err)
			}
			s.collect(true)
			out[i] = bs
		}
		// The scorers' verdicts, against the keys' models they hold (installed before the batch).
		for i, b := range out[2] {
			d := out[3][i]
			for row := range b.Scores {
				sc, dc := b.Scores[row], d.Scores[row]
				// Recent compared by its bits (NaN when none), the rest field by field.
				sr, dr := sc, dc
				sr.Recent, dr.Recent = 0, 0
				if !reflect.DeepEqual(sr, dr) || math.Float64bits(sc.Score) != math.Float64bits(dc.Score) || math.Float64bits(sc.Recent) != math.Float64bits(dc.Recent) {
					t.Fatalf("batch %d row %d: CPU scorer %+v, device scorer %+v", n, row, sc, dc)
				}
				if !sc.ByKey {
					continue
				}
				byKey++
				key := string(b.Keys().Value(row))
				m, v := scorer.KeyModelOf(key)
				x := []float32{b.Feature(0)[row], b.Feature(1)[row], b.Feature(2)[row]}
				if sc.KeyModelVersion != v || sc.Score != m.ScoreRecord(x) {
					t.Fatalf("batch %d, %s: scored %v by version %d; the installed model (version %d) says %v", n, key, sc.Score, sc.KeyModelVersion, v, m.ScoreRecord(x))
				}
			}
		}
		for _, bs := range out {
			for _, b := range bs {
				b.Release()
			}
		}
		// The builder's keys' models: as role all's, and to the scorers as on the topic.
		if m := builder.Model(); m != nil {
			for _, s := range []*Stage{scorer, devScorer} {
				ready, _, err := s.InstallModel(m, nil)
				if err != nil {
					t.Fatal(err)
				}
				for _, b := range ready { // (held for the first model: before any key's model)
					b.Release()
				}
			}
		}
		version++
		var sent []KeyModel
		for _, km := range builder.TakeKeyModels() {
			if km.Model == nil { // (a tombstone carries its publication's version)
				tombstones++
				km.Version = version
				sent = append(sent, km)
				continue
			}
			if a, _ := all.KeyModelOf(km.Key); a == nil || !reflect.DeepEqual(a, km.Model) {
				t.Fatalf("batch %d, %s: the builder's model differs from role all's", n, km.Key)
			}
			if km.Partition != int32(keyIndex(km.Key)%4) {
				t.Fatalf("%s published with partition %d, its records' is %d", km.Key, km.Partition, keyIndex(km.Key)%4)
			}
			v, err := EncodeKeyModel(features, &cfg, km.Key, version, km.Model)
			if err != nil {
				t.Fatal(err)
			}
			key, ver, back, err := DecodeKeyModel(v, features, &cfg)
			if err != nil || key != km.Key || ver != version {
				t.Fatalf("%s: read back %q version %d: %v", km.Key, key, ver, err)
			}
			sent = append(sent, KeyModel{Key: key, Version: ver, Partition: km.Partition, Model: back})
		}
		scorer.InstallKeyModels(sent)
		devScorer.InstallKeyModels(sent)
		for _, km := range sent { // a replay of an older version, model or tombstone, changes nothing
			m, v := scorer.KeyModelOf(km.Key)
			if m == nil {
				continue
			}
			scorer.InstallKeyModels([]KeyModel{{Key: km.Key, Version: v - 1, Model: &Ranker{}}, {Key: km.Key, Version: v - 1}})
			if m2, v2 := scorer.KeyModelOf(km.Key); m2 != m || v2 != v {
				t.Fatalf("%s: a replayed older version (%d) replaced version %d", km.Key, v-1, v)
			}
			break
		}
	}
	bst, sst := builder.KeyStats(), scorer.KeyStats()
	if sst.Live != bst.Live || sst.Warming != 0 {
		t.Fatalf("scorer keys %+v, builder's %+v: want the builder's warm keys, nothing else", sst, bst)
	}
	for key, st := range builder.keyed.keys {
		if m, _ := scorer.KeyModelOf(key); (m == nil) != (st.model == nil) {
			t.Fatalf("%s: the scorer's model %v, the builder's %v", key, m != nil, st.model != nil)
		}
	}
	// A rebalance takes the odd partitions away: the scorer keeps the even partitions' keys only.
	even := func(p int32) bool { return p%2 == 0 }
	before := scorer.KeyStats().Live
	dropped := scorer.DropKeysOutside(even)
	for key, st := range scorer.keyed.keys {
		if !even(st.partition) || keyIndex(key)%2 != 0 {
			t.Fatalf("%s (partition %d) kept after its partition moved away", key, st.partition)
		}
	}
	if after := scorer.KeyStats(); dropped == 0 || after.Live != before-dropped || after.Evictions != sst.Evictions {
		t.Fatalf("dropped %d of %d keys, stats %+v (before %+v): want the odd partitions' keys gone, not counted as evictions", dropped, before, after, sst)
	}
	if byKey < 60*500/2 || tombstones == 0 {
		t.Fatalf("%d records scored by their key's model, %d keys evicted: the stream misses the point", byKey, tombstones)
	}
	t.Logf("%d records scored by their key's published model; %d evictions sent; builder %+v", byKey, tombstones, bst)
}

// TestDropKeysOutsideHandsNothingBack: a key whose partition moved to another scorer leaves
// with its alarm: dropped, it is neither counted as an eviction nor handed back to the global
// model's path (its next records are the other scorer's), where a key retired by its builder
// with the same flagged cap is both.
func TestDropKeysOutsideHandsNothingBack(t *testing.T) {
	cfg := keyedConfig()
	s, km := scorerWithModelOfA(t, cfg)
	s.InstallKeyModels([]KeyModel{{Key: "odd", Version: 1, Partition: 1, Model: km}, {Key: "even", Version: 1, Partition: 0, Model: km}})
	for _, key := range []string{"odd", "even"} {
		c := s.keyed.keys[key].cap
		c.admitOver(true, false, true, 4) // (its last record flagged, at position 5)
		c.at = 5
	}
	before := s.KeyStats().Evictions
	if n := s.DropKeysOutside(func(p int32) bool { return p%2 == 0 }); n != 1 || len(s.keyed.hand.back) != 0 || s.KeyStats().Evictions != before {
		t.Errorf("dropped %d, handed back %v, evictions %d (before %d): want odd alone, nothing handed back or counted", n, s.keyed.hand.back, s.KeyStats().Evictions, before)
	}
	s.InstallKeyModels([]KeyModel{{Key: "even", Version: 2}}) // (retired by its builder)
	if b := s.keyed.hand.back; len(b) != 1 || b[0].key != "even" || s.KeyStats().Evictions != before+1 {
		t.Errorf("retired: handed back %v, evictions %d (before %d): want even's flag back, counted", b, s.KeyStats().Evictions, before)
	}
}

// keyIndex is k of "key-<k>".
func keyIndex(key string) int {
	var k int
	fmt.Sscanf(key, "key-%d", &k)
	return k
}

// TestKeyedBuilderRestartRepublishes: a builder restarted from its state_dir hands out every warm
// key's model again, with the key's partition (a builder may die between a key's rebuild and its
// publication), and the models are those it held at the stop.
func TestKeyedBuilderRestartRepublishes(t *testing.T) {
	features := []string{"value"}
	cfg := keyedConfig()
	cfg.StateDir = t.TempDir()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rows := fleet(12, 6000, 0, 6)
	newBuilder := func() *Stage {
		s, err := NewStage(cfg, features, false, Deps{Log: zerolog.Nop(), Role: RoleBuilder})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a := newBuilder()
	feedFleet(t, a, mem, rows, 0, len(rows))
	a.TakeKeyModels() // published
	held := map[string]*Ranker{}
	for key, st := range a.keyed.keys {
		held[key] = st.model
	}
	a.Close()

	b := newBuilder()
	defer b.Close()
	got := b.TakeKeyModels()
	if len(got) != len(held) || len(held) != 12 {
		t.Fatalf("the restarted builder hands out %d keys' models, want the %d held at the stop (12)", len(got), len(held))
	}
	for _, km := range got {
		if km.Model == nil || km.Partition != fleetPartition(km.Key) {
			t.Fatalf("%s: handed out %v (partition %d), want its model at the stop (partition %d)", km.Key, km.Model != nil, km.Partition, fleetPartition(km.Key))
		}
		for _, x := range []float32{rows[0].value, 500, 1e6} {
			if a, b := km.Model.ScoreRecord([]float32{x}), held[km.Key].ScoreRecord([]float32{x}); a != b {
				t.Fatalf("%s: the model handed out scores %v %v, the one at the stop %v", km.Key, x, a, b)
			}
		}
	}
}
