package gpukern

// The density kernels' parameter structs (density.cu: DensCommon, DensRecordsParams,
// DensClustersParams), passed by value in one launch buffer. Every field is 8 bytes (device
// pointers as uint64), so Go lays them out as C does; the `c` tags name the C members, and
// TestDensityABI holds the offsets to the static_asserts of density.cu and the sizes to the
// parameter sizes in density.ptx.
type densCommon struct {
	N        int64   `c:"n"`
	R        int64   `c:"r"`
	Mu       uint64  `c:"mu"`
	Coef     uint64  `c:"coef"`
	Inv2     uint64  `c:"inv2"`
	K        int64   `c:"k"`
	Eta      float64 `c:"eta"`
	Delta    float64 `c:"delta"`
	Samples  int64   `c:"samples"`
	Mode     int64   `c:"mode"`
	Seed     uint64  `c:"seed"`
	Exact    int64   `c:"exact"`
	RegLo    uint64  `c:"regLo"`
	RegHi    uint64  `c:"regHi"`
	RegOff   uint64  `c:"regOff"`
	BLo      uint64  `c:"bLo"`
	BHi      uint64  `c:"bHi"`
	BOrigin  uint64  `c:"bOrigin"`
	BInvStep uint64  `c:"bInvStep"`
	Cells    int64   `c:"cells"`
	Prob     uint64  `c:"prob"`
	Mask     uint64  `c:"mask"`
	Flag     uint64  `c:"flag"`
}

// densRecordsParams is density_records' parameter.
type densRecordsParams struct {
	Means      uint64     `c:"means"`
	SDs        uint64     `c:"sds"`
	Index      uint64     `c:"index"`
	FirstIndex uint64     `c:"firstIndex"`
	C          densCommon `c:"c"`
}

// densClustersParams is density_clusters' parameter.
type densClustersParams struct {
	Means uint64     `c:"means"`
	SDs   uint64     `c:"sds"`
	Index uint64     `c:"index"`
	C     densCommon `c:"c"`
}
