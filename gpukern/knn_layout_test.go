package gpukern

import (
	"fmt"
	"strings"
	"testing"
)

// TestKNNLayout holds the host's mirror of knn.cu's launch layout to the source: a block given
// a smaller shared-memory size than the kernel's lists need traps, and a different tile or
// queries per warp would misplace them.
func TestKNNLayout(t *testing.T) {
	src, err := kernelSources.ReadFile("knn.cu")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		fmt.Sprintf("#define KNN_QPW %d\n", knnQueriesPerWarp),
		fmt.Sprintf("#define KNN_LIST %d\n", knnList),
		fmt.Sprintf("#define KNN_TILE(D) ((%[1]d / (D)) / 32 * 32 < %[2]d ? (%[1]d / (D)) / 32 * 32 : %[2]d)\n",
			knnTileBytes/4, knnTileMax),
		fmt.Sprintf("__launch_bounds__(%d)", knnBlock),
	} {
		if !strings.Contains(string(src), want) {
			t.Errorf("knn.cu lacks %q (the host's layout, knn_layout.go)", want)
		}
	}
}
