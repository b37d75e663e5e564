// Package internal_test holds the test that keeps the folders the layers of docs/DESIGN.md
// ("Layers"): every import of a non-test Go file points down, never up or sideways.
package internal_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/outlierd/outlierd/"

// layer is a package's rank: a package may import only packages of a lower rank, or of its own
// rank within one family (sameFamily). Longest prefix wins.
var layers = []struct {
	prefix string
	rank   int
}{
	{"internal/core/", 0}, {"configs", 0},
	{"internal/algo/", 1}, {"internal/datasets/", 1},
	{"gpukern", 1}, // a leaf beside the algorithms: neither imports the other (internal/accel joins them)
	{"internal/accel", 3}, {"stages/microcluster", 3},
	{"stages/", 4},
	{"pipeline/metrics", 5},
	{"pipeline", 6},
	{"cmd/", 7},
	{"internal/testsupport", 8}, // tests only: no non-test package may import it
}

func rankOf(pkg string) (int, bool) {
	best, rank := -1, 0
	for _, l := range layers {
		if (pkg == strings.TrimSuffix(l.prefix, "/") || strings.HasPrefix(pkg, l.prefix)) && len(l.prefix) > best {
			best, rank = len(l.prefix), l.rank
		}
	}
	return rank, best >= 0
}

// sameFamily: the contracts may import each other (kafkasec reads config's secrets), and so may
// the algorithms (density's model is built over micro-clusters).
func sameFamily(a, b string) bool {
	for _, f := range []string{"internal/core/", "internal/algo/"} {
		if strings.HasPrefix(a, f) && strings.HasPrefix(b, f) {
			return true
		}
	}
	return false
}

// TestImportsPointDown parses every non-test Go file of the module (both builds: the cuda-tagged
// files too) and fails on an import that points to a higher layer or a sibling: a stage
// importing another stage or internal/accel (the stage sees the device through its own
// detect.Accelerator interface), an algorithm importing a stage, the contracts importing
// anything above them, any product code importing the test support.
func TestImportsPointDown(t *testing.T) {
	root := ".."
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		pkg := filepath.ToSlash(rel)
		from, ok := rankOf(pkg)
		if !ok {
			t.Errorf("%s: package %s has no layer in layers_test.go: add it (and to docs/DESIGN.md)", path, pkg)
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, im := range f.Imports {
			ip, _ := strconv.Unquote(im.Path.Value)
			if !strings.HasPrefix(ip, module) {
				continue
			}
			dep := strings.TrimPrefix(ip, module)
			checked++
			to, _ := rankOf(dep)
			if to < from || sameFamily(pkg, dep) || pkg == dep {
				continue
			}
			t.Errorf("%s imports %s: layer %d may not import layer %d (docs/DESIGN.md, Layers)", path, dep, from, to)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 50 { // the walk must have seen the module, not an empty directory
		t.Fatalf("only %d module imports checked: is the walk rooted at the module?", checked)
	}
}
