package hugepage

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// huge is the huge page's size (x86-64 and arm64 with 4 KB pages).
const huge = 2 << 20

// collapseChunk is how much one MADV_COLLAPSE call asks for: the call copies the small pages
// into huge ones, 22-190 ms for this much on the 2-core development VM (12 calls on touched
// memory, mostly 150-190), the keeper's goroutine holding an OS thread meanwhile: a heap of
// tens of gigabytes is collapsed over minutes of one core, in the background.
const collapseChunk = 64 << 20

// collapseTries is how many passes ask for a chunk's collapse before it is left to the faults.
const collapseTries = 3

// thpEnabled is the kernel's transparent huge page setting. A pass asks nothing where it is
// never (the host refuses huge pages; MADV_COLLAPSE, which ignores the setting, would give them
// anyway: Documentation/admin-guide/mm/transhuge.rst) or absent (a kernel without them).
var thpEnabled = "/sys/kernel/mm/transparent_hugepage/enabled"

// procMaps is the process's mappings, where a pass finds the heap.
var procMaps = "/proc/self/maps"

// heapState is what the keeper's passes have done: the chunks asked to collapse (by
// collapseChunk), and the figures.
type heapState struct {
	mu        sync.Mutex        // one pass at a time
	collapsed map[uintptr]uint8 // tries, collapseTries once done
	// figures is the last pass's, under their own lock: read (a nested Keep) without
	// waiting for a pass's collapses.
	figures struct {
		sync.Mutex
		Stats
	}
}

func (h *heapState) stats() Stats {
	h.figures.Lock()
	defer h.figures.Unlock()
	return h.figures.Stats
}

// set records a pass's figures: the bytes advised, the bytes newly asked to collapse, the error.
func (h *heapState) set(advised, collapsing int64, err error) {
	h.figures.Lock()
	defer h.figures.Unlock()
	h.figures.Advised, h.figures.Err = advised, err
	h.figures.Collapsing += collapsing
}

// pass advises every heap mapping (idempotent: a mapping advised before costs a system call)
// and, with collapse, collapses the chunks not collapsed yet, until stop is closed (a nil stop:
// all of them). A collapse copies (collapseChunk), so Keep's own pass asks none: a stage opened
// on keys restored from a snapshot would otherwise wait minutes for them, and so would a release
// waiting for the keeper to stop.
func (h *heapState) pass(stop <-chan struct{}, collapse bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if enabled, err := os.ReadFile(thpEnabled); err != nil || bytes.Contains(enabled, []byte("[never]")) {
		h.set(0, 0, nil)
		return
	}
	maps, err := os.ReadFile(procMaps)
	if err != nil {
		h.set(h.stats().Advised, 0, fmt.Errorf("hugepage: %w", err))
		return
	}
	if h.collapsed == nil {
		h.collapsed = map[uintptr]uint8{}
	}
	var advised, collapsing int64
	for _, r := range heapRanges(maps) {
		lo, hi := (r[0]+huge-1)&^(huge-1), r[1]&^(huge-1)
		if lo >= hi {
			continue
		}
		if e := madvise(lo, hi-lo, unix.MADV_HUGEPAGE); e != nil {
			err = fmt.Errorf("hugepage: MADV_HUGEPAGE [%#x, %#x): %w", lo, hi, e)
			continue
		}
		advised += int64(hi - lo)
		for c := lo &^ (collapseChunk - 1); collapse && c < hi; c += collapseChunk {
			if h.collapsed[c] >= collapseTries {
				continue
			}
			select {
			case <-stop:
				collapse = false // the rest advised only; the next keeper collapses it
				continue
			default:
			}
			a, b := max(c, lo), min(c+collapseChunk, hi)
			// (A chunk is collapsed once: the heap grows by whole arenas, and the rest of a chunk
			// met part mapped is advised before its pages are touched. An error is asked again at
			// the next passes, up to collapseTries: EAGAIN or ENOMEM, no huge page free now;
			// EINVAL, a kernel before 6.1, or the mappings changed under the call as the runtime
			// mapped its next arena; either may come with most of the range made huge.)
			if h.collapsed[c] == 0 {
				collapsing += int64(b - a)
			}
			if madvise(a, b-a, unix.MADV_COLLAPSE) == nil {
				h.collapsed[c] = collapseTries
			} else {
				h.collapsed[c]++
			}
		}
	}
	h.set(advised, collapsing, err)
}

// heapRanges are the heap's mappings in /proc/self/maps: the private read-write anonymous ones
// (unnamed, or named "[anon: Go: heap]" by the runtime where the kernel names mappings) of at
// least minHeapMapping. The Go heap grows by 64 MB arenas, which adjacent merge into one
// mapping; the runtime's address hints are not kept everywhere (a virtual machine's kernel may
// place the heap elsewhere), so the size, not the address, tells. Thread stacks (8 MB) and the
// runtime's small mappings are below it; C's large allocations (a driver's) are advised too: a
// hint there as well.
func heapRanges(maps []byte) [][2]uintptr {
	var out [][2]uintptr
	sc := bufio.NewScanner(bytes.NewReader(maps))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) < 5 || string(f[1]) != "rw-p" || string(f[4]) != "0" {
			continue
		}
		name := ""
		if len(f) > 5 {
			name = string(bytes.Join(f[5:], []byte(" ")))
		}
		lo, hi, ok := bytes.Cut(f[0], []byte("-"))
		if !ok {
			continue
		}
		a, err1 := strconv.ParseUint(string(lo), 16, 64)
		b, err2 := strconv.ParseUint(string(hi), 16, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		if name != "" && name != "[anon: Go: heap]" || b-a < minHeapMapping {
			continue
		}
		out = append(out, [2]uintptr{uintptr(a), uintptr(b)})
	}
	return out
}

// minHeapMapping is the smallest mapping advised: the Go runtime's heap arena (runtime/malloc.go).
const minHeapMapping = 64 << 20

func madvise(addr, n uintptr, advice int) error {
	_, _, e := unix.Syscall(unix.SYS_MADVISE, addr, n, uintptr(advice))
	if e != 0 {
		return e
	}
	return nil
}
