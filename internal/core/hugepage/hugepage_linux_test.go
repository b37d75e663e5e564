package hugepage

import (
	"bufio"
	"bytes"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// TestHeapRanges: the heap's mappings are the private read-write anonymous ones of at least an
// arena (64 MB), unnamed or named the Go heap; nothing else (files, stacks, brk's heap, smaller
// anonymous mappings, reservations).
func TestHeapRanges(t *testing.T) {
	maps := []byte(`00400000-00c00000 r-xp 00000000 08:01 123 /usr/bin/outlierd
c000000000-c004000000 rw-p 00000000 00:00 0 
c004000000-c008000000 rw-p 00000000 00:00 0                      [anon: Go: heap]
c008000000-c00c000000 ---p 00000000 00:00 0 
7f0000000000-7f0000400000 rw-p 00000000 00:00 0 
2b7b3c400000-2b7b40800000 rw-p 00000000 00:00 0 
7f0000400000-7f0008400000 rw-p 00000000 00:00 0                  [anon: Go: heap]
7ffc00000000-7ffc08021000 rw-p 00000000 00:00 0                  [stack]
01a00000-09c00000 rw-p 00000000 00:00 0                          [heap]
c00c000000-c010000000 rw-p 00000000 08:01 99 /tmp/mapped
`)
	want := [][2]uintptr{{0xc000000000, 0xc004000000}, {0xc004000000, 0xc008000000}, {0x2b7b3c400000, 0x2b7b40800000}, {0x7f0000400000, 0x7f0008400000}}
	if got := heapRanges(maps); !reflect.DeepEqual(got, want) {
		t.Fatalf("heap ranges %x, want %x", got, want)
	}
}

// TestAdviseBacksTheHeapWithHugePages: 64 MB of the heap, touched (small pages where the
// kernel's setting is madvise), is backed by huge pages after one pass; skipped where the
// kernel gives none to an advised mapping (THP never) or cannot collapse (before Linux 6.1).
func TestAdviseBacksTheHeapWithHugePages(t *testing.T) {
	enabled, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || bytes.Contains(enabled, []byte("[never]")) {
		t.Skipf("no transparent huge pages here (%q, %v)", enabled, err)
	}
	buf := make([]byte, 64<<20)
	for i := 0; i < len(buf); i += 4096 {
		buf[i] = 1
	}
	addr := uintptr(unsafe.Pointer(&buf[0]))
	before := anonHuge(t, addr)
	st := Advise()
	if st.Unsupported {
		t.Skipf("the kernel collapses no pages (%+v)", st)
	}
	after := anonHuge(t, addr)
	t.Logf("%+v; the mapping's huge pages: %d kB before, %d kB after", st, before, after)
	if st.Err != nil || st.Advised < int64(len(buf)) {
		t.Fatalf("%+v: the 64 MB buffer not advised", st)
	}
	// (At least half the buffer: the mapping's other pages may have been huge before, and a
	// 2 MB range that no huge page was free for stays small; 32 MB is far above any chance.)
	if after < before+32<<10 {
		t.Fatalf("the buffer's mapping has %d kB of huge pages after the pass, %d before: want 32 MB more", after, before)
	}
	runtimeKeepAlive(buf)
}

// anonHuge is the AnonHugePages (kB) of the mapping holding addr (/proc/self/smaps).
func anonHuge(t *testing.T, addr uintptr) int {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	in := false
	for sc.Scan() {
		line := sc.Text()
		if lo, hi, ok := strings.Cut(strings.Fields(line + " ")[0], "-"); ok && !strings.HasSuffix(line, ":") {
			a, err1 := strconv.ParseUint(lo, 16, 64)
			b, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 == nil && err2 == nil {
				in = uintptr(a) <= addr && addr < uintptr(b)
				continue
			}
		}
		if in && strings.HasPrefix(line, "AnonHugePages:") {
			kb, _ := strconv.Atoi(strings.Fields(line)[1])
			return kb
		}
	}
	t.Fatalf("no mapping holds %#x", addr)
	return 0
}

//go:noinline
func runtimeKeepAlive(b []byte) { _ = b[0] }
