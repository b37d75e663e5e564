// Package configs holds the shipped pipeline configurations, embedded so that the binary
// carries them (outlierd demo runs demo.yaml with nothing else on disk).
package configs

import "embed"

// FS holds every *.yaml of this folder.
//
//go:embed *.yaml
var FS embed.FS
