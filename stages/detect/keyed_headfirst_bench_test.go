package detect

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/core/sealed"
)

// BenchmarkKeysStateOtherFeaturesStart is a start after ingest.features changed on a state_dir
// whose keys' state file (built for the old features) is OUTLIERD_BENCH_KEYS_FILE_MB MiB
// (default 512; 12,700 MB is a million keys' file, §13.2.2): "start" is NewStage (the file
// refused by its header), "whole" the read before (the whole file read and checksummed, then
// its header refused). The file is sealed properly (header, zero body, SHA-256) under
// b.TempDir (TMPDIR), deleted at the end; it was just written, so both read it from the page
// cache: a cold disk makes "whole" slower still, "start" not.
//
//	go test ./stages/detect -run '^$' -bench KeysStateOtherFeaturesStart -benchtime 3x
func BenchmarkKeysStateOtherFeaturesStart(b *testing.B) {
	mb := 512
	if n, ok := benchCount(b, "OUTLIERD_BENCH_KEYS_FILE_MB", 1); ok {
		mb = n
	}
	cfg := keyedConfig()
	cfg.StateDir = b.TempDir()
	path := filepath.Join(cfg.StateDir, "keys-00000000000000000001.osnap")
	writeZeroKeysFile(b, path, []string{"value"}, &cfg, int64(mb)<<20)

	b.Run("start", func(b *testing.B) {
		for range b.N {
			s, err := NewStage(cfg, []string{"reading"}, false, Deps{Log: zerolog.Nop()})
			if err != nil {
				b.Fatal(err)
			}
			if sk := s.SkippedKeys(); len(sk) != 1 || !errors.Is(sk[0].Reason, ErrSnapshotMismatch) {
				b.Fatalf("skipped %v, want the file refused for its features", sk)
			}
			s.ext.snaps = nil
			s.Close()
		}
	})
	b.Run("whole", func(b *testing.B) {
		for range b.N {
			k := newKeyedScorer()
			err := readSealedFile(context.Background(), path, keysSnapshotFile, func(format uint32, p []byte) error {
				_, err := k.decodeKeys(context.Background(), format, p, []string{"reading"}, &cfg)
				return err
			})
			if !errors.Is(err, ErrSnapshotMismatch) {
				b.Fatalf("%v, want the file refused for its features", err)
			}
		}
	})
}

// writeZeroKeysFile writes a sealed keys' state file at path of a payload of size bytes: the
// header of features and cfg, then zeros.
func writeZeroKeysFile(tb testing.TB, path string, features []string, cfg *Config, size int64) {
	tb.Helper()
	var e sealed.Encoder
	encodeKeyHeader(&e, features, cfg)
	head := e.Payload()
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	sum := sha256.New()
	w := bufio.NewWriterSize(f, 1<<20)
	put := func(p []byte) {
		sum.Write(p)
		w.Write(p)
	}
	env := binary.LittleEndian.AppendUint32([]byte(keysSnapshotMagic), KeysSnapshotFormat)
	put(binary.LittleEndian.AppendUint64(env, uint64(size)))
	put(head)
	zeros := make([]byte, 1<<20)
	for left := size - int64(len(head)); left > 0; left -= int64(len(zeros)) {
		put(zeros[:min(left, int64(len(zeros)))])
	}
	w.Write(sum.Sum(nil))
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
}
