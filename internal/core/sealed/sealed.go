// Package sealed reads and writes the envelope shared by outlierd's binary files (model
// snapshots, solving-set model files): a magic, a format version, a payload length, the
// payload, and a SHA-256 over all that precedes it. It also has the little-endian field
// encoder and the decoder that remembers its first overrun, which the payloads are built with.
//
// The envelope (integers little-endian):
//
//	offset  size  field
//	0       8     magic (a high byte and CR LF in it, as PNG, catch text-mode mangling and
//	              the wrong kind of file at once)
//	8       4     format version (uint32), >= 1
//	12      8     payload length P (uint64)
//	20      P     payload
//	20+P    32    SHA-256 of bytes [0, 20+P)
//
// The file ends there; trailing bytes are refused.
//
// A leaf package: it imports nothing of this repository, so every file format can use it.
package sealed

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"math"
	"slices"
	"unicode/utf8"
)

// MagicSize is the length of a magic; HeaderSize of the header (magic, version, length);
// SumSize of the trailing checksum.
const (
	MagicSize  = 8
	HeaderSize = MagicSize + 4 + 8
	SumSize    = sha256.Size
)

// FormatError is a refusal of the file's content (as opposed to the reader's or writer's
// own error, which Read and Write return as they got it). Its message is the bare reason
// ("checksum mismatch: the file is corrupt"): callers wrap it with their own sentinel,
// fmt.Errorf("%w: %w", ErrMyFormat, err).
type FormatError struct{ Reason string }

func (e *FormatError) Error() string { return e.Reason }

func formatErr(format string, args ...any) error {
	return &FormatError{Reason: fmt.Sprintf(format, args...)}
}

// IsFormat reports whether err is (or wraps) a FormatError.
func IsFormat(err error) bool {
	var fe *FormatError
	return errors.As(err, &fe)
}

// Wrap gives an error of Read or of a Decoder the caller's identity: a FormatError becomes
// "<sentinel>: <reason>", wrapping both (errors.Is(err, sentinel) holds); any other error (the
// reader's own) becomes "<prefix>: <err>". nil stays nil.
func Wrap(err, sentinel error, prefix string) error {
	switch {
	case err == nil:
		return nil
	case IsFormat(err):
		return fmt.Errorf("%w: %w", sentinel, err)
	}
	return fmt.Errorf("%s: %w", prefix, err)
}

// Format describes one kind of sealed file.
type Format struct {
	// Magic is the file's first MagicSize bytes.
	Magic string
	// Name says what the file is, for the wrong-magic message: "not an <Name>".
	Name string
	// Newest is the newest format version this build reads (and the one it writes).
	Newest uint32
	// MaxPayload bounds the payload length a header may claim.
	MaxPayload uint64
}

// Write writes payload sealed as format version version.
func (f Format) Write(w io.Writer, version uint32, payload []byte) error {
	return f.WriteContext(context.Background(), w, version, payload)
}

// WriteContext is Write ending when ctx does, between two pieces of the checksum or two writes
// of sumPiece bytes (a stop's deadline must not wait for a gigabyte's checksum and write); its
// error is then ctx.Err(), and w holds a part of the file only.
func (f Format) WriteContext(ctx context.Context, w io.Writer, version uint32, payload []byte) error {
	head, err := f.header(version, uint64(len(payload)))
	if err != nil {
		return err
	}
	sum := sha256.New()
	sum.Write(head)
	if err := sumPieces(ctx, sum, payload); err != nil {
		return err
	}
	bw := bufio.NewWriter(ctxWriter{ctx, w})
	bw.Write(head)
	bw.Write(payload)
	bw.Write(sum.Sum(nil))
	return bw.Flush()
}

// WriteStream is WriteContext of a payload of length bytes that payload writes, piece by
// piece, to the writer it is given: the file is checksummed and written as it is encoded, and
// the payload is never held whole (a large state's save would otherwise hold it twice: as it
// is and encoded). An error of payload (ctx.Err(), when it ends the payload's pieces) comes
// back as payload returned it; a payload of another length than length (a header that would
// lie: the caller's mistake) is an error. Either way w holds a part of the file only (an
// atomic write removes it).
func (f Format) WriteStream(ctx context.Context, w io.Writer, version uint32, length uint64, payload func(io.Writer) error) error {
	head, err := f.header(version, length)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(ctxWriter{ctx, w}, streamBuffer)
	pw := &summingWriter{w: bw, sum: sha256.New()}
	pw.Write(head) // (bufio's errors stay until Flush, which returns them)
	pw.n = 0
	if err := payload(pw); err != nil {
		return err
	}
	if pw.n != length {
		return fmt.Errorf("sealed: a payload of %d bytes written under a header of %d", pw.n, length)
	}
	bw.Write(pw.sum.Sum(nil))
	return bw.Flush()
}

// header is a sealed file's header: the magic, the format version, the payload's length.
func (f Format) header(version uint32, length uint64) ([]byte, error) {
	if len(f.Magic) != MagicSize {
		return nil, fmt.Errorf("sealed: magic %q is %d bytes, want %d", f.Magic, len(f.Magic), MagicSize)
	}
	head := make([]byte, 0, HeaderSize)
	head = append(head, f.Magic...)
	head = binary.LittleEndian.AppendUint32(head, version)
	return binary.LittleEndian.AppendUint64(head, length), nil
}

// streamBuffer is WriteStream's buffer: the file is written this much at a time.
const streamBuffer = 256 << 10

// summingWriter writes to w, adding what it writes to sum and counting it in n.
type summingWriter struct {
	w   io.Writer
	sum hash.Hash
	n   uint64
}

func (s *summingWriter) Write(p []byte) (int, error) {
	k, err := s.w.Write(p)
	s.sum.Write(p[:k])
	s.n += uint64(k)
	return k, err
}

// Read reads a sealed file to its end and returns its format version and payload. A file
// that is truncated, of another kind (magic), of version 0 or newer than Newest, claims a
// payload over MaxPayload, has trailing bytes or a wrong checksum is refused with a
// *FormatError; the reader's own error comes back unwrapped. Memory grows with the bytes
// present, not with the length the header claims.
func (f Format) Read(r io.Reader) (version uint32, payload []byte, err error) {
	return f.ReadContext(context.Background(), r)
}

// sumPiece is how much of a payload ReadContext reads or checksums between two looks at its
// context.
const sumPiece = 4 << 20

// ReadContext is Read ending when ctx does, between two reads of r or two pieces of the
// checksum (a file of a gigabyte takes seconds to read and sum: a stop during a start must not
// wait for it); its error is then ctx.Err(), unwrapped (not a FormatError: the file was not
// found wrong).
func (f Format) ReadContext(ctx context.Context, r io.Reader) (version uint32, payload []byte, err error) {
	return f.ReadContextVetted(ctx, r, 0, nil)
}

// ReadContextVetted is ReadContext that calls vet, when not nil, with the format version and the
// payload's first min(P, vetLen) bytes (fewer in a truncated file) as soon as they are read:
// before the rest of the payload is read or any of it checksummed. An error of vet ends the
// read there and comes back as vet returned it. A file of gigabytes whose head says it is of no
// use (built for other settings) is refused in a read of its first bytes, not of all of them
// and their checksum. Those bytes are not yet checked against the checksum: vet refuses a
// corrupt head for what it reads as, and must let through what it cannot decide (the whole read
// and its checksum then do).
func (f Format) ReadContextVetted(ctx context.Context, r io.Reader, vetLen int, vet func(version uint32, head []byte) error) (version uint32, payload []byte, err error) {
	r = ctxReader{ctx, r}
	head := make([]byte, HeaderSize)
	if n, err := io.ReadFull(r, head); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, nil, formatErr("truncated: %d of %d header bytes", n, HeaderSize)
		}
		return 0, nil, err
	}
	if string(head[:MagicSize]) != f.Magic {
		return 0, nil, formatErr("wrong magic %q: not an %s", head[:MagicSize], f.Name)
	}
	le := binary.LittleEndian
	switch version = le.Uint32(head[MagicSize:]); {
	case version == 0:
		return 0, nil, formatErr("format version 0 is invalid")
	case version > f.Newest:
		return 0, nil, formatErr("format version %d is newer than the newest this build reads (%d); upgrade outlierd", version, f.Newest)
	}
	plen := le.Uint64(head[MagicSize+4:])
	if plen > f.MaxPayload {
		return 0, nil, formatErr("payload length %d exceeds the limit %d", plen, f.MaxPayload)
	}
	var body bytes.Buffer
	if vet != nil {
		want := min(plen, uint64(max(vetLen, 0)))
		if _, err := body.ReadFrom(io.LimitReader(r, int64(want))); err != nil {
			return 0, nil, err
		}
		if err := vet(version, body.Bytes()); err != nil { // (fewer bytes when the file is cut)
			return 0, nil, err
		}
	}
	if _, err := body.ReadFrom(io.LimitReader(r, int64(plen)+SumSize-int64(body.Len()))); err != nil {
		return 0, nil, err
	}
	n := body.Len()
	if uint64(n) < plen+SumSize {
		return 0, nil, formatErr("truncated: %d of %d bytes after the header", n, plen+SumSize)
	}
	var extra [1]byte
	if k, _ := io.ReadFull(r, extra[:]); k > 0 {
		return 0, nil, formatErr("trailing bytes after the checksum")
	}
	b := body.Bytes()
	payload, stored := b[:plen], b[plen:]
	sum := sha256.New()
	sum.Write(head)
	if err := sumPieces(ctx, sum, payload); err != nil {
		return 0, nil, err
	}
	if !bytes.Equal(sum.Sum(nil), stored) {
		return 0, nil, formatErr("checksum mismatch: the file is corrupt")
	}
	return version, payload, nil
}

// sumPieces adds payload to sum sumPiece bytes at a time, ending with ctx.Err() between two
// pieces once ctx ends.
func sumPieces(ctx context.Context, sum hash.Hash, payload []byte) error {
	for p := payload; len(p) > 0; p = p[min(len(p), sumPiece):] {
		if err := ctx.Err(); err != nil {
			return err
		}
		sum.Write(p[:min(len(p), sumPiece)])
	}
	return nil
}

// ctxReader is r failing with ctx.Err() once ctx ends, read sumPiece bytes at most at a time
// (a payload's buffer grows to reads of tens of MB: each one a wait the stop would not cut).
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p[:min(len(p), sumPiece)])
}

// ContextWriter is w failing with ctx.Err() once ctx ends, written sumPiece bytes at most at a
// time (a file's write that a deadline ends between two pieces).
func ContextWriter(ctx context.Context, w io.Writer) io.Writer { return ctxWriter{ctx, w} }

// ctxWriter is ContextWriter's writer.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c ctxWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		if err := c.ctx.Err(); err != nil {
			return n, err
		}
		k, err := c.w.Write(p[:min(len(p), sumPiece)])
		n += k
		if err != nil {
			return n, err
		}
		p = p[k:]
	}
	return n, nil
}

// Encoder appends little-endian fields to a payload. The zero value is ready to use.
type Encoder struct{ b []byte }

// Payload returns the bytes appended so far.
func (e *Encoder) Payload() []byte { return e.b }

// Reset empties the payload, keeping its buffer for the next fields (a payload written out in
// pieces: WriteStream).
func (e *Encoder) Reset() { e.b = e.b[:0] }

// Grow makes room for n more bytes at once (the largest piece of a payload written in pieces:
// one buffer, not a buffer grown step by step).
func (e *Encoder) Grow(n int) { e.b = slices.Grow(e.b, n) }

// U32 appends v.
func (e *Encoder) U32(v uint32) { e.b = binary.LittleEndian.AppendUint32(e.b, v) }

// U64 appends v.
func (e *Encoder) U64(v uint64) { e.b = binary.LittleEndian.AppendUint64(e.b, v) }

// F64 appends v's IEEE 754 bits.
func (e *Encoder) F64(v float64) { e.U64(math.Float64bits(v)) }

// F32s appends each value's IEEE 754 bits.
func (e *Encoder) F32s(v []float32) {
	for _, x := range v {
		e.U32(math.Float32bits(x))
	}
}

// F64s appends each value's IEEE 754 bits.
func (e *Encoder) F64s(v []float64) {
	for _, x := range v {
		e.U64(math.Float64bits(x))
	}
}

// Raw appends b as it is.
func (e *Encoder) Raw(b []byte) { e.b = append(e.b, b...) }

// Text appends s as its byte length (uint32) and its bytes; Decoder.Text reads it back.
func (e *Encoder) Text(s string) {
	e.U32(uint32(len(s)))
	e.b = append(e.b, s...)
}

// Decoder reads little-endian fields from a payload. After the first overrun every read
// returns zero values and Err reports that overrun (a *FormatError naming the field), so a
// caller reads a group of fields and checks once.
type Decoder struct {
	b   []byte
	off int
	err error
}

// NewDecoder returns a decoder at the start of p.
func NewDecoder(p []byte) *Decoder { return &Decoder{b: p} }

// Err is the first overrun, or nil.
func (d *Decoder) Err() error { return d.err }

// Offset is how many bytes have been read.
func (d *Decoder) Offset() int { return d.off }

// Left is how many bytes remain.
func (d *Decoder) Left() int { return len(d.b) - d.off }

// Take returns the next n bytes (aliasing the payload); what names them in the error.
func (d *Decoder) Take(n uint64, what string) []byte {
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)-d.off) {
		d.err = formatErr("payload ends inside %s (need %d bytes at offset %d, %d left)", what, n, d.off, len(d.b)-d.off)
		return nil
	}
	s := d.b[d.off : d.off+int(n)]
	d.off += int(n)
	return s
}

// U32 reads a uint32.
func (d *Decoder) U32(what string) uint32 {
	if s := d.Take(4, what); s != nil {
		return binary.LittleEndian.Uint32(s)
	}
	return 0
}

// U64 reads a uint64.
func (d *Decoder) U64(what string) uint64 {
	if s := d.Take(8, what); s != nil {
		return binary.LittleEndian.Uint64(s)
	}
	return 0
}

// Text reads a string written by Encoder.Text. A length over maxLen (checked before anything
// is taken) or bytes that are not UTF-8 are refused like an overrun, naming what.
func (d *Decoder) Text(maxLen uint32, what string) string {
	n := d.U32(what)
	if d.err == nil && n > maxLen {
		d.err = formatErr("%s: length %d exceeds %d", what, n, maxLen)
	}
	s := d.Take(uint64(n), what)
	if d.err != nil {
		return ""
	}
	if !utf8.Valid(s) {
		d.err = formatErr("%s: not UTF-8", what)
		return ""
	}
	return string(s)
}

// F32s reads n float32 values. A count whose byte size overflows is refused like an overrun.
func (d *Decoder) F32s(n uint64, what string) []float32 {
	s := d.takeN(n, 4, what)
	if s == nil {
		return nil
	}
	v := make([]float32, n)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(s[4*i:]))
	}
	return v
}

// F64s reads n float64 values. A count whose byte size overflows is refused like an overrun.
// (F32s's twin: a generic loop through a conversion function decoded at half the speed.)
func (d *Decoder) F64s(n uint64, what string) []float64 {
	s := d.takeN(n, 8, what)
	if s == nil {
		return nil
	}
	v := make([]float64, n)
	for i := range v {
		v[i] = math.Float64frombits(binary.LittleEndian.Uint64(s[8*i:]))
	}
	return v
}

// takeN takes n values of size bytes each, refusing a count whose byte size overflows.
func (d *Decoder) takeN(n, size uint64, what string) []byte {
	if d.err == nil && n > math.MaxInt64/size {
		d.err = formatErr("%s: count %d too large", what, n)
	}
	return d.Take(size*n, what)
}
