package gpukern

import "unsafe"

// pack gathers host arrays into one staging buffer at 8-byte-aligned offsets, for one
// cuMemcpyHtoD into one device buffer; add returns each array's offset in it.
type pack struct {
	buf []byte
}

func (p *pack) reset(staging []byte) { p.buf = staging[:0] }

// add appends bytes bytes from src (nothing when bytes is 0) at the next 8-byte boundary and
// returns their offset.
func (p *pack) add(src unsafe.Pointer, bytes int64) int64 {
	off := int64(len(p.buf)+7) &^ 7
	p.buf = p.buf[:min(off, int64(cap(p.buf)))]
	for int64(len(p.buf)) < off { // the alignment padding, when the buffer must grow for it
		p.buf = append(p.buf, 0)
	}
	p.raw(src, bytes)
	return off
}

// raw appends bytes bytes from src right after the last ones (no alignment).
func (p *pack) raw(src unsafe.Pointer, bytes int64) {
	if bytes > 0 {
		p.buf = append(p.buf, unsafe.Slice((*byte)(src), bytes)...)
	}
}

// addCols appends column-major columns of rows values each as one contiguous [dim][rows] array
// (the kernels' layout) and returns its offset.
func (p *pack) addCols(cols [][]float32, rows int) int64 {
	if len(cols) == 0 || rows == 0 {
		return p.add(nil, 0)
	}
	off := p.add(unsafe.Pointer(&cols[0][0]), int64(rows)*4)
	for _, c := range cols[1:] {
		p.raw(unsafe.Pointer(&c[0]), int64(rows)*4)
	}
	return off
}
