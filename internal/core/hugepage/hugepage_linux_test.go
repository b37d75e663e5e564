package hugepage

import (
	"bufio"
	"bytes"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
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

// TestAdviseMarksTheHeap: after a pass, the mapping holding 64 MB of touched heap is marked for
// huge pages (VmFlags "hg": its faults take them, and khugepaged may make its small pages huge).
// Whether the kernel backs it with huge pages at once (MADV_COLLAPSE) depends on the huge pages
// free on the host: logged, not asserted (on the development machine 4 MB to all 64 MB of it, run
// to run).
func TestAdviseMarksTheHeap(t *testing.T) {
	enabled, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || bytes.Contains(enabled, []byte("[never]")) {
		t.Skipf("no transparent huge pages here (%q, %v)", enabled, err)
	}
	buf := make([]byte, 64<<20)
	for i := 0; i < len(buf); i += 4096 {
		buf[i] = 1
	}
	addr := uintptr(unsafe.Pointer(&buf[0]))
	flags, before := mapping(t, addr)
	if slices.Contains(flags, "nh") {
		t.Skipf("the mapping is marked never to take huge pages (%v)", flags)
	}
	st := advise()
	flags, after := mapping(t, addr)
	t.Logf("%+v; the mapping's huge pages: %d kB before, %d kB after; flags %v", st, before, after, flags)
	if st.Err != nil || st.Advised < int64(len(buf)) || !slices.Contains(flags, "hg") {
		t.Fatalf("%+v, flags %v: the buffer's mapping is not marked for huge pages", st, flags)
	}
	runtimeKeepAlive(buf)
}

// mapping is the VmFlags and AnonHugePages (kB) of the mapping holding addr (/proc/self/smaps).
func mapping(t *testing.T, addr uintptr) (flags []string, hugeKB int) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	in, found := false, false
	for sc.Scan() {
		line := sc.Text()
		if lo, hi, ok := strings.Cut(strings.Fields(line + " ")[0], "-"); ok && !strings.HasSuffix(strings.Fields(line + " ")[0], ":") {
			a, err1 := strconv.ParseUint(lo, 16, 64)
			b, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 == nil && err2 == nil {
				in = uintptr(a) <= addr && addr < uintptr(b)
				found = found || in
				continue
			}
		}
		switch {
		case in && strings.HasPrefix(line, "AnonHugePages:"):
			hugeKB, _ = strconv.Atoi(strings.Fields(line)[1])
		case in && strings.HasPrefix(line, "VmFlags:"):
			flags = strings.Fields(line)[1:]
		}
	}
	if !found {
		t.Fatalf("no mapping holds %#x", addr)
	}
	return flags, hugeKB
}

//go:noinline
func runtimeKeepAlive(b []byte) { _ = b[0] }

// TestPassHonoursNever: where the host's setting is never (or the kernel has no transparent huge
// pages: no setting to read), a pass asks nothing. MADV_COLLAPSE ignores the sysfs settings
// (Documentation/admin-guide/mm/transhuge.rst), so a pass that asked it there would give the heap
// the huge pages the host refused.
func TestPassHonoursNever(t *testing.T) {
	dir := t.TempDir()
	never := dir + "/enabled"
	if err := os.WriteFile(never, []byte("always madvise [never]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<20)
	for i := 0; i < len(buf); i += 4096 {
		buf[i] = 1
	}
	defer func(p string) { thpEnabled = p }(thpEnabled)
	for _, path := range []string{never, dir + "/absent"} {
		thpEnabled = path
		before := current()
		st := advise()
		if st.Advised != 0 || st.Collapsing != before.Collapsing || st.Err != nil {
			t.Errorf("setting %s: %+v after %+v: a pass asked for huge pages the host does not give", path, st, before)
		}
	}
	runtimeKeepAlive(buf)
}

// TestKeepSaysTheFirstPass: Keep returns the figures of a pass made before it returns, so that
// its caller can say at once that the advice failed (here the process's mappings unreadable).
func TestKeepSaysTheFirstPass(t *testing.T) {
	gone(t)
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/enabled", []byte("always [madvise] never\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	defer func(e, m string) { thpEnabled, procMaps = e, m }(thpEnabled, procMaps)
	thpEnabled, procMaps = dir+"/enabled", dir+"/maps"
	release, first := Keep()
	defer release()
	if first.Err == nil || !strings.Contains(first.Err.Error(), dir+"/maps") {
		t.Fatalf("Keep's first pass %+v: want the unreadable mappings' error", first)
	}
}

// TestKeepCollapsesNothingItself: Keep's own pass marks the heap and returns; the collapses (a
// copy of each 64 MB chunk) are the keeper's, so that a stage opened on gigabytes of keys
// restored from a snapshot does not wait for them.
func TestKeepCollapsesNothingItself(t *testing.T) {
	gone(t)
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/enabled", []byte("always [madvise] never\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	defer func(e string) { thpEnabled = e }(thpEnabled)
	thpEnabled = dir + "/enabled"
	buf := make([]byte, 128<<20) // new to the keeper's passes: its chunks not asked yet
	for i := 0; i < len(buf); i += 4096 {
		buf[i] = 1
	}
	before := current()
	release, first := Keep()
	defer release()
	if first.Err != nil || first.Advised < int64(len(buf)) || first.Collapsing != before.Collapsing {
		t.Fatalf("Keep's pass %+v after %+v: want the heap marked and no collapse asked", first, before)
	}
	runtimeKeepAlive(buf)
}

// TestKeepDoesNotWaitForAPass: a Keep that finds the keeper running, and the figures, return while a
// pass runs (its collapses can take minutes of a heap restored from a snapshot): they read the
// figures so far.
func TestKeepDoesNotWaitForAPass(t *testing.T) {
	gone(t)
	a, _ := Keep()
	defer a()
	keeper.state.mu.Lock() // a pass running
	returned := make(chan func())
	go func() {
		current()
		b, _ := Keep()
		returned <- b
	}()
	select {
	case b := <-returned:
		keeper.state.mu.Unlock()
		b()
	case <-time.After(2 * time.Second):
		keeper.state.mu.Unlock()
		(<-returned)()
		t.Fatal("the figures or a nested Keep waited for the running pass")
	}
}
