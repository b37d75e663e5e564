package detect

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/outlierd/outlierd/internal/core/sealed"
)

// TestWindowNotSavedAgainUnchanged: a stop that finds the window as state_dir's newest window
// file holds it (a stop right after a start that read no record) writes no window file, and
// says so; a stop after a single new record writes one, which the next start loads; a start
// that changed what it loaded (detect.window shrunk: the oldest records dropped) writes at its
// stop. Failed before the digest: every stop wrote the window again (3 files after the first
// stop of nothing, want 2).
func TestWindowNotSavedAgainUnchanged(t *testing.T) {
	mem, d, cfg := restartSetup(t, 2000)
	a := stopAfter(t, cfg, mem, d, 1500, 250)
	saved := windowFiles(t, a) // (the first model's install and the stop)
	b, logs := loggedStage(t, cfg)
	b.Close()
	if got := windowFiles(t, b); !slices.Equal(got, saved) {
		t.Errorf("window files %v after a stop that read no record, want %v (none written)", got, saved)
	}
	if !strings.Contains(logs.String(), "window unchanged since the newest file") || !strings.Contains(logs.String(), saved[0]) {
		t.Errorf("log %q: want the save said skipped, the file named", logs.String())
	}

	c, logs := loggedStage(t, cfg)
	feed(t, c, mem, d, 1500, 1501, 1)
	c.Close()
	got := windowFiles(t, c)
	if len(got) != len(saved)+1 || got[1] != saved[0] {
		t.Fatalf("window files %v after a stop that read one record, want one more than %v", got, saved)
	}
	if strings.Contains(logs.String(), "window unchanged") {
		t.Errorf("log %q: a changed window said unchanged", logs.String())
	}
	e := newTestStage(t, cfg)
	if e.win.Len() != 1501 || newestOffset(e) != 1500 {
		t.Errorf("the start after it: %d records, want 1,501 (to offset 1,500)", e.win.Len())
	}
	e.Close() // (unchanged: writes nothing)
	if after := windowFiles(t, e); !slices.Equal(after, got) {
		t.Errorf("window files %v after a second stop that read no record, want %v", after, got)
	}

	shrunk := cfg
	shrunk.Window = 1200
	shrunk.BeforeModel = BeforeModelPass // (the model snapshot, of another window, does not load: under hold the stop would save no window)
	f, _ := loggedStage(t, shrunk)
	if f.win.Len() != 1200 {
		t.Fatalf("setup: %d records restored under a window of 1,200", f.win.Len())
	}
	f.Close()
	if after := windowFiles(t, f); after[0] == got[0] {
		t.Errorf("window files %v after a stop whose start shrank the window, want a new one before %v", after, got)
	}
}

// TestWindowSaveHoldsNoEncoding: a window's save (the periodic one, on its goroutine, given the
// copy) allocates pieces of the encoding, not the payload: the bytes it allocates, which bound
// what it holds beside the copy, stay under an eighth of the file (at 200,000 records of 8
// features with uncertainties, a file of 15.4 MB). The bound: the save's buffers are of fixed
// sizes (sealed.WriteStream's 256 KiB, an encoder's piece of 128 KiB for the digest and another
// for the file, two pieces of marks), 0.57 MB whatever the window, under a third of the bound;
// the payload alone is eight times the bound. Failed before the streamed write: 82 MB allocated
// (the payload appended into a growing buffer, about five times its size), held with the copy.
func TestWindowSaveHoldsNoEncoding(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates: allocations are counted without it")
	}
	s, dir := fullWindowStage(t, 200_000, 8, true)
	defer os.RemoveAll(dir)
	defer s.Close()
	defer s.PassedOnDropped() // (its Close saves nothing)
	w := s.windowCopy()
	file := w.payloadLen() + sealed.HeaderSize + sealed.SumSize
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s.writeWindow(context.Background(), s.ext.snaps, w, false)
	runtime.ReadMemStats(&after)
	files := windowFiles(t, s)
	if len(files) != 1 {
		t.Fatalf("%d window files after the save, want 1", len(files))
	}
	if st, err := os.Stat(files[0]); err != nil || uint64(st.Size()) != file {
		t.Fatalf("the window file: %v, %v; want %d bytes", st, err, file)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("the save of a file of %d bytes allocated %d", file, alloc)
	if alloc > file/8 {
		t.Errorf("the save allocated %d bytes for a file of %d, want at most an eighth (%d)", alloc, file, file/8)
	}
}

// TestWindowPayloadRawIsEncoded: the payload copied from memory (a little-endian host's) is the
// payload encoded value by value, byte for byte (with uncertainty columns and event times, a
// window of more than one piece); it is this host's way only when the host is little-endian.
func TestWindowPayloadRawIsEncoded(t *testing.T) {
	s, dir := fullWindowStage(t, 3*winPiece+5, 3, true)
	defer os.RemoveAll(dir)
	defer s.Close()
	defer s.PassedOnDropped() // (its Close saves nothing)
	w := s.windowCopy()
	w.times = make([]int64, w.held())
	for i := range w.times {
		w.times[i] = int64(i)*1000 - 7
	}
	w.cols[1][3] = float32(math.NaN())
	var raw, enc bytes.Buffer
	if err := writeWindowPieces(context.Background(), &raw, w, true); err != nil {
		t.Fatal(err)
	}
	if err := writeWindowPieces(context.Background(), &enc, w, false); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(raw.Bytes(), enc.Bytes()) || uint64(enc.Len()) != w.payloadLen() {
		t.Errorf("payload copied from memory (%d bytes) differs from the one encoded (%d bytes, want %d)", raw.Len(), enc.Len(), w.payloadLen())
	}
	if got, err := decodeWindow(enc.Bytes()); err != nil || !slices.Equal(got.times, w.times) || !slices.Equal(got.offs, w.offs) {
		t.Errorf("the encoded payload decodes to %v, %v", got, err)
	}
	if want := binary.LittleEndian.Uint16([]byte{1, 0}) == binary.NativeEndian.Uint16([]byte{1, 0}); leHost != want {
		t.Errorf("leHost %v on a host whose native order is little-endian: %v", leHost, want)
	}
}
