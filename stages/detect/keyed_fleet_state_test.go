package detect

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/internal/core/sealed"
)

// TestRestartContinuesFleetTail: under keys.tail: fleet a restart from detect.state_dir leaves
// every record's verdict after it as the uninterrupted stream's. The stop falls after the
// shards' first fits, between two refits, with the last pass's deviations not yet pooled, and
// before a +6 sd shift of one key that the fleet's tail makes more significant than the key's
// own does. Before, the pool was not saved: after the restart the keys scored by their own tails
// until their shards held fleetReady again, and the shift's records differed.
func TestRestartContinuesFleetTail(t *testing.T) {
	cfg := keyedConfig()
	cfg.RefreshRecords, cfg.RecalibrateRecords, cfg.RefreshInterval = 1<<30, 1<<30, time.Hour // (one global model throughout)
	cfg.Keys.Tail = TailFleet
	unit := func(int) float64 { return 2 }
	rows := shiftFleet(10, 1600, 1300, 300, 6, 8, 0.002, unit, 3)
	stop := 10*1300 + 7
	var cuts []int
	for c := 500; c < len(rows); c += 500 {
		cuts = append(cuts, c)
	}
	own := cfg
	own.Keys.Tail = TailOwn
	ownRef := restartRun(t, own, nil, rows, cuts, 0)
	for _, c := range []struct {
		name string
		cuts []int
		deps func() Deps
	}{
		{"batches of 500", cuts, nil},
		{"one batch after the stop, parallel", []int{5000, 10000, stop}, nil},
		{"keys on a device, overlapped", cuts, func() Deps {
			return Deps{Accelerator: &keyedTwinAccel{fakeAccel: fakeAccel{exact: true}}, Overlap: OverlapOnGPU}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ref := restartRun(t, cfg, c.deps, rows, c.cuts, 0)
			// The fleet's tail decides records after the stop: its verdicts differ from own's.
			if n := verdictsDiffer(ref[stop:], ownRef[stop:]); n < 20 {
				t.Fatalf("setup: %d verdicts after the stop differ between keys.tail fleet and own, want >= 20", n)
			}
			got := restartRun(t, cfg, c.deps, rows, c.cuts, stop)
			sameAfterRestart(t, got, ref, rows, stop)
		})
	}
}

// verdictsDiffer counts the records whose verdicts differ between a and b.
func verdictsDiffer(a, b []batch.Score) int {
	n := 0
	for i := range a {
		if sameVerdict(&a[i], &b[i]) != "" {
			n++
		}
	}
	return n
}

// TestFleetTailState: the pool saved (fleetCopy, encodeFleet) and read back (decodeFleet) goes on
// as the pool that was not: a shard fitted and refitted fresh deviations ago, one filling, one
// wrapped, the last pass's deviations not pooled yet; every fit after more passes is the same,
// and it writes back to the same bytes. The copy leaves the pool it copies as it was (the pass's
// deviations pooled at the next pass's start). A pool that the fits cannot have come to is
// refused with the reason.
func TestFleetTailState(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	keys := []string{"a", "b", "c", "d"}
	var f fleetTail
	pass := func(f *fleetTail, n int, seed uint64) {
		r := rand.New(rand.NewPCG(seed, 1))
		f.begin(n)
		for i := range n {
			k := keys[r.IntN(len(keys))]
			if k == "d" && seed < 40 { // (d's shard fills late)
				continue
			}
			f.obs[i], f.shard[i] = float32(r.ExpFloat64()), fleetShardOf(k)
		}
	}
	for p := range 30 {
		pass(&f, 100+r.IntN(300), uint64(p))
	}
	pending := f.shards[fleetShardOf("a")].size
	c := f.fleetCopy()
	if f.shards[fleetShardOf("a")].size != pending || len(f.obs) == 0 {
		t.Fatal("the copy pooled the pass's deviations into the pool it copied")
	}
	var e sealed.Encoder
	encodeFleet(&e, c)
	saved := e.Payload()
	gp, err := decodeFleet(sealed.NewDecoder(saved))
	if err != nil || gp == nil {
		t.Fatal(err, gp)
	}
	g := *gp
	var again sealed.Encoder
	encodeFleet(&again, &g)
	if !bytes.Equal(again.Payload(), saved) {
		t.Fatal("the pool read back writes other bytes")
	}
	fitted, filling, fresh := 0, 0, 0
	for s := range g.shards {
		sh := &g.shards[s]
		switch {
		case sh.ok:
			fitted++
			if sh.fresh > 0 {
				fresh++
			}
		case sh.size > 0:
			filling++
		}
	}
	if fitted < 2 || fresh < 1 || len(saved) != 4+fleetShards*fleetShardHeader+4*(func() int {
		n := 0
		for s := range g.shards {
			n += g.shards[s].size
		}
		return n
	}()) {
		t.Fatalf("setup: %d shards fitted (%d with deviations since), %d filling; %d bytes", fitted, fresh, filling, len(saved))
	}
	for p := 30; p < 60; p++ {
		pass(&f, 100+r.IntN(300), uint64(p))
		pass(&g, len(f.obs), uint64(p))
		f.begin(0)
		g.begin(0)
		if f.lo != g.lo || f.hi != g.hi || f.ok != g.ok {
			t.Fatalf("pass %d: the pool read back fitted at %g %g %v, the one not saved at %g %g %v", p, g.lo, g.hi, g.ok, f.lo, f.hi, f.ok)
		}
		for s := range f.shards {
			a, b := &f.shards[s], &g.shards[s]
			if a.lo != b.lo || a.hi != b.hi || a.next != b.next || a.size != b.size || a.fresh != b.fresh || !slices.Equal(a.ring, b.ring) {
				t.Fatalf("pass %d: shard %d differs", p, s)
			}
		}
	}
	// Refused: the pool's bytes changed where the fits cannot have come.
	at := func(s int) int { // (shard s's header in saved)
		o := 4
		for i := range s {
			o += fleetShardHeader + 4*c.shards[i].size
		}
		return o
	}
	a := int(fleetShardOf("a"))
	for _, m := range []struct {
		what string
		edit func(b []byte)
	}{
		{"shards", func(b []byte) { binary.LittleEndian.PutUint32(b, 3) }},
		{"size past the pool", func(b []byte) { binary.LittleEndian.PutUint32(b[at(a)+4:], fleetPool+1) }},
		{"position", func(b []byte) { binary.LittleEndian.PutUint32(b[at(a):], fleetPool) }},
		{"fresh", func(b []byte) { binary.LittleEndian.PutUint32(b[at(a)+8:], fleetRefit) }},
		{"fit", func(b []byte) { binary.LittleEndian.PutUint32(b[at(a)+12:], math.Float32bits(float32(math.NaN()))) }},
		{"deviation", func(b []byte) { binary.LittleEndian.PutUint32(b[at(a)+20:], math.Float32bits(-1)) }},
		{"truncated", nil},
	} {
		b := slices.Clone(saved)
		if m.edit == nil {
			b = b[:len(b)-1]
		} else {
			m.edit(b)
		}
		if _, err := decodeFleet(sealed.NewDecoder(b)); !errors.Is(err, ErrSnapshotFormat) {
			t.Errorf("%s: %v, want ErrSnapshotFormat", m.what, err)
		}
	}
	// Empty (keys.tail: own): nothing copied, 4 bytes.
	var own fleetTail
	var eo sealed.Encoder
	encodeFleet(&eo, own.fleetCopy())
	if f, err := decodeFleet(sealed.NewDecoder(eo.Payload())); len(eo.Payload()) != 4 || f != nil || err != nil {
		t.Errorf("an empty pool takes %d bytes, want 4; read back %v, %v", len(eo.Payload()), f, err)
	}
}

// fleetLeaderModels feeds rows (shiftFleet's ten keys) through a builder of cfg, cut at 1000,
// and returns its global model and its keys' models, for a scorer to serve.
func fleetLeaderModels(t *testing.T, cfg Config, rows []fleetRow) (*Model, []KeyModel) {
	t.Helper()
	_, leader, done := handoverRun(t, cfg, Deps{}, rows, 1000)
	defer done()
	gm := leader.Model()
	if gm == nil {
		t.Fatal("setup: no global model")
	}
	var kms []KeyModel
	for s := range 10 {
		key := fmt.Sprintf("sensor-%02d", s)
		if s == 0 {
			key = "shifted"
		}
		km, v := leader.KeyModelOf(key)
		if km == nil {
			t.Fatalf("setup: no model of %s", key)
		}
		kms = append(kms, KeyModel{Key: key, Version: v, Model: km})
	}
	return gm, kms
}

// TestScorerRestartContinuesFleetTail: a scorer (run.role: scorer) fits the fleet's pool from
// its own records (its keys' models come from the model topic, fixed here); under keys.tail:
// fleet its restart from detect.state_dir leaves every verdict after it as the uninterrupted
// scorer's: the pool is in its alarm state file (format 2), as its keys' caps are. Before, it
// started empty and the keys scored by their own tails until their shards held fleetReady again.
func TestScorerRestartContinuesFleetTail(t *testing.T) {
	cfg := keyedConfig()
	cfg.RefreshRecords, cfg.RecalibrateRecords, cfg.RefreshInterval = 1<<30, 1<<30, time.Hour
	cfg.Keys.Tail = TailFleet
	unit := func(int) float64 { return 2 }
	rows := shiftFleet(10, 1700, 1400, 300, 6, 8, 0.002, unit, 3)
	const warm = 2000 // (the builder's: 200 records of each key)
	gm, kms := fleetLeaderModels(t, cfg, rows[:warm])
	stop := warm + 10*1100 + 7
	// run scores rows[warm:] on a scorer of tail serving gm and kms, restarted after stop (0:
	// not), in batches of 500.
	run := func(tail KeysTail, stop int) []batch.Score {
		c := cfg
		c.Keys.Tail, c.StateDir = tail, t.TempDir()
		mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
		defer mem.AssertSize(t, 0)
		open := func() *Stage {
			s, err := NewStage(c, []string{"value"}, false, Deps{Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel), Role: RoleScorer})
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := s.InstallModel(gm, nil); err != nil {
				t.Fatal(err)
			}
			s.InstallKeyModels(kms)
			return s
		}
		s := open()
		defer func() { s.Close() }()
		var out []batch.Score
		for lo := warm; lo < len(rows); {
			hi := min(lo+500, len(rows))
			if lo < stop && hi > stop {
				hi = stop
			}
			bs, err := s.Process(context.Background(), restartBatch(t, mem, rows, lo, hi))
			if err != nil || len(bs) != 1 {
				t.Fatalf("%d batches out, %v", len(bs), err)
			}
			out = append(out, bs[0].Scores...)
			bs[0].Release()
			if hi == stop {
				s.Close()
				s = open()
			}
			lo = hi
		}
		return out
	}
	ref := run(TailFleet, 0)
	if n := verdictsDiffer(ref[stop-warm:], run(TailOwn, 0)[stop-warm:]); n < 20 {
		t.Fatalf("setup: %d verdicts after the stop differ between keys.tail fleet and own, want >= 20", n)
	}
	got := run(TailFleet, stop)
	bad := 0
	for i := stop - warm; i < len(ref); i++ {
		if d := sameVerdict(&got[i], &ref[i]); d != "" {
			if bad++; bad <= 10 {
				t.Errorf("record %d (%s) after the restart: %s", warm+i, rows[warm+i].key, d)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of the %d records after the restart differ from the uninterrupted scorer's", bad, len(rows)-stop)
	}
}

// BenchmarkFleetCopy: a save's copy of a full pool (16 shards of 2,048, a pass's deviations to
// pool) on the detect goroutine, and its encoding beside it.
func BenchmarkFleetCopy(b *testing.B) {
	var f fleetTail
	r := rand.New(rand.NewPCG(1, 1))
	for range 40 {
		f.begin(1000)
		for i := range f.obs {
			f.obs[i], f.shard[i] = float32(r.ExpFloat64()), uint8(r.IntN(fleetShards))
		}
	}
	b.Run("copy", func(b *testing.B) {
		for range b.N {
			f.fleetCopy()
		}
	})
	c := f.fleetCopy()
	b.Run("encode", func(b *testing.B) {
		for range b.N {
			var e sealed.Encoder
			encodeFleet(&e, c)
		}
	})
}
