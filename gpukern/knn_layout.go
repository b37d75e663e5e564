package gpukern

// The launch layout of knn.cu's kernels, mirrored here for the host (knn_cuda.go) and held to
// the .cu's definitions by TestKNNLayout (outside the cuda build too).

// knnBlock is the number of threads per block of knn_weights_*; knnQueriesPerWarp is KNN_QPW
// (queries per warp), so a block shares each shared-memory tile of S among
// knnBlock/32*knnQueriesPerWarp queries.
const (
	knnBlock          = 512
	knnQueriesPerWarp = 2
)

// knnTileMax is the most points of a compile-time-dimension tile, within knnTileBytes of shared
// memory (KNN_TILE); knnList is KNN_LIST, the candidate list entries (2 bytes each) of each query
// of the 64-slot kernels, after the tile. 80 KiB + 16 KiB per block is past the 48 KiB a kernel
// may use without asking (allowShared), and leaves room for two blocks per SM.
const knnTileMax, knnTileBytes, knnList = 2048, 80 * 1024, 256
