#include "textflag.h"

// func lines(p unsafe.Pointer, n uintptr)
// PREFETCHT0 every 64 bytes from p, and the last byte's line (p need not be aligned).
TEXT ·lines(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), AX
	MOVQ n+8(FP), CX
	LEAQ -1(AX)(CX*1), DX
loop:
	PREFETCHT0 (AX)
	ADDQ $64, AX
	CMPQ AX, DX
	JB   loop
	PREFETCHT0 (DX)
	RET

// func linesW(p unsafe.Pointer, n uintptr)
// lines with PREFETCHW (for a write: the line comes exclusive, no second request at the store;
// encoded as bytes, which the Go assembler does not name; a NOP on a CPU without it).
TEXT ·linesW(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), AX
	MOVQ n+8(FP), CX
	LEAQ -1(AX)(CX*1), DX
loopw:
	BYTE $0x0F; BYTE $0x0D; BYTE $0x08 // PREFETCHW (AX)
	ADDQ $64, AX
	CMPQ AX, DX
	JB   loopw
	BYTE $0x0F; BYTE $0x0D; BYTE $0x0A // PREFETCHW (DX)
	RET
