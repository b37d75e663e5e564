package detect

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/internal/testsupport/testbatch"
)

// withWarmingWhere is b with feature column j warming (null, its value kept: withWarming) on the
// records where warming says so, its scores allocated; b is released.
func withWarmingWhere(t testing.TB, b *batch.Batch, j int, warming func(i int) bool) *batch.Batch {
	t.Helper()
	n := b.Len()
	valid := make([]bool, n)
	for i := range valid {
		valid[i] = !warming(i)
	}
	bld := array.NewFloat32Builder(memory.NewGoAllocator())
	defer bld.Release()
	bld.AppendValues(b.Feature(j), valid)
	col := bld.NewArray()
	defer col.Release()
	cols := make([]arrow.Array, b.Record.NumCols())
	for c := range cols {
		cols[c] = b.Record.Column(c)
	}
	cols[j] = col
	rec := array.NewRecord(b.Record.Schema(), cols, int64(n))
	out, err := batch.New(b.Topic, b.Features, rec, b.Payloads)
	if err != nil {
		t.Fatal(err)
	}
	b.Release()
	out.Scores = make([]batch.Score, n)
	return out
}

// TestKeyBuildLeavesOutWarming (keywarm27, defect 1 of docs/BENCHMARKS.md §12.62): a key's
// model is built from its window less the records whose rolling column was still warming, as
// the global model's reference leaves them out (TestWarmingKeptOutOfTheReference). Each key's
// column c (a rolling std's level, 1 ± 0.1) is warming and 0 on its first 31 records (a
// series of `last` 32 filling: every key's first records, and every key's again after a
// derive restart, here at the key's records 300-330); its first model waits for
// keys.min_records records that are not warming, and no model of any key, on the serial, the
// parallel or the device's path (the kernels' CPU twin), holds a 0 in column c. Before the fix
// every key's first model was built from its 30 warming records alone (c all 0).
func TestKeyBuildLeavesOutWarming(t *testing.T) {
	for _, path := range []string{"serial", "parallel", "device"} { // ("parallel": the path a batch takes where the cores allow it)
		t.Run(path, func(t *testing.T) {
			cfg := Default()
			cfg.KeyBy = KeyByKey
			cfg.Window, cfg.MinRecords, cfg.Distance.N = 2000, 1000, 50
			var accel Accelerator
			if path == "device" { // (the keys' models and builds on the kernels' CPU twin, every due key's build batched)
				accel = &keyedTwinAccel{fakeAccel: fakeAccel{exact: true}}
				defer func(n int) { deviceBuildsMin = n }(deviceBuildsMin)
				deviceBuildsMin = 1
			}
			s := newFleetStageOn(t, cfg, []string{"a", "b", "c"}, accel)
			defer s.Close()
			s.keyed.serial = path == "serial"
			const keys = 8
			r := rand.New(rand.NewPCG(27, 1))
			mem := memory.NewGoAllocator()
			seen := make([]int, keys)
			models := 0
			for lo := 0; lo < 4000; lo += 500 {
				rs := warmRows(r, lo, 500, 0)
				warm := make([]bool, len(rs))
				for i := range rs {
					k := r.IntN(keys)
					rs[i].Key = []byte(fmt.Sprintf("k%d", k))
					if n := seen[k]; n < 31 || (n >= 300 && n < 331) {
						rs[i].Features[2], warm[i] = 0, true
					}
					seen[k]++
				}
				b := withWarmingWhere(t, testbatch.New(t, mem, "in", s.features, false, false, rs), 2, func(i int) bool { return warm[i] })
				out, err := s.Process(context.Background(), b)
				if err != nil {
					t.Fatal(err)
				}
				for _, o := range out {
					o.Record.Release()
				}
				s.keyed.finishBuilds()
				s.keyed.settle()
				for key, st := range s.keyed.keys {
					if st.model == nil {
						continue
					}
					models++
					if m := slices.Min(st.model.Tail.Sorted[2]); m < 0.3 { // (1 ± 0.1: 0.3 is 7 sd below; only a warming 0 is there)
						t.Fatalf("after %d records, key %s's model holds a warming value (%v) in column c", lo+500, key, m)
					}
				}
			}
			if models == 0 || s.keyed.warm != keys {
				t.Fatalf("%d models seen, %d of %d keys warm: the test misses its point", models, s.keyed.warm, keys)
			}
			// The keys' bytes count each key's ring of warming marks (warmRingBytes), on every path.
			var want int64
			for key, st := range s.keyed.keys {
				want += s.keyed.bytesOf(st.sig.len(), len(st.cols), st.warm) + st.recent.bytes() + int64(len(key))
				if st.warming == nil {
					t.Fatalf("key %s had warming records and holds no ring", key)
				}
				want += warmRingBytes(st.sig.len())
			}
			if s.keyed.bytes != want {
				t.Fatalf("the keys hold %d bytes as counted, want %d (their windows, models and rings)", s.keyed.bytes, want)
			}
		})
	}
}

// TestKeyWarmingMarksInTheKeysFile: the keys' state file keeps which of a key's window's records
// were warming (bit 1 of each record's significance byte), so that a key restored after a stop
// still leaves them out of its builds; a key that never had one reads back without a ring, and
// a byte above 3 is refused with its reason, naming the key and the record.
func TestKeyWarmingMarksInTheKeysFile(t *testing.T) {
	cfg := Default()
	cfg.KeyBy = KeyByKey
	cfg.Window, cfg.MinRecords, cfg.Distance.N = 2000, 1000, 50
	s := newFleetStageOn(t, cfg, []string{"a", "b", "c"}, nil)
	defer s.Close()
	r := rand.New(rand.NewPCG(27, 2))
	mem := memory.NewGoAllocator()
	for lo := 0; lo < 2000; lo += 500 { // (past the global model's min_records: the keys' pass runs once it serves)
		rs := warmRows(r, lo, 500, 0)
		warm := make([]bool, len(rs))
		for i := range rs {
			k, n := (lo+i)%4, (lo+i)/4 // (the key's record n)
			rs[i].Key = []byte(fmt.Sprintf("k%d", k))
			warm[i] = k != 0 && (n%120 < 31 || n%7 == 0) // (key k0 never warms; the others' series restart every 120 records)
		}
		b := withWarmingWhere(t, testbatch.New(t, mem, "in", s.features, false, false, rs), 2, func(i int) bool { return warm[i] })
		out, err := s.Process(context.Background(), b)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range out {
			o.Record.Release()
		}
	}
	s.keysQuiet()
	p := encodeKeyStates(s.keyed.keysCopy(), nil, 2000, s.features, &s.cfg) // (at the stream position after the 2000 records)
	k := s.newKeyed()
	if _, err := k.decodeKeys(context.Background(), KeysSnapshotFormat, p, s.features, &s.cfg); err != nil {
		t.Fatal(err)
	}
	if k.bytes != s.keyed.bytes { // (the rings counted as the stage counts them)
		t.Fatalf("the keys read back hold %d bytes as counted, the stage's %d", k.bytes, s.keyed.bytes)
	}
	marked := 0
	for key, a := range s.keyed.keys {
		c := k.keys[key]
		if c == nil || (a.warming == nil) != (c.warming == nil) || a.warmingCount() != c.warmingCount() {
			t.Fatalf("key %s read back: %v, warming %d, want %d", key, c != nil, c.warmingCount(), a.warmingCount())
		}
		w := a.sig.len()
		for i := range a.size { // (oldest first: the file's order, read back from place 0)
			if got, want := c.warmingAt(i), a.warmingAt((a.next-a.size+i+w)%w); got != want {
				t.Fatalf("key %s's record %d read back warming %v, want %v", key, i, got, want)
			}
		}
		marked += a.warmingCount()
	}
	if k0 := s.keyed.keys["k0"]; marked == 0 || len(s.keyed.keys) != 4 || k0.warming != nil {
		t.Fatalf("%d warming records in %d keys: the test misses its point", marked, len(s.keyed.keys))
	}
	// A byte of 4 where a warming record's significance byte (2) is: refused, and said so.
	for at := range p {
		if p[at] != 2 {
			continue
		}
		bad := slices.Clone(p)
		bad[at] = 4
		if _, err := s.newKeyed().decodeKeys(context.Background(), KeysSnapshotFormat, bad, s.features, &s.cfg); err != nil && strings.Contains(err.Error(), "significance is 4, want 0 to 3") {
			if !strings.Contains(err.Error(), `key "k`) || !strings.Contains(err.Error(), "record ") {
				t.Fatalf("%v: want the key and its record named", err)
			}
			return
		}
	}
	t.Fatal("no byte of the file turned from 2 to 4 was refused as a significance")
}
