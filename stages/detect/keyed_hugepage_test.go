package detect

import (
	"testing"

	"github.com/rs/zerolog"
)

// TestKeyedStageHoldsHugePages: a keyed stage with keys.huge_pages holds the heap's huge pages
// (internal/core/hugepage) from NewStage to Close, and Close releases the hold once (a second
// Close has nothing left to release); without the option, or without key_by, no hold is taken.
func TestKeyedStageHoldsHugePages(t *testing.T) {
	for _, c := range []struct {
		name       string
		keyBy      KeyBy
		hugePages  bool
		wantHolder bool
	}{
		{"keyed", KeyByKey, true, true},
		{"keyed without huge_pages", KeyByKey, false, false},
		{"not keyed", KeyByNone, true, false},
	} {
		cfg := Default()
		cfg.KeyBy, cfg.Keys.HugePages = c.keyBy, c.hugePages
		s, err := NewStage(cfg, []string{"value"}, false, Deps{Log: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		if held := s.keyed != nil && s.keyed.releaseHeap != nil; held != c.wantHolder {
			t.Errorf("%s: holds huge pages %v, want %v", c.name, held, c.wantHolder)
		}
		s.Close()
		if s.keyed != nil && s.keyed.releaseHeap != nil {
			t.Errorf("%s: the hold is kept after Close", c.name)
		}
		s.Close()
	}
}
