package gpukern

// SetDensityPlain makes the density kernels sample without the density bounds (the paper's
// loop) while v is true: for the tests and benchmarks that compare the two.
func SetDensityPlain(v bool) { densityPlain = v }
