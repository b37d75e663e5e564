package microcluster

import (
	"math/rand/v2"
	"testing"
)

// TestPushEvictsEveryRecordOnce pushes random batch sizes through a small window and checks
// that the window holds exactly the last Cap records in order, and that every record pushed
// is either held or was reported evicted exactly once, oldest first.
func TestPushEvictsEveryRecordOnce(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, capacity := range []int{1, 7, 100} {
		w, err := New(capacity, 2, true)
		if err != nil {
			t.Fatal(err)
		}
		next := 0 // id of the next record; value = id in dim 0, -id in dim 1, sd = id/2
		var evicted []int
		var ev Evicted
		for range 60 {
			m := r.IntN(2*capacity + 3)
			means := [][]float32{make([]float32, m), make([]float32, m)}
			sds := [][]float32{make([]float32, m), make([]float32, m)}
			for i := range m {
				id := next + i
				means[0][i], means[1][i] = float32(id), float32(-id)
				sds[0][i], sds[1][i] = float32(id)/2, float32(id)/2
			}
			next += m
			ev.Reset() // reused: a reset must leave nothing of the previous push behind
			if err := w.Push(means, sds, &ev); err != nil {
				t.Fatal(err)
			}
			if ev.Len() != len(ev.Cols[0]) || ev.Len() != len(ev.SDs[1]) {
				t.Fatalf("evicted %d records, columns of %d and %d", ev.Len(), len(ev.Cols[0]), len(ev.SDs[1]))
			}
			for i := range ev.Len() {
				id := int(ev.Cols[0][i])
				if ev.Cols[1][i] != float32(-id) || ev.SDs[0][i] != float32(id)/2 {
					t.Fatalf("evicted record %d corrupted", id)
				}
				evicted = append(evicted, id)
			}
		}
		for i, id := range evicted {
			if id != i {
				t.Fatalf("cap %d: evicted order %v... record %d reported at position %d", capacity, evicted[:min(len(evicted), 10)], id, i)
			}
		}
		cols, sds := w.Snapshot()
		if w.Len() != min(capacity, next) || len(evicted)+w.Len() != next {
			t.Fatalf("cap %d: held %d + evicted %d != pushed %d", capacity, w.Len(), len(evicted), next)
		}
		for i, v := range cols[0] {
			if int(v) != len(evicted)+i || sds[1][i] != v/2 {
				t.Fatalf("cap %d: snapshot[%d] = %v, want %d", capacity, i, v, len(evicted)+i)
			}
		}
	}
}

// TestPushWithoutEvictedKeepsTheLastRecords: a nil Evicted (nobody subtracts) still keeps the
// window exact, and a mismatched uncertainty presence is refused.
func TestPushWithoutEvictedKeepsTheLastRecords(t *testing.T) {
	w, _ := New(4, 1, false)
	for i := range 6 {
		if err := w.Push([][]float32{{float32(i)}}, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Push([][]float32{{6, 7}}, nil, nil); err != nil {
		t.Fatal(err)
	}
	cols, _ := w.Snapshot()
	if len(cols[0]) != 4 || cols[0][0] != 4 || cols[0][3] != 7 || w.Total() != 8 {
		t.Fatalf("window %v total %d, want [4 5 6 7] and 8", cols[0], w.Total())
	}
	if err := w.Push([][]float32{{1}}, [][]float32{{1}}, nil); err == nil {
		t.Fatal("uncertainty on a certain window accepted")
	}
}
