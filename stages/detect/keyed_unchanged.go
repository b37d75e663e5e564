package detect

import (
	"context"
	"hash/maphash"
	"math"
	"sync"
	"unsafe"

	"github.com/outlierd/outlierd/internal/core/sealed"
)

// What a save does not write again (docs/OPERATIONS.md, "Shutdown").
//
// The keys' state (keyed_snapshot.go) and the alarm state (alarm_state.go) are saved at every
// graceful stop. A stop right after a start (an orchestrator's start/stop loop) wrote what the
// start had just loaded: at 100,000 keys 1.27 GB, about 7 s of the stop. So a save compares a
// digest of what it would write with the digest of what state_dir's newest file gives back when
// loaded (the state as the start's load left it, or as the last save wrote it), and writes
// nothing when they are equal.
//
// Why no path that changes the state can skip a needed save: the digest is not kept by the code
// that changes the state (a flag or a counter that every such path must touch: a path that
// forgets loses its change at the next restart, silently). It is computed at the save from the
// very values the save encodes: the alarm state's encoded payload itself, and for the keys'
// state everything encodeKeyStatesContext reads (the header, the stream position, each key in
// the file's order with its window, significance bits, rebuild clock, alarm cap and partition,
// and the fleet's pool as fleetCopy folds it), but the keys' models, compared by identity: a
// key's model is replaced, never changed (keysCopy shares the models with a save in flight on the
// same ground). Whatever changed one of those values, by whatever path, changes the digest, and
// the save is made. TestKeysDigestCoversTheSavedState fails on a field of keyState, alarmCap or
// fleetShard not classified as digested or not saved, and on a digested field whose change leaves
// the digest as it was. A digest is 64 bits of hash/maphash under a seed drawn at the stage's
// start: a changed state digests equal with a probability of about 2^-64.
//
// The global window (window_state.go) is compared the same way, by the digest of its payload:
// the bytes writeWindowPayload gives the file, written into the hash instead (24-39 ms at
// 1,000,000 records of 20 features, against a save of about 0.5 s; docs/BENCHMARKS.md
// §13.2.11); its start's digest is the newest window file's payload's, and stands only if the
// rest of the start left the window as that file holds it (noteLoaded).
//
// The digests of the start are those of the files it loaded, as the files hold them: a file of
// an older format, or one whose load changed what it held (noteLoaded), gives none, and the
// first save writes it. Cost: at the start, two passes over the keys' windows (hashing is
// several GB/s; the windows are about a fifth of the file, the models the rest), and one at
// each save; the alarm state's payload is hashed at its load and at each save. The digest
// ends when its context does (every 256 keys, as the encoding: a stop's deadline; cutSave logs
// it): at 100,000 keys it takes about 0.1 s, as long as the keys' copy.

// savedState is the digests of the keys' and the alarm state as state_dir's newest files give
// them back (file: that file; "": none known, the next save writes). Saves in flight set them
// on their own goroutine.
type savedState struct {
	mu                   sync.Mutex
	keys, alarms, window savedDigest
}

type savedDigest struct {
	sum  uint64
	file string
}

// unchanged says whether sum is *of's, and the file that holds it.
func (v *savedState) unchanged(of *savedDigest, sum uint64) (string, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return of.file, of.file != "" && of.sum == sum
}

// set notes that file holds the state of digest sum ("": none known).
func (v *savedState) set(of *savedDigest, sum uint64, file string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	*of = savedDigest{sum, file}
}

// noteLoaded ends the start's load: the keys' state's digest, taken as its file held it
// (loadKeyStates), stands only if the rest of the load left the keys so (the alarm state's load
// moves their caps' positions to its own stream position when they were saved apart): otherwise
// the first save writes them. (The alarm state's digest is its file's payload's, loadAlarms':
// a load that dropped or moved anything of it encodes otherwise at the save, which writes it.)
// The window's digest, its newest file's payload's (loadWindow), stands only if the rest of the
// start left the window as the file holds it (the build triggers resumed from it, the same
// detect.window, the same columns of event times): otherwise the first save writes it.
func (s *Stage) noteLoaded() {
	v := &s.ext.saved
	if v.keys.file != "" {
		sum, err := s.liveKeysDigest(context.Background(), s.series.pos) // (the start's load is over: no stop cuts this)
		if _, same := v.unchanged(&v.keys, sum); err != nil || !same {
			v.set(&v.keys, 0, "")
		}
	}
	if v.window.file != "" {
		same := false
		if w := s.windowCopy(); w != nil {
			sum, _ := windowDigest(context.Background(), s.ext.seed, w) // (no error: the context never ends)
			_, same = v.unchanged(&v.window, sum)
		}
		if !same {
			v.set(&v.window, 0, "")
		}
	}
}

// notSavedAgain logs a save of what skipped as unchanged since file (stop: the stop's save,
// logged as such; a periodic one at debug).
func (s *Stage) notSavedAgain(what, file string, stop bool) {
	ev := s.deps.Log.Debug()
	if stop {
		ev = s.deps.Log.Info()
	}
	ev.Str("file", file).Msg(what + " unchanged since the newest file: not written again (the next start loads that file)")
}

// keysDigest is the digest of the keys' state that encodeKeyStatesContext would write of n
// keys in each's order, fleet's pool (a fleetCopy; nil: empty) and stream position pos, under
// the stage's features and configuration (on the stage's goroutine: keysDigestOf elsewhere).
func (s *Stage) keysDigest(n int, each func(func(*keyState) bool), fleet *fleetTail, pos uint64) uint64 {
	sum, _ := keysDigestOf(context.Background(), s.ext.seed, s.features, &s.cfg, n, each, fleet, pos) // (no error: the context never ends)
	return sum
}

// liveKeysDigest is keysDigest of the stage's keys and fleet's pool as they are, at stream
// position pos, ending when ctx does (keysDigestOf).
func (s *Stage) liveKeysDigest(ctx context.Context, pos uint64) (uint64, error) {
	k := s.keyed
	return keysDigestOf(ctx, s.ext.seed, s.features, &s.cfg, len(k.keys), k.lru.eachWhile, k.fleet.fleetCopy(), pos)
}

// keysDigestOf is keysDigest under seed, features and cfg (copies: a reload changes the stage's),
// ending when ctx does (looked at before the first key and every 256 keys after it: a stop's
// deadline), with ctx.Err(); each stops when its function returns false.
func keysDigestOf(ctx context.Context, seed maphash.Seed, features []string, cfg *Config, n int, each func(func(*keyState) bool), fleet *fleetTail, pos uint64) (uint64, error) {
	var h maphash.Hash
	h.SetSeed(seed)
	var e sealed.Encoder
	encodeKeyHeader(&e, features, cfg)
	h.Write(e.Payload())
	var b [8]byte
	u64 := func(v uint64) {
		for i := range b {
			b[i] = byte(v >> (8 * i))
		}
		h.Write(b[:])
	}
	u64(pos)
	u64(uint64(n))
	var err error
	i := 0
	each(func(st *keyState) bool {
		if i%256 == 0 {
			if err = ctx.Err(); err != nil {
				return false
			}
		}
		i++
		u64(uint64(len(st.key)))
		h.WriteString(st.key)
		u64(uint64(uint32(st.partition)))
		u64(uint64(st.size))
		u64(uint64(st.next))
		u64(uint64(st.since))
		for _, c := range st.cols { // (the whole ring: a slot past size changed saves once more, no harm)
			u64(uint64(len(c)))
			h.Write(f32Bytes(c))
		}
		u64(uint64(st.sig.n))
		h.Write(u64Bytes(st.sig.bits))
		if st.warming != nil { // (nothing written for a key that never warmed: its hash as before)
			u64(uint64(st.warming.count))
			h.Write(u64Bytes(st.warming.ring.bits))
		}
		u64(uint64(st.cap.n))
		u64(uint64(st.cap.next))
		u64(uint64(st.cap.filled))
		u64(st.cap.at)
		h.Write(u64Bytes(st.cap.bits)) // (count is the bits set in them)
		maphash.WriteComparable(&h, st.model)
		return true
	})
	if err != nil {
		return 0, err
	}
	if fleet == nil {
		u64(0)
		return h.Sum64(), nil
	}
	u64(fleetShards)
	for i := range fleet.shards {
		sh := &fleet.shards[i]
		u64(uint64(sh.next))
		u64(uint64(sh.size))
		u64(uint64(sh.fresh))
		u64(uint64(math.Float32bits(sh.lo))<<32 | uint64(math.Float32bits(sh.hi)))
		h.Write(f32Bytes(sh.ring[:sh.size])) // (ok follows from size)
	}
	return h.Sum64(), nil
}

// eachOf iterates copied states (keysCopy) in their order, until f returns false.
func eachOf(states []keyState) func(func(*keyState) bool) {
	return func(f func(*keyState) bool) {
		for i := range states {
			if !f(&states[i]) {
				return
			}
		}
	}
}

// f32Bytes and u64Bytes are their slices' memory as bytes, to be hashed (not kept).
func f32Bytes(v []float32) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))
}

func u64Bytes(v []uint64) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 8*len(v))
}
