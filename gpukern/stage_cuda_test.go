//go:build cuda

package gpukern

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"gorgonia.org/cu"
)

// TestStagedUploadRoundTrip: columns uploaded through the page-locked staging buffer come back
// equal, value for value, to the pageable path's, across the halves (columns of two and a bit
// halves, an odd length, several columns in a row, so a half is reused while the other's copy
// may still run), with one copier and with several; and a second upload reuses the buffer. The
// halves alternate across columns and calls: each column of 3 chunks starts on the half after
// the last one's (a column that started on half 0 every time waited for the copy before it).
func TestStagedUploadRoundTrip(t *testing.T) {
	d := internalDevice(t)
	rows := (2*stageHalf)/4 + 12345 // 2 halves and a bit, in 4-byte values
	cols := make([][]float32, 3)
	for j := range cols {
		cols[j] = make([]float32, rows)
		for i := range cols[j] {
			cols[j][i] = float32(i)*0.5 + float32(j)*1e6
		}
	}
	for _, copiers := range []int{1, 3} {
		for round := range 2 {
			m, c := stagedUploadMin, stageCopiers
			stagedUploadMin, stageCopiers = 1, copiers
			start := 0 // the half the upload starts on
			if d.stg != nil {
				start = d.stg.next
			}
			got := make([]float32, rows*len(cols))
			err := d.do(func() error {
				p, err := uploadCols(d, "columns", cols, rows)
				if err != nil {
					return err
				}
				return errors.Join(download(d, "columns", got, p), frees(p))
			})
			stagedUploadMin, stageCopiers = m, c
			if err != nil {
				t.Fatalf("copiers %d round %d: %v", copiers, round, err)
			}
			if d.stg == nil {
				t.Fatalf("copiers %d round %d: no staging buffer: the upload was not staged", copiers, round)
			}
			chunks := (int64(rows)*4 + stageHalf - 1) / stageHalf
			if want := (start + len(cols)*int(chunks)) % 2; d.stg.next != want {
				t.Fatalf("copiers %d round %d: next half %d after %d chunks from half %d, want %d", copiers, round, d.stg.next, len(cols)*int(chunks), start, want)
			}
			for j := range cols {
				if !slices.Equal(got[j*rows:(j+1)*rows], cols[j]) {
					i := 0
					for got[j*rows+i] == cols[j][i] {
						i++
					}
					t.Fatalf("copiers %d round %d: column %d row %d: got %v, want %v", copiers, round, j, i, got[j*rows+i], cols[j][i])
				}
			}
		}
	}
	var zero cu.Event
	if d.stg.ev[0] == zero || d.stg.ev[1] == zero {
		t.Fatal("staging events missing")
	}
}

// TestStagedUploadRefusedFallsBack: where the page-locked staging buffer cannot be had (pinned
// memory refused), a large upload still succeeds, from pageable memory, value for value, and
// keeps no staging buffer (before, the upload failed, and with it every build over the size).
func TestStagedUploadRefusedFallsBack(t *testing.T) {
	d := internalDevice(t)
	m, a := stagedUploadMin, stageAllocHost
	stagedUploadMin = 1
	calls := 0
	stageAllocHost = func(int64) (unsafe.Pointer, error) {
		calls++
		return nil, errors.New("refused by the test")
	}
	defer func() { stagedUploadMin, stageAllocHost = m, a }()
	rows := stageHalf/4 + 7
	cols := make([][]float32, 2)
	for j := range cols {
		cols[j] = make([]float32, rows)
		for i := range cols[j] {
			cols[j][i] = float32(i) + float32(j)*0.25
		}
	}
	got := make([]float32, rows*len(cols))
	if err := d.do(func() error {
		p, err := uploadCols(d, "columns", cols, rows)
		if err != nil {
			return err
		}
		return errors.Join(download(d, "columns", got, p), frees(p))
	}); err != nil {
		t.Fatalf("upload with the staging refused: %v", err)
	}
	if calls == 0 || d.stg != nil {
		t.Fatalf("staging asked %d times, buffer %v: the refusal was not exercised", calls, d.stg)
	}
	for j := range cols {
		if !slices.Equal(got[j*rows:(j+1)*rows], cols[j]) {
			t.Fatalf("column %d differs after the pageable fallback", j)
		}
	}
}

// internalDevice opens device 0 for a test of the package's internals (skipped without one) and
// closes it when the test ends, reporting a failed Close.
func internalDevice(t *testing.T) *Device {
	t.Helper()
	d, err := Open(0)
	if errors.Is(err, ErrNoDevice) {
		t.Skipf("no CUDA device: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return d
}

// TestDistNodeLockedIO: a distributed node's hand-in and hand-out buffer (ioHost) is page-locked,
// goes back to its device when the node is freed and is taken again by the next node (pinning
// cost a build milliseconds a node, BENCHMARKS §4.3.4); where page-locked memory is refused the
// node works from pageable memory, and its Steps return the same values either way (the
// hand-in's copy is asynchronous only from page-locked memory).
func TestDistNodeLockedIO(t *testing.T) {
	d := internalDevice(t)
	const rows, dims, k, m = 3000, 3, 8, 40
	rng := rand.New(rand.NewPCG(5, 6))
	cols := make([][]float32, dims)
	for j := range cols {
		cols[j] = make([]float32, rows)
		for i := range cols[j] {
			cols[j][i] = float32(rng.NormFloat64())
		}
	}
	// run builds a node, takes rows 0..m-1 and runs three Steps, each on the last proposal, and
	// returns every Step's results flattened, with the node's io buffer while it lived.
	run := func() ([]float32, unsafe.Pointer) {
		n, err := d.newDistNode(cols, rows, k, m, 1.0001)
		if err != nil {
			t.Fatal(err)
		}
		n.total = rows
		first := make([]int, m)
		for i := range first {
			first[i] = i
		}
		coords, lnn, err := d.distTake(n, first)
		if err != nil {
			t.Fatal(err)
		}
		var out []float32
		var taken []int
		for range 3 {
			lnnc, done, next, err := d.distStep(n, taken, coords, lnn, 0, m)
			if err != nil {
				t.Fatal(err)
			}
			count := make([]int, len(done))
			for i := range count {
				count[i] = k
			}
			lists, err := d.distNeighbours(n, make([]int, len(done)), count)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, lnnc...)
			for i, dn := range done {
				if dn {
					out = append(out, float32(i))
				}
			}
			for i, r := range next.Rows {
				out = append(out, float32(r), float32(next.UB[i]))
			}
			out = append(append(out, next.Coords...), next.LNN...)
			for _, l := range lists {
				out = append(out, l...)
			}
			taken, coords, lnn = slices.Clone(next.Rows), slices.Clone(next.Coords), slices.Clone(next.LNN)
		}
		p := n.ioLocked.p
		if err := d.do(func() error { return n.free(d) }); err != nil {
			t.Fatal(err)
		}
		return out, p
	}
	a, pa := run()
	if pa == nil || len(d.lockedFree) != 1 || d.lockedFree[0].p != pa {
		t.Fatalf("node A's io %p, the device keeps %v: not page-locked, or not given back", pa, d.lockedFree)
	}
	b, pb := run()
	if pb != pa || len(d.lockedFree) != 1 {
		t.Fatalf("node B's io %p, A's %p (kept: %v): the buffer given back was not taken again", pb, pa, d.lockedFree)
	}
	if !slices.Equal(a, b) {
		t.Fatal("node B's Steps differ from node A's on the same data")
	}
	if err := d.do(d.freeLocked); err != nil {
		t.Fatal(err)
	}
	alloc := stageAllocHost
	stageAllocHost = func(int64) (unsafe.Pointer, error) { return nil, errors.New("refused by the test") }
	defer func() { stageAllocHost = alloc }()
	c, pc := run()
	if pc != nil || len(d.lockedFree) != 0 {
		t.Fatalf("io %p with page-locked memory refused (kept: %v)", pc, d.lockedFree)
	}
	if !slices.Equal(a, c) {
		t.Fatal("the pageable node's Steps differ from the page-locked node's")
	}
}
