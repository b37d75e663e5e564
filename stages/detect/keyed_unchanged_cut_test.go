package detect

import (
	"context"
	"hash/maphash"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/testsupport"
)

// errAfter is a context whose Err ends it at its (left+1)th call: a stop's deadline that passes
// at a chosen look, without a clock (a loaded machine cannot move it).
type errAfter struct {
	context.Context
	cancel context.CancelFunc
	left   atomic.Int32
}

func (c *errAfter) Err() error {
	if c.left.Add(-1) < 0 {
		c.cancel()
	}
	return c.Context.Err()
}

func newErrAfter(parent context.Context, left int32) *errAfter {
	ctx, cancel := context.WithCancel(parent)
	c := &errAfter{Context: ctx, cancel: cancel}
	c.left.Store(left)
	return c
}

// TestStopDigestIsCutByTheDeadline: the digest a stop's save takes of the keys' state (to write
// nothing when it is unchanged: keyed_unchanged.go, about 0.1 s per 100,000 keys) looked at no
// deadline: a stop whose deadline passed once the save had begun digested every key all the
// same. Its deadline passing at the save's second look at it (its first: the save's own, before
// anything is copied), the stop must not digest (so cannot find the state unchanged), say that
// the keys' state was not saved for the deadline, and leave state_dir's files as they were.
func TestStopDigestIsCutByTheDeadline(t *testing.T) {
	features := []string{"value"}
	rows := fleet(40, 6000, 0.003, 3)
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	cfg := keyedConfig()
	cfg.StateDir = t.TempDir()
	a, err := NewStage(cfg, features, false, Deps{Log: zerolog.New(&testsupport.LogBuffer{})})
	if err != nil {
		t.Fatal(err)
	}
	feedFleet(t, a, mem, rows, 0, 3000)
	a.Close()
	saved, err := a.ext.snaps.list(keysPrefix)
	if err != nil || len(saved) == 0 {
		t.Fatalf("keys' state files %v (%v), want some", saved, err)
	}

	var logs testsupport.LogBuffer
	b, err := NewStage(cfg, features, false, Deps{Log: zerolog.New(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	if b.ext.saved.keys.file == "" {
		t.Fatal("the start knows no digest of the keys' file it loaded: the stop would write it, not digest it")
	}
	b.ext.saving = newErrAfter(b.ext.saving, 1)
	b.Close()
	if lines := logs.Lines("keys' state unchanged"); len(lines) != 0 {
		t.Errorf("a stop whose deadline passed as its save began digested the keys all the same: %q", lines)
	}
	if len(logs.Lines("keys' state not saved", "deadline")) != 1 {
		t.Errorf("the stop does not say that its deadline cut the keys' state's save:\n%s", logs.String())
	}
	if files, err := b.ext.snaps.list(keysPrefix); err != nil || len(files) != len(saved) || files[0] != saved[0] {
		t.Errorf("keys' state files after the cut stop %v (%v), want those before %v", files, err, saved)
	}
}

// TestKeysDigestEndsWithItsContext: the keys' digest looks at its context before the first key
// and every 256 keys after it: cut after key 300 of 1,000 it hashes no key past the 513th (the
// look at key 512 ends it) and returns the context's error; cut before, it hashes none; uncut,
// all 1,000.
func TestKeysDigestEndsWithItsContext(t *testing.T) {
	states := make([]keyState, 1000)
	for i := range states {
		states[i] = keyState{key: string(rune('a' + i%26)), sig: flagRing{bits: []uint64{0}}, cap: &alarmCap{}}
	}
	cfg := keyedConfig()
	run := func(cutAt int, pre bool) (visits int, err error) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		if pre {
			cancel()
		}
		each := func(f func(*keyState) bool) {
			eachOf(states)(func(st *keyState) bool {
				if visits == cutAt {
					cancel()
				}
				visits++
				return f(st)
			})
		}
		_, err = keysDigestOf(ctx, maphash.MakeSeed(), []string{"value"}, &cfg, len(states), each, nil, 0)
		return visits, err
	}
	if n, err := run(300, false); err != context.Canceled || n > 513 {
		t.Errorf("cut after key 300: %d keys visited (%v), want at most 513 and context.Canceled", n, err)
	}
	if n, err := run(-1, true); err != context.Canceled || n > 1 {
		t.Errorf("cut before: %d keys visited (%v), want at most 1 (looked at, not hashed) and context.Canceled", n, err)
	}
	if n, err := run(-1, false); err != nil || n != len(states) {
		t.Errorf("uncut: %d keys visited (%v), want %d", n, err, len(states))
	}
}
