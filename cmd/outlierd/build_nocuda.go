//go:build !cuda

package main

// cudaBuild: this binary was built without -tags cuda (the CPU build, which may hand over to the
// CUDA companion: companion.go).
const cudaBuild = false
