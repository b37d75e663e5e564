#include "textflag.h"

// func sqDistCol(dst []uint32, col []float32, x float32, add bool) int
// For i < n = len(col) rounded down to a multiple of 4 (dst at least as long):
// dst[i] = bits((x - col[i])^2) (add false) or bits(float(dst[i]) + (x - col[i])^2) (add true),
// four lanes at a time with SSE, eight per round while they last. Returns n.
TEXT ·sqDistCol(SB), NOSPLIT, $0-64
	MOVQ   dst_base+0(FP), DI
	MOVQ   col_base+24(FP), SI
	MOVQ   col_len+32(FP), R11
	ANDQ   $-4, R11
	MOVSS  x+48(FP), X6
	SHUFPS $0, X6, X6
	MOVBLZX add+52(FP), AX
	XORQ   CX, CX
	MOVQ   R11, R10
	ANDQ   $-8, R10
	TESTQ  AX, AX
	JNE    add8

set8:
	CMPQ   CX, R10
	JGE    set4
	MOVUPS (SI)(CX*4), X1
	MOVUPS 16(SI)(CX*4), X3
	MOVAPS X6, X0
	MOVAPS X6, X2
	SUBPS  X1, X0            // x - c
	SUBPS  X3, X2
	MULPS  X0, X0            // (x - c)^2, rounded to float32
	MULPS  X2, X2
	MOVUPS X0, (DI)(CX*4)
	MOVUPS X2, 16(DI)(CX*4)
	ADDQ   $8, CX
	JMP    set8
set4:
	CMPQ   CX, R11
	JGE    done
	MOVUPS (SI)(CX*4), X1
	MOVAPS X6, X0
	SUBPS  X1, X0
	MULPS  X0, X0
	MOVUPS X0, (DI)(CX*4)
	ADDQ   $4, CX
	JMP    set4

add8:
	CMPQ   CX, R10
	JGE    add4
	MOVUPS (SI)(CX*4), X1
	MOVUPS 16(SI)(CX*4), X3
	MOVAPS X6, X0
	MOVAPS X6, X2
	SUBPS  X1, X0
	SUBPS  X3, X2
	MULPS  X0, X0
	MULPS  X2, X2
	MOVUPS (DI)(CX*4), X4
	MOVUPS 16(DI)(CX*4), X5
	ADDPS  X4, X0            // d2 + (x - c)^2, rounded to float32
	ADDPS  X5, X2
	MOVUPS X0, (DI)(CX*4)
	MOVUPS X2, 16(DI)(CX*4)
	ADDQ   $8, CX
	JMP    add8
add4:
	CMPQ   CX, R11
	JGE    done
	MOVUPS (SI)(CX*4), X1
	MOVAPS X6, X0
	SUBPS  X1, X0
	MULPS  X0, X0
	MOVUPS (DI)(CX*4), X4
	ADDPS  X4, X0
	MOVUPS X0, (DI)(CX*4)
	ADDQ   $4, CX
	JMP    add4

done:
	MOVQ R11, ret+56(FP)
	RET
