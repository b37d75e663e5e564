package detect

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/outlierd/outlierd/internal/core/sealed"
)

// TestKeysStateHeaderRefusedBeforeItsBody: a keys' state file built for other features or keys'
// settings is refused by its header, read first, not after its whole body and checksum (at a
// million keys 12.7 GB a file, up to 3 files: minutes of a start after a feature change). The
// file here claims 8 GiB of payload and holds only its header and a few bytes: the header's
// refusal (ErrSnapshotMismatch) can only come before the body is read, which finds it
// truncated. Before, every case was refused as truncated. A file whose header fits is still read
// whole: it is refused as truncated.
func TestKeysStateHeaderRefusedBeforeItsBody(t *testing.T) {
	cfg := keyedConfig()
	cfg.StateDir = t.TempDir()
	var e sealed.Encoder
	encodeKeyHeader(&e, []string{"value"}, &cfg)
	e.U64(0)       // position
	e.U64(1 << 20) // key count
	head := e.Payload()
	file := binary.LittleEndian.AppendUint32([]byte(keysSnapshotMagic), KeysSnapshotFormat)
	file = binary.LittleEndian.AppendUint64(file, 8<<30)
	file = append(file, head...)
	file = append(file, make([]byte, 4096)...)
	path := filepath.Join(cfg.StateDir, "keys-00000000000000000001.osnap")
	if err := os.WriteFile(path, file, 0o644); err != nil {
		t.Fatal(err)
	}

	other := cfg
	other.Keys.Window = 100
	other.Keys.MinRecords = 25
	for _, c := range []struct {
		name     string
		cfg      Config
		features []string
		want     error
		reason   string
	}{
		{"features", cfg, []string{"reading"}, ErrSnapshotMismatch, "built for features [value], the stream has [reading]"},
		{"keys.window", other, []string{"value"}, ErrSnapshotMismatch, "other settings (keys.window 200 -> 100)"},
		{"the same", cfg, []string{"value"}, ErrSnapshotFormat, "truncated"},
	} {
		s := newFleetStage(t, c.cfg, c.features)
		sk := s.SkippedKeys()
		s.ext.snaps = nil // (nothing saved at its Close)
		s.Close()
		if len(sk) != 1 || sk[0].Path != path || !errors.Is(sk[0].Reason, c.want) || !strings.Contains(sk[0].Reason.Error(), c.reason) {
			t.Errorf("%s: skipped %v: want the file refused for %q", c.name, sk, c.reason)
		}
	}
}
