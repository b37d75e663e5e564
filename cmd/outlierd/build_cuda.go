//go:build cuda

package main

// cudaBuild: this binary was built with -tags cuda (the companion itself: it never hands over).
const cudaBuild = true
