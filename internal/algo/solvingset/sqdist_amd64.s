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

// func sqDistBlockAVX2(dst []uint32, R [][]float32, q []float32) int
// For i < n = len(dst) rounded down to a multiple of 32 (every R[j] at least as long, len(q) =
// len(R)): dst[i] = bits of the float32 sum over j, in order, of (q[j] - R[j][i])^2, starting
// from +0. 32 reference points per block in four YMM accumulators, the dimensions inside the
// block, so each sum is stored once. Returns n.
TEXT ·sqDistBlockAVX2(SB), NOSPLIT, $0-80
	MOVQ dst_base+0(FP), DI
	MOVQ dst_len+8(FP), R11
	ANDQ $-32, R11
	MOVQ R_base+24(FP), SI
	MOVQ R_len+32(FP), R8
	MOVQ q_base+48(FP), DX
	XORQ CX, CX

block:
	CMPQ   CX, R11
	JGE    done
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	XORQ   R9, R9
	MOVQ   SI, R10

dim:
	CMPQ         R9, R8
	JGE          store
	MOVQ         (R10), BX              // R[j]'s data
	VBROADCASTSS (DX)(R9*4), Y4         // q[j]
	VMOVUPS      (BX)(CX*4), Y5
	VMOVUPS      32(BX)(CX*4), Y6
	VMOVUPS      64(BX)(CX*4), Y7
	VMOVUPS      96(BX)(CX*4), Y8
	VSUBPS       Y5, Y4, Y5             // q[j] - c
	VSUBPS       Y6, Y4, Y6
	VSUBPS       Y7, Y4, Y7
	VSUBPS       Y8, Y4, Y8
	VMULPS       Y5, Y5, Y5             // rounded to float32: no FMA
	VMULPS       Y6, Y6, Y6
	VMULPS       Y7, Y7, Y7
	VMULPS       Y8, Y8, Y8
	VADDPS       Y5, Y0, Y0
	VADDPS       Y6, Y1, Y1
	VADDPS       Y7, Y2, Y2
	VADDPS       Y8, Y3, Y3
	ADDQ         $24, R10               // next slice header
	INCQ         R9
	JMP          dim

store:
	VMOVUPS Y0, (DI)(CX*4)
	VMOVUPS Y1, 32(DI)(CX*4)
	VMOVUPS Y2, 64(DI)(CX*4)
	VMOVUPS Y3, 96(DI)(CX*4)
	ADDQ    $32, CX
	JMP     block

done:
	VZEROUPPER
	MOVQ R11, ret+72(FP)
	RET

// func packLEAVX2(dst, src []uint32, t uint32, perm *[256][8]uint32) int
// Left-packs the src[i] <= t (signed compare: the bit patterns of non-negative floats are
// below 2^31) of i < len(src) rounded down to a multiple of 8 into dst, in order, eight at a
// time: the compare's mask picks a permutation that moves the kept lanes first, all eight lanes
// are stored at dst[n] and n advances by the count kept. len(dst) >= len(src). Returns n.
TEXT ·packLEAVX2(SB), NOSPLIT, $0-72
	MOVQ         dst_base+0(FP), DI
	MOVQ         src_base+24(FP), SI
	MOVQ         src_len+32(FP), R11
	ANDQ         $-8, R11
	MOVL         t+48(FP), AX
	VMOVD        AX, X0
	VPBROADCASTD X0, Y0
	MOVQ         perm+56(FP), R8
	XORQ         CX, CX                 // i
	XORQ         DX, DX                 // n

loop:
	CMPQ      CX, R11
	JGE       done
	VMOVDQU   (SI)(CX*4), Y1
	VPCMPGTD  Y0, Y1, Y2                // src > t
	VMOVMSKPS Y2, AX
	XORQ      $0xff, AX                 // src <= t
	MOVQ      AX, BX
	SHLQ      $5, BX                    // 32 bytes per permutation
	VMOVDQU   (R8)(BX*1), Y3
	VPERMD    Y1, Y3, Y1                // the kept lanes first
	VMOVDQU   Y1, (DI)(DX*4)
	POPCNTQ   AX, AX
	ADDQ      AX, DX
	ADDQ      $8, CX
	JMP       loop

done:
	VZEROUPPER
	MOVQ DX, ret+64(FP)
	RET

// func sqDistBlockAVX512(dst []uint32, R [][]float32, q []float32) int
// sqDistBlockAVX2 with 16-lane ZMM registers: blocks of 64 points in four accumulators, then
// blocks of 16 in one, so it handles len(dst) rounded down to a multiple of 16. Returns that.
TEXT ·sqDistBlockAVX512(SB), NOSPLIT, $0-80
	MOVQ dst_base+0(FP), DI
	MOVQ dst_len+8(FP), R11
	MOVQ R11, R12
	ANDQ $-64, R11            // end of the 64-point blocks
	ANDQ $-16, R12            // end of the 16-point blocks
	MOVQ R_base+24(FP), SI
	MOVQ R_len+32(FP), R8
	MOVQ q_base+48(FP), DX
	XORQ CX, CX

block64:
	CMPQ   CX, R11
	JGE    block16
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	XORQ   R9, R9
	MOVQ   SI, R10

dim64:
	CMPQ         R9, R8
	JGE          store64
	MOVQ         (R10), BX
	VBROADCASTSS (DX)(R9*4), Z4
	VMOVUPS      (BX)(CX*4), Z5
	VMOVUPS      64(BX)(CX*4), Z6
	VMOVUPS      128(BX)(CX*4), Z7
	VMOVUPS      192(BX)(CX*4), Z8
	VSUBPS       Z5, Z4, Z5
	VSUBPS       Z6, Z4, Z6
	VSUBPS       Z7, Z4, Z7
	VSUBPS       Z8, Z4, Z8
	VMULPS       Z5, Z5, Z5
	VMULPS       Z6, Z6, Z6
	VMULPS       Z7, Z7, Z7
	VMULPS       Z8, Z8, Z8
	VADDPS       Z5, Z0, Z0
	VADDPS       Z6, Z1, Z1
	VADDPS       Z7, Z2, Z2
	VADDPS       Z8, Z3, Z3
	ADDQ         $24, R10
	INCQ         R9
	JMP          dim64

store64:
	VMOVUPS Z0, (DI)(CX*4)
	VMOVUPS Z1, 64(DI)(CX*4)
	VMOVUPS Z2, 128(DI)(CX*4)
	VMOVUPS Z3, 192(DI)(CX*4)
	ADDQ    $64, CX
	JMP     block64

block16:
	CMPQ   CX, R12
	JGE    done512
	VPXORD Z0, Z0, Z0
	XORQ   R9, R9
	MOVQ   SI, R10

dim16:
	CMPQ         R9, R8
	JGE          store16
	MOVQ         (R10), BX
	VBROADCASTSS (DX)(R9*4), Z4
	VMOVUPS      (BX)(CX*4), Z5
	VSUBPS       Z5, Z4, Z5
	VMULPS       Z5, Z5, Z5
	VADDPS       Z5, Z0, Z0
	ADDQ         $24, R10
	INCQ         R9
	JMP          dim16

store16:
	VMOVUPS Z0, (DI)(CX*4)
	ADDQ    $16, CX
	JMP     block16

done512:
	VZEROUPPER
	MOVQ R12, ret+72(FP)
	RET

// func partitionAVX2(le, gt, src []uint32, t uint32, perm *[256][8]uint32) int
// Splits src[i] (i < len(src) rounded down to a multiple of 8) by the signed compare with t
// (the bit patterns of non-negative floats are below 2^31): the values <= t are left-packed to
// le, the others to gt, each in order, eight at a time as in packLEAVX2 (every store writes
// all eight lanes at the current end). len(le), len(gt) >= len(src). Returns the count in le;
// gt holds the rest of the rounded-down length.
TEXT ·partitionAVX2(SB), NOSPLIT, $0-96
	MOVQ         le_base+0(FP), DI
	MOVQ         gt_base+24(FP), R9
	MOVQ         src_base+48(FP), SI
	MOVQ         src_len+56(FP), R11
	ANDQ         $-8, R11
	MOVL         t+72(FP), AX
	VMOVD        AX, X0
	VPBROADCASTD X0, Y0
	MOVQ         perm+80(FP), R8
	XORQ         CX, CX                 // i
	XORQ         DX, DX                 // count in le
	XORQ         R10, R10               // count in gt

ploop:
	CMPQ      CX, R11
	JGE       pdone
	VMOVDQU   (SI)(CX*4), Y1
	VPCMPGTD  Y0, Y1, Y2                // src > t
	VMOVMSKPS Y2, AX                    // the lanes for gt
	MOVQ      AX, BX
	XORQ      $0xff, BX                 // the lanes for le
	MOVQ      BX, R12
	SHLQ      $5, R12                   // 32 bytes per permutation
	VMOVDQU   (R8)(R12*1), Y3
	VPERMD    Y1, Y3, Y4
	VMOVDQU   Y4, (DI)(DX*4)
	MOVQ      AX, R12
	SHLQ      $5, R12
	VMOVDQU   (R8)(R12*1), Y3
	VPERMD    Y1, Y3, Y5
	VMOVDQU   Y5, (R9)(R10*4)
	POPCNTQ   BX, BX
	ADDQ      BX, DX
	POPCNTQ   AX, AX
	ADDQ      AX, R10
	ADDQ      $8, CX
	JMP       ploop

pdone:
	VZEROUPPER
	MOVQ DX, ret+88(FP)
	RET
