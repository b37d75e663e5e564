package gpukern

import (
	"embed"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// abiCase is one kernel parameter struct: the C struct of a .cu file and its Go mirror.
type abiCase struct {
	cu, cStruct string
	goType      reflect.Type
}

// kernelSources are the sources the layout tests read, embedded so that the test binary checks
// them wherever it runs (gpucheck.sh runs it from the repository root on the GPU machine).
//
//go:embed density.cu density.ptx hypercube.cu hypercube.ptx knn.cu knn.ptx knnsplit.cu knnsplit.ptx microcluster.cu microcluster.ptx
//go:embed solvingset.cu solvingset.ptx proclus.cu proclus.ptx keyed.cu keyed.ptx
var kernelSources embed.FS

var (
	sizeAssert   = regexp.MustCompile(`static_assert\(sizeof\((\w+)\) == (\d+),`)
	offsetAssert = regexp.MustCompile(`static_assert\(offsetof\((\w+), (\w+)\) == (\d+),`)
)

// checkABI holds the Go mirror of each C struct to the .cu's static_asserts (which nvcc checks
// against the C layout when the PTX is built): the same size, every C member asserted, each at
// the offset of the Go field tagged with its name, and no Go field left unasserted.
func checkABI(t *testing.T, cases []abiCase) {
	t.Helper()
	for _, c := range cases {
		src, err := kernelSources.ReadFile(c.cu)
		if err != nil {
			t.Fatal(err)
		}
		size := -1
		for _, m := range sizeAssert.FindAllStringSubmatch(string(src), -1) {
			if m[1] == c.cStruct {
				size, _ = strconv.Atoi(m[2])
			}
		}
		if size < 0 {
			t.Fatalf("%s: no static_assert of sizeof(%s)", c.cu, c.cStruct)
		}
		if got := int(c.goType.Size()); got != size {
			t.Errorf("%s: sizeof(%s) = %d, Go %s is %d bytes", c.cu, c.cStruct, size, c.goType, got)
		}
		offsets := map[string]int{}
		for _, m := range offsetAssert.FindAllStringSubmatch(string(src), -1) {
			if m[1] == c.cStruct {
				offsets[m[2]], _ = strconv.Atoi(m[3])
			}
		}
		for i := range c.goType.NumField() {
			f := c.goType.Field(i)
			name := f.Tag.Get("c")
			off, ok := offsets[name]
			if !ok {
				t.Errorf("%s: Go field %s.%s (c:%q) has no static_assert of its offset in %s", c.cu, c.goType, f.Name, name, c.cStruct)
				continue
			}
			delete(offsets, name)
			if int(f.Offset) != off {
				t.Errorf("%s: %s.%s is at offset %d, Go %s.%s at %d", c.cu, c.cStruct, name, off, c.goType, f.Name, f.Offset)
			}
			if f.Type.Size() != 8 && f.Type.Kind() != reflect.Struct {
				t.Errorf("Go %s.%s is %d bytes: only 8-byte members keep the layout free of padding", c.goType, f.Name, f.Type.Size())
			}
		}
		for name := range offsets {
			t.Errorf("%s: %s.%s has no Go field in %s", c.cu, c.cStruct, name, c.goType)
		}
	}
}

// checkPTXParam holds a kernel's by-value parameter in the committed PTX to the Go struct's size,
// so a .cu edited without `make ptx` (or a stale PTX) fails here too.
func checkPTXParam(t *testing.T, ptx, kernel string, goType reflect.Type) {
	t.Helper()
	src, err := kernelSources.ReadFile(ptx)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`\.entry ` + kernel + `\(\s*\.param \.align 8 \.b8 ` + kernel + `_param_0\[(\d+)\]\s*\)`)
	m := re.FindSubmatch(src)
	if m == nil {
		t.Fatalf("%s: kernel %s does not take exactly one 8-aligned struct parameter", ptx, kernel)
	}
	if n, _ := strconv.Atoi(string(m[1])); n != int(goType.Size()) {
		t.Errorf("%s: %s takes %d bytes, Go %s is %d", ptx, kernel, n, goType, goType.Size())
	}
}

func TestDensityABI(t *testing.T) {
	checkABI(t, []abiCase{
		{"density.cu", "DensCommon", reflect.TypeFor[densCommon]()},
		{"density.cu", "DensRecordsParams", reflect.TypeFor[densRecordsParams]()},
		{"density.cu", "DensClustersParams", reflect.TypeFor[densClustersParams]()},
	})
	checkPTXParam(t, "density.ptx", "density_records", reflect.TypeFor[densRecordsParams]())
	checkPTXParam(t, "density.ptx", "density_clusters", reflect.TypeFor[densClustersParams]())
}

func TestHypercubeABI(t *testing.T) {
	checkABI(t, []abiCase{
		{"hypercube.cu", "HcEncodeParams", reflect.TypeFor[hcEncodeParams]()},
		{"hypercube.cu", "HcDensityParams", reflect.TypeFor[hcDensityParams]()},
	})
	checkPTXParam(t, "hypercube.ptx", "hc_encode", reflect.TypeFor[hcEncodeParams]())
	checkPTXParam(t, "hypercube.ptx", "hc_density", reflect.TypeFor[hcDensityParams]())
}

func TestKeyedABI(t *testing.T) {
	checkABI(t, []abiCase{
		{"keyed.cu", "KeyedScoreParams", reflect.TypeFor[keyedScoreParams]()},
		{"keyed.cu", "KeyedInstallParams", reflect.TypeFor[keyedInstallParams]()},
		{"keyed.cu", "KeyedSelfParams", reflect.TypeFor[keyedSelfParams]()},
	})
	checkPTXEntries(t, "keyed.ptx", map[string]reflect.Type{
		"keyed_score_*": reflect.TypeFor[keyedScoreParams](),
		"keyed_install": reflect.TypeFor[keyedInstallParams](),
		"keyed_self_*":  reflect.TypeFor[keyedSelfParams](),
	})
	src, err := kernelSources.ReadFile("keyed.cu")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int{"KEYED_MAXD": KeyedMaxDims, "KEYED_BLOCK": keyedBlock} {
		m := regexp.MustCompile(`#define ` + name + ` (\d+)`).FindSubmatch(src)
		if m == nil || string(m[1]) != strconv.Itoa(want) {
			t.Errorf("keyed.cu: %s is %q, Go's mirror %d", name, m, want)
		}
	}
	// The clamp of the distance space: the kernel's, its CPU twin's and the host fallback's.
	m := regexp.MustCompile(`#define KEYED_LIMIT (\S+)`).FindSubmatch(src)
	if m == nil {
		t.Fatal("keyed.cu: no KEYED_LIMIT")
	}
	if v, err := strconv.ParseFloat(string(m[1]), 64); err != nil || v != KeyedLimit {
		t.Errorf("keyed.cu: KEYED_LIMIT is %q, Go's KeyedLimit %g", m[1], KeyedLimit)
	}
}

// entryName matches a kernel entry of a PTX file.
var entryName = regexp.MustCompile(`\.entry (\w+)\(`)

// checkPTXEntries holds every kernel of a PTX file to its Go mirror (by name, or by prefix for a
// family of instantiations): each entry takes exactly one struct of the mirror's size, and no
// entry is left without a mirror (the positional launch form is gone).
func checkPTXEntries(t *testing.T, ptx string, mirrors map[string]reflect.Type) {
	t.Helper()
	src, err := kernelSources.ReadFile(ptx)
	if err != nil {
		t.Fatal(err)
	}
	entries := entryName.FindAllSubmatch(src, -1)
	if len(entries) == 0 {
		t.Fatalf("%s: no kernel entries", ptx)
	}
	seen := map[string]bool{}
	for _, e := range entries {
		kernel := string(e[1])
		goType, key := mirrors[kernel], kernel
		for prefix, tp := range mirrors {
			if goType == nil && strings.HasSuffix(prefix, "*") && strings.HasPrefix(kernel, strings.TrimSuffix(prefix, "*")) {
				goType, key = tp, prefix
			}
		}
		if goType == nil {
			t.Errorf("%s: kernel %s has no Go parameter struct", ptx, kernel)
			continue
		}
		seen[key] = true
		checkPTXParam(t, ptx, kernel, goType)
	}
	for key := range mirrors {
		if !seen[key] {
			t.Errorf("%s: no kernel %s", ptx, key)
		}
	}
}

func TestKernelABI(t *testing.T) {
	checkABI(t, []abiCase{
		{"knn.cu", "KnnParams", reflect.TypeFor[knnParams]()},
		{"knnsplit.cu", "KnnSplitParams", reflect.TypeFor[knnSplitParams]()},
		{"knnsplit.cu", "KnnMergeParams", reflect.TypeFor[knnMergeParams]()},
		{"microcluster.cu", "McAssignParams", reflect.TypeFor[mcAssignParams]()},
		{"microcluster.cu", "McSortParams", reflect.TypeFor[mcSortParams]()},
		{"microcluster.cu", "McReduceParams", reflect.TypeFor[mcReduceParams]()},
		{"microcluster.cu", "McFinalizeParams", reflect.TypeFor[mcFinalizeParams]()},
		{"solvingset.cu", "SsInitParams", reflect.TypeFor[ssInitParams]()},
		{"solvingset.cu", "SsGatherParams", reflect.TypeFor[ssGatherParams]()},
		{"solvingset.cu", "SsCtocParams", reflect.TypeFor[ssCtocParams]()},
		{"solvingset.cu", "SsDtocParams", reflect.TypeFor[ssDtocParams]()},
		{"solvingset.cu", "SsCandPartParams", reflect.TypeFor[ssCandPartParams]()},
		{"solvingset.cu", "SsCandMergeParams", reflect.TypeFor[ssCandMergeParams]()},
		{"solvingset.cu", "SsSelectParams", reflect.TypeFor[ssSelectParams]()},
		{"solvingset.cu", "SsSelectMergeParams", reflect.TypeFor[ssSelectMergeParams]()},
		{"solvingset.cu", "SsSelectTailParams", reflect.TypeFor[ssSelectTailParams]()},
		{"solvingset.cu", "SsSelectSortParams", reflect.TypeFor[ssSelectSortParams]()},
		{"proclus.cu", "PcLocalityParams", reflect.TypeFor[pcLocalityParams]()},
		{"proclus.cu", "PcAssignParams", reflect.TypeFor[pcAssignParams]()},
		{"proclus.cu", "PcSpreadParams", reflect.TypeFor[pcSpreadParams]()},
	})
	// 18 instantiations (2 queue sizes x 9 dimension variants), one struct.
	checkPTXEntries(t, "knn.ptx", map[string]reflect.Type{"knn_weights_*": reflect.TypeFor[knnParams]()})
	// 16 split instantiations (2 queue sizes x 8 dimension variants) and 2 merges.
	checkPTXEntries(t, "knnsplit.ptx", map[string]reflect.Type{
		"knn_split_*": reflect.TypeFor[knnSplitParams](),
		"knn_merge_*": reflect.TypeFor[knnMergeParams](),
	})
	checkPTXEntries(t, "microcluster.ptx", map[string]reflect.Type{
		"assign_nearest":    reflect.TypeFor[mcAssignParams](),
		"cf_sort":           reflect.TypeFor[mcSortParams](),
		"cf_reduce_chunk_*": reflect.TypeFor[mcReduceParams](),
		"cf_finalize":       reflect.TypeFor[mcFinalizeParams](),
	})
	checkPTXEntries(t, "solvingset.ptx", map[string]reflect.Type{
		"ss_init":         reflect.TypeFor[ssInitParams](),
		"ss_gather":       reflect.TypeFor[ssGatherParams](),
		"ss_ctoc":         reflect.TypeFor[ssCtocParams](),
		"ss_dtoc":         reflect.TypeFor[ssDtocParams](),
		"ss_candpart_*":   reflect.TypeFor[ssCandPartParams](),
		"ss_candmerge_*":  reflect.TypeFor[ssCandMergeParams](),
		"ss_select":       reflect.TypeFor[ssSelectParams](),
		"ss_select_merge": reflect.TypeFor[ssSelectMergeParams](),
		"ss_select_tail":  reflect.TypeFor[ssSelectTailParams](),
		"ss_select_sort":  reflect.TypeFor[ssSelectSortParams](),
	})
	checkPTXEntries(t, "proclus.ptx", map[string]reflect.Type{
		"proclus_locality": reflect.TypeFor[pcLocalityParams](),
		"proclus_assign":   reflect.TypeFor[pcAssignParams](),
		"proclus_spread":   reflect.TypeFor[pcSpreadParams](),
	})
}

// TestCandPartThreads holds ss_candpart's block sizes to their Go mirrors: the #defines of
// solvingset.cu and the launch bounds the committed PTX carries (a launch with another count
// than the kernel strides by would skip entries, and only the GPU parity tests would notice);
// and ss_gather's warps a block (a grid for another count would leave candidates out) and the
// selection's slice (TestSelectPlan's sizes).
func TestCandPartThreads(t *testing.T) {
	src, err := kernelSources.ReadFile("solvingset.cu")
	if err != nil {
		t.Fatal(err)
	}
	ptx, err := kernelSources.ReadFile("solvingset.ptx")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		define, entry string
		want          int
	}{{"CANDNN_THREADS_Q64", "ss_candpart_q64", ssCandThreadsQ64}, {"CANDNN_THREADS_Q256", "ss_candpart_q256", ssCandThreadsQ256}, {"SS_GATHER_WARPS", "", ssGatherWarps}, {"SEL_SLICE", "", ssSelectSlice}} {
		m := regexp.MustCompile(`#define ` + c.define + ` (\d+)`).FindSubmatch(src)
		if m == nil || string(m[1]) != strconv.Itoa(c.want) {
			t.Errorf("solvingset.cu: %s is %q, Go's mirror %d", c.define, m, c.want)
		}
		if c.entry == "" { // (a count of warps or pairs, not a launch bound)
			continue
		}
		m = regexp.MustCompile(`\.entry ` + c.entry + `\([^)]*\)\s*\.maxntid (\d+), 1, 1`).FindSubmatch(ptx)
		if m == nil || string(m[1]) != strconv.Itoa(c.want) {
			t.Errorf("solvingset.ptx: %s's .maxntid is %q, Go's mirror %d", c.entry, m, c.want)
		}
	}
}
