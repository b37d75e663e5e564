package gpukern

// SetDensityPlain makes the density kernels sample without the density bounds (the paper's
// loop) while v is true: for the tests and benchmarks that compare the two.
func SetDensityPlain(v bool) { densityPlain = v }

// RegionsForTest is the exact method's regions as DetectRecords uploads them (none when p
// samples).
func (m *DensityModel) RegionsForTest(p DensityParams) (lo, hi []float64, off []int64, err error) {
	return m.densityRegions(p)
}

// SolvingSetResident is SolvingSet on columns already on the device (Upload), for the benchmark
// that times the one-device path without its upload; c must hold finite values.
func SolvingSetResident(c *Columns, p SolvingSetParams) (SolvingSetResult, error) {
	if err := p.validate(c.rows, c.dims); err != nil {
		return SolvingSetResult{}, err
	}
	return c.dev.solvingSetResident(c, p)
}

// KeyedChunks is keyedChunks, for TestKeyedChunks.
func KeyedChunks(slot []int32) (order, chunks []int32) { return keyedChunks(slot) }
