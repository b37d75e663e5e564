package prefetch

import (
	"testing"
	"unsafe"
)

// TestPrefetchChangesNothing: a prefetch of any range (unaligned, one byte, many lines, nil,
// an address past the heap) returns and leaves the memory as it was.
func TestPrefetchChangesNothing(t *testing.T) {
	buf := make([]byte, 4096+64)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	for _, c := range []struct{ off, n int }{{0, 1}, {1, 1}, {63, 2}, {5, 64}, {5, 65}, {0, 4096}, {17, 4100}} {
		Bytes(unsafe.Pointer(&buf[c.off]), uintptr(c.n))
	}
	Slice(buf[:0])
	Slice(buf[3:200])
	Slice([]float64{1, 2, 3})
	Object[[1 << 12]byte](nil)
	Object(&struct{ a, b int }{1, 2})
	ForWrite(&buf[100])
	ForWrite[int](nil)
	ForWrite(&struct{ a [200]byte }{})
	Bytes(nil, 0)
	Bytes(nil, 256) // nothing there: a prefetch never faults
	for i := range buf {
		if buf[i] != byte(i*7) {
			t.Fatalf("byte %d changed", i)
		}
	}
}

// BenchmarkPrefetchLines: the cost of asking for 25 lines (a key's calibration of 200 scores).
func BenchmarkPrefetchLines(b *testing.B) {
	s := make([]float64, 200)
	for b.Loop() {
		Slice(s)
	}
}
