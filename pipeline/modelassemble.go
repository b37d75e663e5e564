package pipeline

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
)

// modelAssembler reassembles publications from the model topic's messages, read in order,
// and keeps what a builder must know of the topic: the highest version of any chunk, and the
// keys whose newest message is not a tombstone (live: key -> version, nil unless tracked).
type modelAssembler struct {
	version uint64
	n, next int
	sum     string
	cube    int    // the hypercube counts' length (headerModelHypercube), -1: none
	derived string // its first chunk's headerColumns
	said    bool   // whether it had the header
	data    []byte

	highest uint64
	live    map[string]uint64

	// bound is the most bytes a publication may hold (detect.PublicationBound of the
	// configuration in force; 0: none): one pending at a time, so what the assembler holds.
	bound int
	// skipV, skipSum name a publication refused as too large: the rest of its chunks are
	// passed over without a word each (its refusal said it).
	skipV   uint64
	skipSum string
	// aheadV is the last version refused as ahead of the clock (now, nil: time.Now).
	aheadV uint64
	now    func() time.Time
	// refused, if set, hears each publication refused (refusedTooLarge, refusedVersionAhead) or
	// dropped incomplete (refusedIncomplete), with the message that made it so (modelrefuse.go:
	// counted, logged).
	refused func(reason string, m kafka.Message, err error)
}

// assembled is one publication read back.
type assembled struct {
	version   uint64
	snapshot  []byte
	hypercube []byte // nil: none
	derived   string // headerColumns: the builder's derived columns ("": none, or not said)
	said      bool   // whether the publication had the header (not: a builder of an earlier release)
}

// add takes the next message; it returns a whole publication when m completes one, and an
// error (the message is skipped) when m does not fit the protocol. A tombstone returns nothing;
// so does a chunk refused (too large, a version ahead of the clock) or of a publication
// refused, the refusal told once through refused (modelrefuse.go, modelversion.go).
func (a *modelAssembler) add(m kafka.Message) (*assembled, error) {
	if m.Value == nil { // a tombstone: the key's older chunks are gone
		if a.live != nil {
			delete(a.live, string(m.Key))
		}
		return nil, nil
	}
	h := map[string]string{}
	for _, x := range m.Headers {
		h[x.Key] = string(x.Value)
	}
	v, err1 := strconv.ParseUint(h[headerModelVersion], 10, 64)
	i, n, err2 := parseChunk(h[headerModelChunk])
	cube, err3 := -1, error(nil)
	if c, ok := h[headerModelHypercube]; ok {
		if cube, err3 = strconv.Atoi(c); err3 == nil && cube < 0 {
			err3 = errors.New("negative")
		}
	}
	now := time.Now()
	if a.now != nil {
		now = a.now()
	}
	ahead := err1 == nil && versionAhead(v, now)
	if a.live != nil && len(m.Key) > 0 {
		// A stray message is live too: the builder's tombstones clear it, and those of the
		// versions ahead of the clock, which are refused, at its next publication.
		a.live[string(m.Key)] = v
		if ahead {
			a.live[string(m.Key)] = 0
		}
	}
	if err1 != nil || err2 != nil || err3 != nil || len(h[headerModelSHA256]) != 64 {
		return nil, fmt.Errorf("not a model chunk (headers %s=%q, %s=%q, %s=%q, %s=%q)", headerModelVersion, h[headerModelVersion],
			headerModelChunk, h[headerModelChunk], headerModelSHA256, h[headerModelSHA256], headerModelHypercube, h[headerModelHypercube])
	}
	if ahead { // refused once per version, its other chunks passed over (modelversion.go)
		if v != a.aheadV {
			a.aheadV = v
			a.refuse(refusedVersionAhead, m, errVersionAhead(v, now))
		}
		return nil, nil
	}
	a.highest = max(a.highest, v)
	if i == 0 { // a new publication starts; whatever was pending is dropped
		if a.next < a.n {
			a.refuse(refusedIncomplete, m, fmt.Errorf("publication of model version %d dropped at chunk %d of %d (%d bytes held): version %d starts",
				a.version, a.next, a.n, len(a.data), v))
		}
		a.skipV, a.skipSum = 0, ""
		a.version, a.n, a.next, a.sum, a.cube = v, n, 1, h[headerModelSHA256], cube
		a.derived, a.said = h[headerColumns]
		if a.bound > 0 && len(m.Value) > a.bound {
			a.tooLarge(m, len(m.Value))
			return nil, nil
		}
		a.data = a.start(m.Value, n)
	} else if v == a.skipV && h[headerModelSHA256] == a.skipSum {
		return nil, nil // (the rest of a publication refused as too large)
	} else if v != a.version || n != a.n || i != a.next || h[headerModelSHA256] != a.sum || cube != a.cube {
		// A publication cut short, or chunks of one whose start compaction or retention
		// removed: skip it.
		return nil, fmt.Errorf("chunk %d/%d of version %d out of sequence (assembling chunk %d/%d of version %d)", i, n, v, a.next, a.n, a.version)
	} else if a.bound > 0 && len(a.data)+len(m.Value) > a.bound {
		a.tooLarge(m, len(a.data)+len(m.Value))
		return nil, nil
	} else {
		a.data = a.grow(m.Value)
		a.next++
	}
	if a.next < a.n {
		return nil, nil
	}
	out := &assembled{version: a.version, snapshot: a.data, derived: a.derived, said: a.said}
	sum, cube := a.sum, a.cube
	a.version, a.n, a.next, a.sum, a.data = 0, 0, 0, "", nil
	if got := sha256.Sum256(out.snapshot); hex.EncodeToString(got[:]) != sum {
		return nil, fmt.Errorf("model version %d: SHA-256 of the %d reassembled bytes differs from its header", out.version, len(out.snapshot))
	}
	if cube > len(out.snapshot) {
		return nil, fmt.Errorf("model version %d: %d bytes of hypercube counts in a publication of %d", out.version, cube, len(out.snapshot))
	}
	if cube >= 0 {
		k := len(out.snapshot) - cube
		out.snapshot, out.hypercube = out.snapshot[:k:k], out.snapshot[k:]
	}
	return out, nil
}

// parseChunk reads "i/n".
func parseChunk(s string) (i, n int, err error) {
	a, b, ok := strings.Cut(s, "/")
	if !ok {
		return 0, 0, errors.New("no slash")
	}
	if i, err = strconv.Atoi(a); err != nil {
		return 0, 0, err
	}
	if n, err = strconv.Atoi(b); err != nil {
		return 0, 0, err
	}
	if n < 1 || i < 0 || i >= n {
		return 0, 0, fmt.Errorf("chunk %d of %d", i, n)
	}
	return i, n, nil
}
