package gpukern

// The parameter structs of the k-NN, micro-clustering, solving-set and PROCLUS kernels (knn.cu,
// microcluster.cu, solvingset.cu, proclus.cu), one per kernel or per family sharing a signature,
// passed by value in one launch buffer (launchParams). Every field is 8 bytes (device pointers as
// uint64), so Go lays them out as C does; the `c` tags name the C members, and TestKernelABI holds
// the offsets to the .cu files' static_asserts and the sizes to the PTX's parameter sizes.

// knnParams is the parameter of every knn_weights_q*_d* instantiation (knn.cu: KnnParams).
type knnParams struct {
	S    uint64 `c:"S"`
	Ns   int64  `c:"ns"`
	Q    uint64 `c:"Q"`
	Nq   int64  `c:"nq"`
	D    int64  `c:"d"`
	K    int64  `c:"k"`
	Tile int64  `c:"tile"`
	Self int64  `c:"self"`
	Out  uint64 `c:"out"`
}

// knnSplitParams is the parameter of every knn_split_q*_d* instantiation (knnsplit.cu:
// KnnSplitParams).
type knnSplitParams struct {
	S       uint64 `c:"S"`
	Ns      int64  `c:"ns"`
	Q       uint64 `c:"Q"`
	Nq      int64  `c:"nq"`
	D       int64  `c:"d"`
	K       int64  `c:"k"`
	Slices  int64  `c:"slices"`
	Slice   int64  `c:"slice"`
	Partial uint64 `c:"partial"`
}

// knnMergeParams is knn_merge_q*'s parameter (knnsplit.cu: KnnMergeParams).
type knnMergeParams struct {
	Partial uint64 `c:"partial"`
	Nq      int64  `c:"nq"`
	K       int64  `c:"k"`
	Slices  int64  `c:"slices"`
	Out     uint64 `c:"out"`
}

// mcAssignParams is assign_nearest's parameter (microcluster.cu: McAssignParams).
type mcAssignParams struct {
	X      uint64 `c:"X"`
	N      int64  `c:"n"`
	C      uint64 `c:"C"`
	Q      int64  `c:"q"`
	D      int64  `c:"d"`
	Tile   int64  `c:"tile"`
	Assign uint64 `c:"assign"`
}

// mcSortParams is cf_sort's parameter (microcluster.cu: McSortParams).
type mcSortParams struct {
	Assign uint64 `c:"assign"`
	N      int64  `c:"n"`
	Q      int64  `c:"q"`
	Idx    uint64 `c:"idx"`
	Starts uint64 `c:"starts"`
}

// mcReduceParams is the parameter of cf_reduce_chunk_o1 and _o4 (microcluster.cu: McReduceParams).
type mcReduceParams struct {
	X      uint64 `c:"X"`
	E      uint64 `c:"E"`
	Idx    uint64 `c:"idx"`
	Starts uint64 `c:"starts"`
	N      int64  `c:"n"`
	D      int64  `c:"d"`
	Q      int64  `c:"q"`
	Chunk  int64  `c:"chunk"`
	Part   uint64 `c:"part"`
	Pcount uint64 `c:"pcount"`
}

// mcFinalizeParams is cf_finalize's parameter (microcluster.cu: McFinalizeParams).
type mcFinalizeParams struct {
	Part   uint64 `c:"part"`
	Pcount uint64 `c:"pcount"`
	Chunks int64  `c:"chunks"`
	D      int64  `c:"d"`
	Q      int64  `c:"q"`
	Cf     uint64 `c:"cf"`
	Count  uint64 `c:"count"`
	Cent   uint64 `c:"cent"`
}

// ssInitParams is ss_init's parameter (solvingset.cu: SsInitParams).
type ssInitParams struct {
	Heap  uint64 `c:"heap"`
	UB    uint64 `c:"ub"`
	State uint64 `c:"state"`
	N     int64  `c:"N"`
	K     int64  `c:"k"`
}

// ssGatherParams is ss_gather's parameter (solvingset.cu: SsGatherParams).
type ssGatherParams struct {
	X        uint64 `c:"X"`
	N        int64  `c:"N"`
	Dims     int64  `c:"dims"`
	Heap     uint64 `c:"heap"`
	K        int64  `c:"k"`
	Cand     uint64 `c:"cand"`
	Nc       int64  `c:"nc"`
	State    uint64 `c:"state"`
	CandX    uint64 `c:"candX"`
	CandHeap uint64 `c:"candHeap"`
}

// ssCtocParams is ss_ctoc's parameter (solvingset.cu: SsCtocParams).
type ssCtocParams struct {
	CandX    uint64  `c:"candX"`
	Nc       int64   `c:"nc"`
	Dims     int64   `c:"dims"`
	K        int64   `c:"k"`
	CandHeap uint64  `c:"candHeap"`
	CandUB   uint64  `c:"candUB"`
	CandDone uint64  `c:"candDone"`
	Margin   float64 `c:"margin"`
	MinOUT   float64 `c:"minOUT"`
}

// ssDtocParams is ss_dtoc's parameter (solvingset.cu: SsDtocParams).
type ssDtocParams struct {
	X        uint64  `c:"X"`
	N        int64   `c:"N"`
	Dims     int64   `c:"dims"`
	CandX    uint64  `c:"candX"`
	CandDone uint64  `c:"candDone"`
	Nc       int64   `c:"nc"`
	K        int64   `c:"k"`
	State    uint64  `c:"state"`
	Heap     uint64  `c:"heap"`
	UB       uint64  `c:"ub"`
	DistM    uint64  `c:"distM"`
	Margin   float64 `c:"margin"`
	MinOUT   float64 `c:"minOUT"`
}

// ssSelectParams is ss_select's parameter (solvingset.cu: SsSelectParams).
type ssSelectParams struct {
	UB     uint64  `c:"ub"`
	State  uint64  `c:"state"`
	N      int64   `c:"N"`
	M      int64   `c:"m"`
	Margin float64 `c:"margin"`
	MinOUT float64 `c:"minOUT"`
	OutKey uint64  `c:"outKey"`
	OutIdx uint64  `c:"outIdx"`
	Active uint64  `c:"active"`
}

// ssSelectMergeParams is ss_select_merge's parameter (solvingset.cu: SsSelectMergeParams).
type ssSelectMergeParams struct {
	InKey  uint64 `c:"inKey"`
	InIdx  uint64 `c:"inIdx"`
	L      int64  `c:"L"`
	Take   int64  `c:"take"`
	OutKey uint64 `c:"outKey"`
	OutIdx uint64 `c:"outIdx"`
}

// ssSelectTailParams is ss_select_tail's parameter (solvingset.cu: SsSelectTailParams).
type ssSelectTailParams struct {
	Key0   uint64 `c:"key0"`
	Idx0   uint64 `c:"idx0"`
	Key1   uint64 `c:"key1"`
	Idx1   uint64 `c:"idx1"`
	FinKey uint64 `c:"finKey"`
	FinIdx uint64 `c:"finIdx"`
	L      int64  `c:"L"`
	Take   int64  `c:"take"`
	Levels int64  `c:"levels"`
	Count  uint64 `c:"count"`
}

// ssSelectSortParams is ss_select_sort's parameter (solvingset.cu: SsSelectSortParams).
type ssSelectSortParams struct {
	Key uint64 `c:"key"`
	Idx uint64 `c:"idx"`
	N   int64  `c:"n"`
}

// ssCandPartParams is ss_candpart_q64's and ss_candpart_q256's parameter (solvingset.cu:
// SsCandPartParams).
type ssCandPartParams struct {
	DistM    uint64  `c:"distM"`
	N        int64   `c:"N"`
	K        int64   `c:"k"`
	CandHeap uint64  `c:"candHeap"`
	CandDone uint64  `c:"candDone"`
	Margin   float64 `c:"margin"`
	MinOUT   float64 `c:"minOUT"`
	Part     uint64  `c:"part"`
}

// ssCandMergeParams is ss_candmerge_q64's and ss_candmerge_q256's parameter (solvingset.cu:
// SsCandMergeParams); List 0 is the weight form, else the distributed nodes' list form.
type ssCandMergeParams struct {
	Part     uint64 `c:"part"`
	S        int64  `c:"S"`
	K        int64  `c:"k"`
	CandHeap uint64 `c:"candHeap"`
	CandDone uint64 `c:"candDone"`
	Weight   uint64 `c:"weight"`
	List     uint64 `c:"list"`
}

// pcLocalityParams is proclus_locality's parameter (proclus.cu: PcLocalityParams).
type pcLocalityParams struct {
	X     uint64 `c:"X"`
	N     int64  `c:"n"`
	D     int64  `c:"d"`
	Nq    int64  `c:"nq"`
	Slot  uint64 `c:"slot"`
	Fresh uint64 `c:"fresh"`
	Med   uint64 `c:"med"`
	Band  uint64 `c:"band"`
	Dist  uint64 `c:"dist"`
	Scale uint64 `c:"scale"`
	Out   uint64 `c:"out"`
}

// pcAssignParams is proclus_assign's parameter (proclus.cu: PcAssignParams).
type pcAssignParams struct {
	X         uint64 `c:"X"`
	N         int64  `c:"n"`
	D         int64  `c:"d"`
	K         int64  `c:"k"`
	Med       uint64 `c:"med"`
	Off       uint64 `c:"off"`
	Dims      uint64 `c:"dims"`
	Radius    uint64 `c:"radius"`
	UseRadius int64  `c:"use_radius"`
	Scale     uint64 `c:"scale"`
	Assign    uint64 `c:"assign"`
	Out       uint64 `c:"out"`
}

// pcSpreadParams is proclus_spread's parameter (proclus.cu: PcSpreadParams).
type pcSpreadParams struct {
	X      uint64 `c:"X"`
	N      int64  `c:"n"`
	D      int64  `c:"d"`
	K      int64  `c:"k"`
	Assign uint64 `c:"assign"`
	Center uint64 `c:"center"`
	Off    uint64 `c:"off"`
	Dims   uint64 `c:"dims"`
	Scale  uint64 `c:"scale"`
	Out    uint64 `c:"out"`
}
