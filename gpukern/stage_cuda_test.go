//go:build cuda

package gpukern

import (
	"errors"
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
