package detect

import (
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/testsupport"
)

// TestOlderThanTheRestoredWindowWarned (newuser31): a builder started on a role-all run's
// state_dir, in its own group without commits, read the input from offset 0 (ingest.start_offset
// earliest) into the window it had restored from the stream's end, and published models of the
// old records for the whole catch-up without a word. Records older than every saved record of
// their partition are now warned of, once, with the partition, the offset and the window's
// oldest; the records read again after a crash (above the window's oldest) are not.
func TestOlderThanTheRestoredWindowWarned(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	d := testData(3100, 6)
	cfg := testConfig()
	cfg.StateDir = t.TempDir()
	stopAfter(t, cfg, mem, d, 3000, 250) // (the window saved: records 1,000-2,999)
	const warning = "records older than the restored window are being read into it"
	for _, c := range []struct {
		name   string
		lo, hi int
		want   int
	}{
		{"read again after a crash", 2900, 3100, 0},
		{"read from the partition's start", 0, 600, 1},
	} {
		cc := cfg
		cc.StateDir = copyDir(t, cfg.StateDir)
		var logs testsupport.LogBuffer
		s, err := NewStage(cc, []string{"x1", "x2", "x3"}, true, Deps{Log: zerolog.New(&logs)})
		if err != nil {
			t.Fatal(err)
		}
		feed(t, s, mem, d, c.lo, c.hi, 100)
		s.Close()
		got := logs.Lines(warning)
		if len(got) != c.want {
			t.Errorf("%s: %d warnings, want %d; log:\n%s", c.name, len(got), c.want, logs.String())
			continue
		}
		if c.want == 1 && !(strings.Contains(got[0], `"offset":0`) && strings.Contains(got[0], `"window_oldest_offset":1000`)) {
			t.Errorf("%s: %s lacks the offset 0 and the window's oldest, 1000", c.name, got[0])
		}
	}
}
