package detect

import (
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow/memory"
)

// TestKeyBytesCountTheKeys: keys.max_bytes (KeyStats.Bytes) counts each key's own bytes. Keys
// are whoever writes to the input topic's, up to a message's size: before, a key's bytes were
// left out, so keys of 1 MB held 100 GB at the default max_keys (100,000) under any
// max_bytes, which said they held a few MB.
func TestKeyBytesCountTheKeys(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	const long = 1 << 20
	count := func(name string) int64 {
		s := newFleetStage(t, keyedConfig(), []string{"value"})
		defer s.Close()
		feedFleet(t, s, mem, joiningFleet(3, 1500, 0, 0, 5, name), 0, 1500)
		st := s.KeyStats()
		if st.Live+st.Warming != 3 {
			t.Fatalf("%d keys held, want 3", st.Live+st.Warming)
		}
		return st.Bytes
	}
	short, big := count("sensor-%03d"), count(strings.Repeat("k", long)+"%03d")
	more := int64(3 * (long + len("000") - len("sensor-000")))
	if grew := big - short; grew != more {
		t.Errorf("3 keys longer by %d bytes each count %d bytes more than short ones, want %d (the keys' own bytes)", more/3, grew, more)
	}
}
