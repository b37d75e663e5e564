//go:build !amd64

package solvingset

func cpuHasAVX2() bool { return false }
