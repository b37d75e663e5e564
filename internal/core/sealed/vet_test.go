package sealed

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n += k
	return k, err
}

// TestReadVetted: vet sees the version and the payload's first vetLen bytes (all of a shorter
// payload, the bytes present of a cut file); its refusal ends the read there, before the rest is
// read or checksummed, and comes back as it was; a nil vet or a vet that lets it through reads
// the file as ReadContext does (the checksum still refuses a corrupt one).
func TestReadVetted(t *testing.T) {
	t.Parallel()
	payload := bytes.Repeat([]byte{0xCD}, 600_000) // (testFormat's MaxPayload is 1 MiB)
	copy(payload, "head")
	file := seal(t, 2, payload)
	refuse := errors.New("built for other settings")
	var seen []byte
	var seenVersion uint32
	vet := func(err error) func(uint32, []byte) error {
		return func(v uint32, head []byte) error {
			seenVersion, seen = v, bytes.Clone(head)
			return err
		}
	}

	c := &countingReader{r: bytes.NewReader(file)}
	if _, _, err := testFormat.ReadContextVetted(t.Context(), c, 16, vet(refuse)); err != refuse {
		t.Fatalf("refused with %v, want vet's error itself", err)
	}
	if seenVersion != 2 || !bytes.Equal(seen, payload[:16]) {
		t.Errorf("vet saw version %d, %q; want 2 and the payload's first 16 bytes", seenVersion, seen)
	}
	// (The reader is asked for no more than the header and vetLen bytes: ReadFrom reads into
	// a buffer's room, a LimitReader stops it there.)
	if c.n != HeaderSize+16 {
		t.Errorf("read %d bytes before the refusal, want %d (the header and vet's 16)", c.n, HeaderSize+16)
	}

	v, p, err := testFormat.ReadContextVetted(t.Context(), bytes.NewReader(file), 16, vet(nil))
	if err != nil || v != 2 || !bytes.Equal(p, payload) {
		t.Errorf("let through: version %d, %d bytes, %v; want the whole file", v, len(p), err)
	}
	if _, p, err := testFormat.ReadContextVetted(t.Context(), bytes.NewReader(file), 1<<30, vet(nil)); err != nil || !bytes.Equal(p, payload) || len(seen) != len(payload) {
		t.Errorf("vetLen past the payload: vet saw %d bytes, read %d, %v; want all %d", len(seen), len(p), err, len(payload))
	}
	if _, _, err := testFormat.ReadContextVetted(t.Context(), bytes.NewReader(file[:HeaderSize+10]), 16, vet(nil)); !IsFormat(err) || len(seen) != 10 {
		t.Errorf("cut file: vet saw %d bytes, error %v; want the 10 present, then truncated", len(seen), err)
	}
	bad := bytes.Clone(file)
	bad[HeaderSize+300_000] ^= 1
	if _, _, err := testFormat.ReadContextVetted(t.Context(), bytes.NewReader(bad), 16, vet(nil)); !IsFormat(err) {
		t.Errorf("corrupt body let through by vet: %v, want the checksum's refusal", err)
	}
}
