package solvingset

// sqDistCol adds one dimension to the squared distances of a query coordinate x to the
// reference points' coordinates col, on the bit patterns of the float32 sums (dst[i] =
// Float32bits of the running sum): with add false dst[i] = (x - col[i])^2, else dst[i] +=
// (x - col[i])^2. SSE, four lanes at a time: SUBPS, MULPS and ADDPS round each lane exactly as
// the scalar float32 operations do, so the sums are bit-identical to the pure Go loop
// (sqDistColGo). It handles i < len(col) rounded down to a multiple of 4 and returns that count;
// len(dst) >= len(col).
//
//go:noescape
func sqDistCol(dst []uint32, col []float32, x float32, add bool) int
