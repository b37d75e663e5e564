package gpukern

import (
	"testing"
	"unsafe"
)

// TestPackLayout: a pack holds each array at an 8-byte boundary (the kernels read float64 and
// int64 arrays at those offsets), the columns of addCols back to back with no padding between
// them (the kernels index x[j*n + i]), and the bytes as given, also after the staging buffer grew.
func TestPackLayout(t *testing.T) {
	var p pack
	p.reset(make([]byte, 0, 8)) // too small: add must grow it
	cols := [][]float32{{1, 2, 3}, {4, 5, 6}, {7, 8, 9}}
	idx := []uint64{10, 11, 12}
	lo := []float64{0.5}
	o1 := p.addCols(cols, 3) // 36 bytes
	o2 := p.add(unsafe.Pointer(&idx[0]), 24)
	o3 := p.add(nil, 0)
	o4 := p.add(unsafe.Pointer(&lo[0]), 8)
	if o1 != 0 || o2 != 40 || o3 != 64 || o4 != 64 {
		t.Fatalf("offsets %d %d %d %d, want 0 40 64 64", o1, o2, o3, o4)
	}
	if len(p.buf) != 72 {
		t.Fatalf("pack is %d bytes, want 72", len(p.buf))
	}
	f := unsafe.Slice((*float32)(unsafe.Pointer(&p.buf[o1])), 9)
	for i, want := range []float32{1, 2, 3, 4, 5, 6, 7, 8, 9} {
		if f[i] != want {
			t.Fatalf("column data %v, want the columns back to back", f)
		}
	}
	if u := unsafe.Slice((*uint64)(unsafe.Pointer(&p.buf[o2])), 3); u[0] != 10 || u[2] != 12 {
		t.Fatalf("index %v", u)
	}
	if g := *(*float64)(unsafe.Pointer(&p.buf[o4])); g != 0.5 {
		t.Fatalf("regions %v", g)
	}
	// Reused: reset keeps the storage and starts again at offset 0.
	p.reset(p.buf)
	if o := p.addCols(cols[:1], 2); o != 0 || len(p.buf) != 8 {
		t.Fatalf("after reset: offset %d, %d bytes", o, len(p.buf))
	}
}
