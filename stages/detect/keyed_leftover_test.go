package detect

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/internal/testsupport/testbatch"
)

// TestKeyedRowsLeftOverMaxBytesHypercube: TestKeyedRowsLeftToTheirKeys's and
// TestOverlapKeyedAsSynchronous's comparisons where they were not run: keys evicted by
// keys.max_bytes (not keys.max_keys) within a batch, and the hypercube on (a follower: it scores
// in finish, and again for the records scoreLeftOver scores). Every record's fields, the
// hypercube's included, are those of the synchronous stage whose global model scores every
// record (globalScoresAll): synchronous with the keys on the CPU and on a keyed device (the
// twin), and overlapped with the chained passes' global scoring deferred, speculative and
// switching, and with the keys on the CPU. The case occurs: keys are evicted, and records of
// keys warm when their batch began are left to the global model.
func TestKeyedRowsLeftOverMaxBytesHypercube(t *testing.T) {
	defer func(c, b bool, s float64) { globalScoresAll, keyedBeside, speculateShare = c, b, s }(globalScoresAll, keyedBeside, speculateShare)
	rows := joiningFleet(130, 16000, 100, 0.01, 3, "sensor-%03d")
	cfg := keyedConfig()
	cfg.Hypercube.Enabled = true
	cfg.RefreshRecords, cfg.RecalibrateRecords, cfg.RefreshInterval = 1<<30, 1<<30, time.Hour
	cfg.Keys.MaxBytes = 85 * (keyBytes(cfg.Keys.Window, 1, true) + recentBytes(cfg.RecentScores, cfg.RecentBlocks()))
	run := func(every bool, overlap int, share float64, dev bool) ([]string, int) {
		globalScoresAll, speculateShare = every, share
		mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
		defer mem.AssertSize(t, 0)
		var accel Accelerator
		if dev {
			accel = &keyedTwinAccel{fakeAccel: fakeAccel{exact: true}}
		} else if overlap > 0 {
			accel = &fakeAccel{exact: true}
		}
		s, err := NewStage(cfg, []string{"value"}, false, Deps{Log: zerolog.Nop(), Accelerator: accel, Overlap: overlap})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		var out []string
		byKey, left := 0, 0
		take := func(bs []*batch.Batch) {
			for _, b := range bs {
				for _, x := range b.Scores {
					if x.ByKey {
						byKey++
					}
					h := x.Hypercube
					x.Hypercube = nil
					out = append(out, fmt.Sprintf("%+v %x %x %x %+v", x, math.Float64bits(x.Score), math.Float64bits(x.Recent), math.Float64bits(x.Weight), h))
				}
				b.Release()
			}
		}
		t0 := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
		for at := 0; at < len(rows); at += 250 {
			var tr []testbatch.Row
			warm := map[string]bool{}
			for i := at; i < at+250; i++ {
				if overlap == 0 && s.model != nil { // (with overlap a chained pass may be writing the keys' map)
					if st := s.keyed.keys[rows[i].key]; st != nil && st.model != nil {
						warm[rows[i].key] = true
					}
				}
				tr = append(tr, testbatch.Row{Offset: int64(i), Key: []byte(rows[i].key), Time: t0.Add(time.Duration(i) * time.Second), Features: []float32{rows[i].value}})
			}
			bs, err := s.Process(context.Background(), testbatch.New(t, mem, "fleet", []string{"value"}, false, false, tr))
			if err != nil {
				t.Fatal(err)
			}
			if overlap == 0 {
				for _, b := range bs {
					for i, x := range b.Scores {
						if warm[rows[at+i].key] && !x.ByKey {
							left++
						}
					}
				}
			}
			take(bs)
		}
		bs, err := s.Flush()
		if err != nil {
			t.Fatal(err)
		}
		take(bs)
		st := s.KeyStats()
		t.Logf("every %v overlap %d share %v dev %v: %d by key, %d left over, %+v", every, overlap, share, dev, byKey, left, st)
		if st.Evictions == 0 || byKey < len(out)/2 || overlap == 0 && left == 0 {
			t.Fatalf("%d evictions, %d of %d records by key, %d of warm keys left to the global model: the case misses its point", st.Evictions, byKey, len(out), left)
		}
		return out, byKey
	}
	want, _ := run(true, 0, 0.5, false)
	for _, c := range []struct {
		overlap int
		share   float64
		dev     bool
	}{{0, 0.5, false}, {0, 0.5, true}, {2, 2, true}, {2, 0, true}, {2, 0.5, true}, {2, 0.5, false}} {
		got, _ := run(false, c.overlap, c.share, c.dev)
		if len(got) != len(want) {
			t.Fatalf("%+v: %d, want %d", c, len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%+v record %d:\n%s\nwant\n%s", c, i, got[i], want[i])
			}
		}
	}
}
