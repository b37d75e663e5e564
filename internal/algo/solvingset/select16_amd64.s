#include "textflag.h"

// A compare-exchange step of a bitonic network over the 16 lanes of src, into dst: each lane
// meets its partner (lane i^d: VPSHUFD within 128 bits for d = 1, 2; VSHUFI32X4 across them for
// d = 4, 8), takes the larger of the two, and the lanes set in the mask at moff(CX) take the
// smaller instead (a masked VPMINUD).
#define STAGE_IN(imm, src, dst, moff) \
	KMOVW   moff(CX), K1;             \
	VPSHUFD $imm, src, Z2;            \
	VPMAXUD Z2, src, dst;             \
	VPMINUD Z2, src, K1, dst

#define STAGE_X(imm, src, dst, moff) \
	KMOVW      moff(CX), K1;          \
	VSHUFI32X4 $imm, src, src, Z2;    \
	VPMAXUD    Z2, src, dst;          \
	VPMINUD    Z2, src, K1, dst

// SORT16 sorts the 16 lanes of Z0 ascending (bitonic sort: 10 stages), ending in Z0.
#define SORT16 \
	STAGE_IN(0xb1, Z0, Z3, 320); \
	STAGE_IN(0x4e, Z3, Z0, 322); \
	STAGE_IN(0xb1, Z0, Z3, 324); \
	STAGE_X(0xb1, Z3, Z0, 326);  \
	STAGE_IN(0x4e, Z0, Z3, 328); \
	STAGE_IN(0xb1, Z3, Z0, 330); \
	STAGE_X(0x4e, Z0, Z3, 332);  \
	STAGE_X(0xb1, Z3, Z0, 334);  \
	STAGE_IN(0x4e, Z0, Z3, 336); \
	STAGE_IN(0xb1, Z3, Z0, 338)

// MERGE16 sorts the bitonic 16 lanes of Z0 ascending (4 half-cleaners), ending in Z0.
#define MERGE16 \
	STAGE_X(0x4e, Z0, Z3, 340);  \
	STAGE_X(0xb1, Z3, Z0, 342);  \
	STAGE_IN(0x4e, Z0, Z3, 344); \
	STAGE_IN(0xb1, Z3, Z0, 346)

// func smallest16AVX512(a []uint32, out *[16]uint32, tabs *bitonicTables)
TEXT ·smallest16AVX512(SB), NOSPLIT, $0-40
	MOVQ      a_base+0(FP), SI
	MOVQ      a_len+8(FP), R8
	MOVQ      out+24(FP), DI
	MOVQ      tabs+32(FP), CX
	VMOVDQU32 256(CX), Z14          // lane 15-i
	VMOVDQU32 (SI), Z0
	SORT16
	VMOVDQA32 Z0, Z5                // the 16 smallest so far, ascending
	MOVQ      $16, R9

chunk:
	CMPQ      R9, R8
	JGE       done
	VMOVDQU32 (SI)(R9*4), Z0
	SORT16
	VPERMD    Z0, Z14, Z0           // descending
	VPMINUD   Z0, Z5, Z0            // the 16 smallest of both, bitonic
	MERGE16
	VMOVDQA32 Z0, Z5
	ADDQ      $16, R9
	JMP       chunk

done:
	VMOVDQU32 Z5, (DI)
	VZEROUPPER
	RET
