package solvingset

import "golang.org/x/sys/cpu"

func cpuHasAVX2() bool { return cpu.X86.HasAVX2 }
