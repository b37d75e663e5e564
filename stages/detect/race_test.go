//go:build race

package detect

// raceEnabled: the race detector allocates on its own, so tests that count allocations skip.
const raceEnabled = true
