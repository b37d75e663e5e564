package gpukern

// The hypercube kernels' parameter structs (hypercube.cu: HcEncodeParams, HcDensityParams),
// passed by value; 8-byte fields only (device pointers as uint64), held to the .cu's
// static_asserts and the PTX by TestHypercubeABI.
type hcEncodeParams struct {
	X     uint64 `c:"X"`
	N     int64  `c:"n"`
	D     int64  `c:"d"`
	Lo    uint64 `c:"lo"`
	Scale uint64 `c:"scale"`
	Bins  int64  `c:"bins"`
	Bits  int64  `c:"bits"`
	Per   int64  `c:"per"`
	W     int64  `c:"W"`
	Keys  uint64 `c:"keys"`
}

type hcDensityParams struct {
	Keys   uint64 `c:"keys"`
	Count  uint64 `c:"count"`
	NCell  int64  `c:"ncell"`
	Nodes  uint64 `c:"nodes"`
	Hi     uint64 `c:"hi"`
	NNodes int64  `c:"nnodes"`
	D      int64  `c:"d"`
	Bits   int64  `c:"bits"`
	Loc    uint64 `c:"loc"`
	W      int64  `c:"W"`
	Masks  uint64 `c:"masks"`
	Out    uint64 `c:"w"`
}
