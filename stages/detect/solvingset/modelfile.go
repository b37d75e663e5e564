package solvingset

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"unicode/utf8"
)

// Model file format, version 1 (all integers and floats little-endian):
//
//	offset  size  field
//	0       8     magic "\x89OSSM\r\n\x1a" (a high byte and CR LF, as PNG: text-mode
//	              mangling and the wrong kind of file are caught at once)
//	8       4     format version (uint32) = 1
//	12      8     payload length P (uint64)
//	20      P     payload:
//	                k uint32, w* float64, dims uint32, points uint64, flags uint32
//	                (bit 0: normalisation present; other bits must be 0),
//	                dims x { name length uint32, name UTF-8 bytes },
//	                if normalised: dims x offset float32, dims x scale float32,
//	                dims x points float32 (column-major)
//	20+P    32    SHA-256 of bytes [0, 20+P)
//
// The file ends there; trailing bytes are refused.
const (
	modelMagic   = "\x89OSSM\r\n\x1a"
	ModelVersion = 1 // the newest model format version this code reads and writes
	headerSize   = 8 + 4 + 8
	flagNorm     = 1
	// Limits that keep a corrupt or hostile header from asking for absurd allocations.
	maxDims       = 1 << 16
	maxNameLen    = 1 << 12
	maxPayloadLen = 1 << 40
)

// ErrModelFormat is wrapped by every error of Load that concerns the file's content.
var ErrModelFormat = errors.New("solvingset: bad model file")

// Save writes the model in the format above. The model must pass Validate.
func (m *Model) Save(w io.Writer) error {
	if err := m.Validate(); err != nil {
		return fmt.Errorf("solvingset: save: %w", err)
	}
	var p bytes.Buffer
	le := binary.LittleEndian
	p.Write(le.AppendUint32(nil, uint32(m.K)))
	p.Write(le.AppendUint64(nil, math.Float64bits(m.WStar)))
	p.Write(le.AppendUint32(nil, uint32(len(m.Features))))
	p.Write(le.AppendUint64(nil, uint64(len(m.Points[0]))))
	var flags uint32
	if m.Offset != nil {
		flags |= flagNorm
	}
	p.Write(le.AppendUint32(nil, flags))
	for _, f := range m.Features {
		p.Write(le.AppendUint32(nil, uint32(len(f))))
		p.WriteString(f)
	}
	put := func(v []float32) {
		b := make([]byte, 4*len(v))
		for i, x := range v {
			le.PutUint32(b[4*i:], math.Float32bits(x))
		}
		p.Write(b)
	}
	if m.Offset != nil {
		put(m.Offset)
		put(m.Scale)
	}
	for _, c := range m.Points {
		put(c)
	}
	head := make([]byte, 0, headerSize)
	head = append(head, modelMagic...)
	head = le.AppendUint32(head, ModelVersion)
	head = le.AppendUint64(head, uint64(p.Len()))
	sum := sha256.New()
	sum.Write(head)
	sum.Write(p.Bytes())
	bw := bufio.NewWriter(w)
	bw.Write(head)
	bw.Write(p.Bytes())
	bw.Write(sum.Sum(nil))
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("solvingset: save: %w", err)
	}
	return nil
}

// SaveFile writes the model to path atomically: a temporary file in the same directory,
// fsync, rename over path, fsync of the directory. A crash leaves the old file or the new one,
// never a torn one.
func (m *Model) SaveFile(path string) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("solvingset: save %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err = m.Save(f); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("solvingset: save %s: %w", path, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("solvingset: save %s: %w", path, err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("solvingset: save %s: %w", path, err)
	}
	// The rename is durable only once the directory is synced; failing to open the directory
	// (some platforms) leaves a complete file in place, so it is not an error.
	if d, derr := os.Open(dir); derr == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// LoadFile reads a model written by SaveFile.
func LoadFile(path string) (*Model, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("solvingset: load: %w", err)
	}
	defer f.Close()
	m, err := Load(bufio.NewReader(f))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

func formatErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrModelFormat, fmt.Sprintf(format, args...))
}

// Load reads a model. A file that is truncated, corrupt (checksum), of another kind (magic),
// of a newer format version, or inconsistent is refused with the reason; the error wraps
// ErrModelFormat (or the reader's error).
func Load(r io.Reader) (*Model, error) {
	head := make([]byte, headerSize)
	if n, err := io.ReadFull(r, head); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, formatErr("truncated: %d of %d header bytes", n, headerSize)
		}
		return nil, fmt.Errorf("solvingset: load: %w", err)
	}
	if string(head[:8]) != modelMagic {
		return nil, formatErr("wrong magic %q: not an outlierd solving-set model", head[:8])
	}
	le := binary.LittleEndian
	version := le.Uint32(head[8:])
	switch {
	case version == 0:
		return nil, formatErr("format version 0 is invalid")
	case version > ModelVersion:
		return nil, formatErr("format version %d is newer than the newest this build reads (%d); upgrade outlierd", version, ModelVersion)
	}
	plen := le.Uint64(head[12:])
	if plen > maxPayloadLen {
		return nil, formatErr("payload length %d exceeds the limit %d", plen, uint64(maxPayloadLen))
	}
	// Read through a LimitReader so that memory grows with the bytes actually present, not
	// with the length the header claims.
	var body bytes.Buffer
	n, err := body.ReadFrom(io.LimitReader(r, int64(plen)+sha256.Size))
	if err != nil {
		return nil, fmt.Errorf("solvingset: load: %w", err)
	}
	if uint64(n) < plen+sha256.Size {
		return nil, formatErr("truncated: %d of %d bytes after the header", n, plen+sha256.Size)
	}
	var extra [1]byte
	if k, _ := io.ReadFull(r, extra[:]); k > 0 {
		return nil, formatErr("trailing bytes after the checksum")
	}
	b := body.Bytes()
	payload, stored := b[:plen], b[plen:]
	sum := sha256.New()
	sum.Write(head)
	sum.Write(payload)
	if !bytes.Equal(sum.Sum(nil), stored) {
		return nil, formatErr("checksum mismatch: the file is corrupt")
	}
	return decodePayload(payload)
}

// decoder reads little-endian fields from a payload, remembering the first overrun.
type decoder struct {
	b   []byte
	off int
	err error
}

func (d *decoder) take(n uint64, what string) []byte {
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

func (d *decoder) u32(what string) uint32 {
	if s := d.take(4, what); s != nil {
		return binary.LittleEndian.Uint32(s)
	}
	return 0
}

func (d *decoder) u64(what string) uint64 {
	if s := d.take(8, what); s != nil {
		return binary.LittleEndian.Uint64(s)
	}
	return 0
}

func (d *decoder) floats(n uint64, what string) []float32 {
	if n > math.MaxInt64/4 {
		d.err = formatErr("%s: count %d too large", what, n)
		return nil
	}
	s := d.take(4*n, what)
	if s == nil {
		return nil
	}
	v := make([]float32, n)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(s[4*i:]))
	}
	return v
}

func decodePayload(p []byte) (*Model, error) {
	d := &decoder{b: p}
	k := d.u32("k")
	wstar := math.Float64frombits(d.u64("w*"))
	dims := d.u32("dims")
	rows := d.u64("point count")
	flags := d.u32("flags")
	if d.err != nil {
		return nil, d.err
	}
	if dims == 0 || dims > maxDims {
		return nil, formatErr("dims %d out of range [1, %d]", dims, maxDims)
	}
	if flags&^flagNorm != 0 {
		return nil, formatErr("unknown flags %#x", flags)
	}
	// Every point costs 4*dims bytes: a count the payload cannot hold is refused before any
	// allocation.
	if rows > uint64(len(p))/(4*uint64(dims)) {
		return nil, formatErr("%d points of %d dims cannot fit in a payload of %d bytes", rows, dims, len(p))
	}
	m := &Model{K: int(k), WStar: wstar, Features: make([]string, dims), Points: make([][]float32, dims)}
	for j := range m.Features {
		n := d.u32("feature name length")
		if d.err == nil && n > maxNameLen {
			return nil, formatErr("feature %d: name length %d exceeds %d", j, n, maxNameLen)
		}
		name := d.take(uint64(n), "feature name")
		if d.err != nil {
			return nil, d.err
		}
		if !utf8.Valid(name) {
			return nil, formatErr("feature %d: name is not UTF-8", j)
		}
		m.Features[j] = string(name)
	}
	if flags&flagNorm != 0 {
		m.Offset = d.floats(uint64(dims), "offsets")
		m.Scale = d.floats(uint64(dims), "scales")
	}
	for j := range m.Points {
		m.Points[j] = d.floats(rows, "points")
	}
	if d.err != nil {
		return nil, d.err
	}
	if d.off != len(p) {
		return nil, formatErr("%d unread bytes at the end of the payload", len(p)-d.off)
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrModelFormat, err)
	}
	return m, nil
}
