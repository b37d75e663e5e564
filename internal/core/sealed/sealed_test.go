package sealed

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"strings"
	"testing"
)

var testFormat = Format{Magic: "\x89TEST\r\n\x1a", Name: "outlierd test file", Newest: 2, MaxPayload: 1 << 20}

func seal(t testing.TB, version uint32, payload []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := testFormat.Write(&b, version, payload); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		version uint32
		payload []byte
	}{{1, []byte("hello")}, {2, nil}, {2, bytes.Repeat([]byte{0xAB}, 5000)}} {
		file := seal(t, c.version, c.payload)
		if len(file) != HeaderSize+len(c.payload)+SumSize {
			t.Errorf("file of %d bytes, want %d", len(file), HeaderSize+len(c.payload)+SumSize)
		}
		// The layout is the documented one: magic, version, length, payload, SHA-256.
		if string(file[:MagicSize]) != testFormat.Magic || binary.LittleEndian.Uint32(file[8:]) != c.version ||
			binary.LittleEndian.Uint64(file[12:]) != uint64(len(c.payload)) {
			t.Errorf("header %x does not follow the layout", file[:HeaderSize])
		}
		if sum := sha256.Sum256(file[:len(file)-SumSize]); !bytes.Equal(sum[:], file[len(file)-SumSize:]) {
			t.Error("trailer is not the SHA-256 of what precedes it")
		}
		v, p, err := testFormat.Read(bytes.NewReader(file))
		if err != nil || v != c.version || !bytes.Equal(p, c.payload) {
			t.Errorf("read back version %d, %d bytes, %v; want %d, %d bytes", v, len(p), err, c.version, len(c.payload))
		}
	}
}

// cancelling is a writer that ends its context at its first write.
type cancelling struct {
	cancel context.CancelFunc
	n      int
}

func (c *cancelling) Write(p []byte) (int, error) {
	c.cancel()
	c.n += len(p)
	return len(p), nil
}

// TestWriteContextEndsWithTheContext: a context that ends during WriteContext ends the write
// before the payload's end, with the context's error (a stop's deadline at a gigabyte's save).
func TestWriteContextEndsWithTheContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	w := &cancelling{cancel: cancel}
	payload := make([]byte, 3*sumPiece)
	if err := testFormat.WriteContext(ctx, w, 1, payload); !errors.Is(err, context.Canceled) {
		t.Fatalf("WriteContext cancelled at its first write: %v, want context.Canceled", err)
	}
	if w.n >= sumPiece {
		t.Errorf("%d bytes written after the cancel, want less than a piece (%d)", w.n, sumPiece)
	}
	if err := testFormat.WriteContext(ctx, &bytes.Buffer{}, 1, payload); !errors.Is(err, context.Canceled) {
		t.Errorf("WriteContext with a context ended: %v, want context.Canceled", err)
	}
}

// TestWriteStream: a payload written in pieces (WriteStream) makes the file Write makes of it
// whole; a payload of another length than its header's, or one that fails, is an error; a
// context that ends during the payload ends the write with its error.
func TestWriteStream(t *testing.T) {
	t.Parallel()
	payload := bytes.Repeat([]byte("0123456789abcdef"), 70_000) // (1.1 MB: more than WriteStream's buffer)
	pieces := func(p []byte) func(w io.Writer) error {
		return func(w io.Writer) error {
			for len(p) > 0 {
				k := min(len(p), 7777)
				if _, err := w.Write(p[:k]); err != nil {
					return err
				}
				p = p[k:]
			}
			return nil
		}
	}
	var got bytes.Buffer
	if err := testFormat.WriteStream(context.Background(), &got, 2, uint64(len(payload)), pieces(payload)); err != nil {
		t.Fatal(err)
	}
	if want := seal(t, 2, payload); !bytes.Equal(got.Bytes(), want) {
		t.Errorf("streamed file of %d bytes differs from Write's %d", got.Len(), len(want))
	}
	if err := testFormat.WriteStream(context.Background(), io.Discard, 2, uint64(len(payload))+1, pieces(payload)); err == nil ||
		!strings.Contains(err.Error(), "header of") {
		t.Errorf("a payload one byte short of its header: %v, want an error", err)
	}
	bad := errors.New("encoder failed")
	if err := testFormat.WriteStream(context.Background(), io.Discard, 2, 5, func(io.Writer) error { return bad }); !errors.Is(err, bad) {
		t.Errorf("a failing payload: %v, want its error", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &cancelling{cancel: cancel}
	if err := testFormat.WriteStream(ctx, w, 2, uint64(len(payload)), pieces(payload)); !errors.Is(err, context.Canceled) {
		t.Errorf("WriteStream cancelled at its first write: %v, want context.Canceled", err)
	}
	if w.n > streamBuffer {
		t.Errorf("%d bytes written after the cancel, want one buffer at most (%d)", w.n, streamBuffer)
	}
}

func TestReadRefuses(t *testing.T) {
	t.Parallel()
	good := seal(t, 1, []byte("some payload bytes"))
	mut := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "truncated: 0 of 20 header bytes"},
		{"truncated header", good[:10], "truncated: 10 of 20 header bytes"},
		{"truncated body", good[:len(good)-1], "truncated: 49 of 50 bytes after the header"},
		{"wrong magic", mut(func(b []byte) []byte { b[1] = 'X'; return b }), "wrong magic \"\\x89XEST\\r\\n\\x1a\": not an outlierd test file"},
		{"version 0", mut(func(b []byte) []byte { b[8] = 0; return b }), "format version 0 is invalid"},
		{"newer version", mut(func(b []byte) []byte { b[8] = 3; return b }), "format version 3 is newer than the newest this build reads (2)"},
		{"oversize", mut(func(b []byte) []byte { binary.LittleEndian.PutUint64(b[12:], math.MaxUint64); return b }), "payload length 18446744073709551615 exceeds the limit 1048576"},
		{"trailing bytes", append(bytes.Clone(good), 0), "trailing bytes after the checksum"},
		{"flipped payload byte", mut(func(b []byte) []byte { b[HeaderSize+3] ^= 1; return b }), "checksum mismatch"},
		{"flipped checksum byte", mut(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), "checksum mismatch"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := testFormat.Read(bytes.NewReader(c.data))
			if !IsFormat(err) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want a FormatError with %q", err, c.want)
			}
		})
	}
}

type failing struct{ err error }

func (f failing) Read([]byte) (int, error)  { return 0, f.err }
func (f failing) Write([]byte) (int, error) { return 0, f.err }

// The reader's and writer's own errors come back as they are, not as a FormatError: a
// caller must tell a bad file from a failing disk.
func TestIOErrorsPassThrough(t *testing.T) {
	t.Parallel()
	boom := errors.New("disk on fire")
	if _, _, err := testFormat.Read(failing{boom}); !errors.Is(err, boom) || IsFormat(err) {
		t.Errorf("read: %v, want the reader's error", err)
	}
	if err := testFormat.Write(failing{boom}, 1, []byte("x")); !errors.Is(err, boom) {
		t.Errorf("write: %v, want the writer's error", err)
	}
	if err := (Format{Magic: "short"}).Write(&bytes.Buffer{}, 1, nil); err == nil {
		t.Error("wrote a file with a 5-byte magic")
	}
}

func TestEncoderDecoder(t *testing.T) {
	t.Parallel()
	var e Encoder
	e.U32(7)
	e.U64(1 << 40)
	e.F64(-2.5)
	e.F32s([]float32{1, float32(math.Inf(-1))})
	e.F64s([]float64{math.Pi})
	e.Text("né")
	e.Raw([]byte{9})
	d := NewDecoder(e.Payload())
	u32, u64 := d.U32("a"), d.U64("b")
	f64 := math.Float64frombits(d.U64("c"))
	f32s, f64s := d.F32s(2, "d"), d.F64s(1, "e")
	s, raw := d.Text(3, "f"), d.Take(1, "g")
	if d.Err() != nil || d.Left() != 0 || d.Offset() != len(e.Payload()) {
		t.Fatalf("err %v, %d left at offset %d of %d", d.Err(), d.Left(), d.Offset(), len(e.Payload()))
	}
	if u32 != 7 || u64 != 1<<40 || f64 != -2.5 || f32s[0] != 1 || !math.IsInf(float64(f32s[1]), -1) ||
		f64s[0] != math.Pi || s != "né" || raw[0] != 9 {
		t.Errorf("read back %v %v %v %v %v %q %v", u32, u64, f64, f32s, f64s, s, raw)
	}
}

func TestDecoderRemembersFirstOverrun(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		read func(d *Decoder)
		want string
	}{
		{"u64 in the last 6 bytes", func(d *Decoder) { d.U32("head"); d.U64("count"); d.U32("later") },
			"payload ends inside count (need 8 bytes at offset 4, 6 left)"},
		{"floats", func(d *Decoder) { d.F32s(3, "points") }, "payload ends inside points (need 12 bytes at offset 0, 10 left)"},
		{"f32 count overflow", func(d *Decoder) { d.F32s(math.MaxUint64/2, "points") }, "points: count 9223372036854775807 too large"},
		{"f64 count overflow", func(d *Decoder) { d.F64s(math.MaxInt64/4, "sums") }, "sums: count 2305843009213693951 too large"},
		{"text too long", func(d *Decoder) { d.Text(5, "feature 0 name") }, "feature 0 name: length 7 exceeds 5"},
		{"text past the end", func(d *Decoder) { d.Text(100, "feature 0 name") },
			"payload ends inside feature 0 name (need 7 bytes at offset 4, 6 left)"},
		{"text not UTF-8", func(d *Decoder) { d.U32("skip"); d.Text(5, "feature 1 name") }, "feature 1 name: not UTF-8"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// A text of length 7 the 10 bytes cannot hold; from offset 4, a text of length 1 that is not UTF-8.
			d := NewDecoder([]byte{7, 0, 0, 0, 1, 0, 0, 0, 0xff, 0})
			c.read(d)
			if !IsFormat(d.Err()) || d.Err().Error() != c.want {
				t.Errorf("err = %v, want %q", d.Err(), c.want)
			}
			if d.U32("after") != 0 || d.Take(0, "after") != nil || d.Err().Error() != c.want {
				t.Errorf("reads after the overrun return data or replace the first error: %v", d.Err())
			}
		})
	}
}

// FuzzRead: Read never panics, and what it accepts seals back to the same bytes.
func FuzzRead(f *testing.F) {
	good := seal(f, 1, []byte("payload"))
	f.Add(good)
	f.Add(good[:HeaderSize])
	f.Add(append(bytes.Clone(good), 1))
	f.Fuzz(func(t *testing.T, data []byte) {
		v, p, err := testFormat.Read(bytes.NewReader(data))
		if err != nil {
			if !IsFormat(err) {
				t.Fatalf("a byte reader gave a non-format error: %v", err)
			}
			return
		}
		if again := seal(t, v, p); !bytes.Equal(again, data) {
			t.Fatalf("accepted %x, which seals back as %x", data, again)
		}
	})
}

func TestWrap(t *testing.T) {
	t.Parallel()
	errBad := errors.New("mypkg: bad file")
	_, _, ferr := testFormat.Read(bytes.NewReader(nil))
	if got := Wrap(ferr, errBad, "mypkg: load"); !errors.Is(got, errBad) || got.Error() != "mypkg: bad file: truncated: 0 of 20 header bytes" {
		t.Errorf("format error wrapped as %q", got)
	}
	boom := errors.New("disk on fire")
	if got := Wrap(boom, errBad, "mypkg: load"); errors.Is(got, errBad) || !errors.Is(got, boom) || got.Error() != "mypkg: load: disk on fire" {
		t.Errorf("reader error wrapped as %q", got)
	}
	if Wrap(nil, errBad, "x") != nil {
		t.Error("Wrap(nil) is not nil")
	}
}
