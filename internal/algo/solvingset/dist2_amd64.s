#include "textflag.h"

// func distMask2(x0, x1, dst, t2 []float32, p0, p1 float32) uint64
// len(x0) is a multiple of 4 and at most 64; x1, dst and t2 are at least as long.
TEXT ·distMask2(SB), NOSPLIT, $0-112
	MOVQ   x0_base+0(FP), SI
	MOVQ   x0_len+8(FP), R11
	MOVQ   x1_base+24(FP), DI
	MOVQ   dst_base+48(FP), DX
	MOVQ   t2_base+72(FP), R8
	MOVSS  p0+96(FP), X6
	SHUFPS $0, X6, X6
	MOVSS  p1+100(FP), X7
	SHUFPS $0, X7, X7
	XORQ   R9, R9             // mask
	XORQ   CX, CX             // i
loop:
	CMPQ     CX, R11
	JGE      done
	MOVUPS   (SI)(CX*4), X0
	MOVUPS   (DI)(CX*4), X1
	SUBPS    X6, X0           // t = x0 - p0
	SUBPS    X7, X1           // u = x1 - p1
	MULPS    X0, X0           // t*t, rounded to float32
	MULPS    X1, X1           // u*u
	ADDPS    X1, X0           // t*t + u*u
	MOVUPS   X0, (DX)(CX*4)
	MOVUPS   (R8)(CX*4), X2
	CMPPS    X2, X0, $2       // d2 <= t2
	MOVMSKPS X0, AX
	SHLQ     CX, AX
	ORQ      AX, R9
	ADDQ     $4, CX
	JMP      loop
done:
	MOVQ R9, ret+104(FP)
	RET
