//go:build !cuda

package gpukern

// KeyedStore keeps keys' models resident on a device. In this build (no cuda tag) none exists.
type KeyedStore struct{ shape KeyedShape }

// NewKeyedStore fails with ErrNoDevice in this build.
func (d *Device) NewKeyedStore(s KeyedShape) (*KeyedStore, error) { return nil, errNoCUDA }

// Shape is the store's slot shape.
func (s *KeyedStore) Shape() KeyedShape { return s.shape }

// Bytes is 0 in this build.
func (s *KeyedStore) Bytes() int64 { return 0 }

// Install fails with ErrNoDevice in this build.
func (s *KeyedStore) Install(slots []int32, models []*KeyedModel) error { return errNoCUDA }

// ScoreGrouped fails with ErrNoDevice in this build.
func (s *KeyedStore) ScoreGrouped(chunks [][]int32, xs []float32, out *KeyedScores) error {
	return errNoCUDA
}

// Free does nothing in this build.
func (s *KeyedStore) Free() error { return nil }

// KeyedSelfWeights fails with ErrNoDevice in this build.
func (d *Device) KeyedSelfWeights(sets [][][]float32, k []int, out [][]float64) error {
	return errNoCUDA
}
