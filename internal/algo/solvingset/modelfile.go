package solvingset

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/outlierd/outlierd/internal/core/atomicfile"
	"github.com/outlierd/outlierd/internal/core/sealed"
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
	headerSize   = sealed.HeaderSize
	flagNorm     = 1
	// Limits that keep a corrupt or hostile header from asking for absurd allocations.
	maxDims       = 1 << 16
	maxNameLen    = 1 << 12
	maxPayloadLen = 1 << 40
)

// modelFile is the envelope above (package sealed writes and checks it).
var modelFile = sealed.Format{Magic: modelMagic, Name: "outlierd solving-set model", Newest: ModelVersion, MaxPayload: maxPayloadLen}

// ErrModelFormat is wrapped by every error of Load that concerns the file's content.
var ErrModelFormat = errors.New("solvingset: bad model file")

// Save writes the model in the format above. The model must pass Validate.
func (m *Model) Save(w io.Writer) error {
	if err := m.Validate(); err != nil {
		return fmt.Errorf("solvingset: save: %w", err)
	}
	var e sealed.Encoder
	e.U32(uint32(m.K))
	e.F64(m.WStar)
	e.U32(uint32(len(m.Features)))
	e.U64(uint64(len(m.Points[0])))
	var flags uint32
	if m.Offset != nil {
		flags |= flagNorm
	}
	e.U32(flags)
	for _, f := range m.Features {
		e.Text(f)
	}
	if m.Offset != nil {
		e.F32s(m.Offset)
		e.F32s(m.Scale)
	}
	for _, c := range m.Points {
		e.F32s(c)
	}
	if err := modelFile.Write(w, ModelVersion, e.Payload()); err != nil {
		return fmt.Errorf("solvingset: save: %w", err)
	}
	return nil
}

// SaveFile writes the model to path atomically (internal/core/atomicfile: a temporary file in
// the same directory, fsync, rename over path, fsync of the directory). A crash leaves the old
// file or the new one, never a torn one. A directory that cannot be synced (some platforms)
// leaves a complete file in place, so it is not an error.
func (m *Model) SaveFile(path string) error {
	var saveErr error
	_, err := atomicfile.Write(context.Background(), path, func(w io.Writer) error {
		saveErr = m.Save(w)
		return saveErr
	})
	if err != nil && err != saveErr { // (Save's own says what failed already)
		err = fmt.Errorf("solvingset: save %w", err)
	}
	return err
}

// LoadFile reads a model written by SaveFile.
func LoadFile(path string) (*Model, error) {
	f, err := os.Open(path)
	if err != nil {
		var pe *os.PathError // (its reason alone: the path comes first)
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("%s: cannot open: %w", path, err)
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

// loadErr wraps an error of the sealed envelope or decoder: a refusal of the content with
// ErrModelFormat, the reader's own error as it is.
func loadErr(err error) error { return sealed.Wrap(err, ErrModelFormat, "solvingset: load") }

// Load reads a model. A file that is truncated, corrupt (checksum), of another kind (magic),
// of a newer format version, or inconsistent is refused with the reason; the error wraps
// ErrModelFormat (or the reader's error).
func Load(r io.Reader) (*Model, error) {
	_, payload, err := modelFile.Read(r)
	if err != nil {
		return nil, loadErr(err)
	}
	return decodePayload(payload)
}

func decodePayload(p []byte) (*Model, error) {
	d := sealed.NewDecoder(p)
	k := d.U32("k")
	wstar := math.Float64frombits(d.U64("w*"))
	dims := d.U32("dims")
	rows := d.U64("point count")
	flags := d.U32("flags")
	if d.Err() != nil {
		return nil, loadErr(d.Err())
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
		m.Features[j] = d.Text(maxNameLen, fmt.Sprintf("feature %d name", j))
	}
	if flags&flagNorm != 0 {
		m.Offset = d.F32s(uint64(dims), "offsets")
		m.Scale = d.F32s(uint64(dims), "scales")
	}
	for j := range m.Points {
		m.Points[j] = d.F32s(rows, "points")
	}
	if d.Err() != nil {
		return nil, loadErr(d.Err())
	}
	if d.Left() != 0 {
		return nil, formatErr("%d unread bytes at the end of the payload", d.Left())
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrModelFormat, err)
	}
	return m, nil
}
