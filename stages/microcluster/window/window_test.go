package window

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
		next := 0 // id of the next record; value = id in dim 0, -id in dim 1, sd = id/2, assign = id%5
		var evicted []int
		for range 60 {
			m := r.IntN(2*capacity + 3)
			means := [][]float32{make([]float32, m), make([]float32, m)}
			sds := [][]float32{make([]float32, m), make([]float32, m)}
			as := make([]int32, m)
			for i := range m {
				id := next + i
				means[0][i], means[1][i] = float32(id), float32(-id)
				sds[0][i], sds[1][i] = float32(id)/2, float32(id)/2
				as[i] = int32(id % 5)
			}
			next += m
			ev, err := w.Push(means, sds, as)
			if err != nil {
				t.Fatal(err)
			}
			for i := range ev.Len() {
				id := int(ev.Cols[0][i])
				if ev.Cols[1][i] != float32(-id) || ev.SDs[0][i] != float32(id)/2 || ev.Assign[i] != int32(id%5) {
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

func TestReassignFollowsSnapshotOrder(t *testing.T) {
	w, _ := New(4, 1, false)
	for i := range 6 {
		if _, err := w.Push([][]float32{{float32(i)}}, nil, []int32{0}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Reassign([]int32{2, 3, 4, 5}); err != nil { // records 2..5 in arrival order
		t.Fatal(err)
	}
	ev, _ := w.Push([][]float32{{6, 7}}, nil, []int32{0, 0})
	if ev.Cols[0][0] != 2 || ev.Assign[0] != 2 || ev.Cols[0][1] != 3 || ev.Assign[1] != 3 {
		t.Fatalf("evicted %v with %v", ev.Cols[0], ev.Assign)
	}
	if err := w.Reassign([]int32{1}); err == nil {
		t.Fatal("wrong length accepted")
	}
	if _, err := w.Push([][]float32{{1}}, [][]float32{{1}}, []int32{0}); err == nil {
		t.Fatal("uncertainty on a certain window accepted")
	}
}
