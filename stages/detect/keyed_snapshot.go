package detect

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/outlierd/outlierd/internal/core/sealed"
)

// The keys' state (key_by: key) in detect.state_dir and on the model topic (issue 21 item 3).
//
// Keys' state file, format version 1 (sealed envelope: magic, version, payload length, payload,
// SHA-256; little-endian), written as keys-<sequence>.osnap beside the global model's snapshots:
//
//	payload: keyHeader, then count u64, count x {
//	           key (length u32, bytes), partition u32 (the input partition of its latest record),
//	           size u32 (records in the key's window, <= keys.window),
//	           window: dims x size f32 (oldest first), size x u8 (significant: 0 or 1),
//	           since u32 (records since the key's last build),
//	           alarm cap: next u32, filled u32, keys.window x u8 (flagged: 0 or 1),
//	           model u8 (0: none yet, 1: encodeRanker follows) }
//
// Format 2 is format 1 with the detectors' weights at the end of each encodeRanker
// (snapshot_rank.go); a format-1 key's model is read with equal weights, as it was built.
// Format 3 is format 2 with the stream position of the save (position u64, seriesAlarms.pos)
// after keyHeader and each key's cap's position (at u64, alarmCap.at: 0 none) after its alarm
// flags, so that a restored key whose last record was flagged hands its flag back to the global
// model's path at its eviction (keyed_handover.go; the alarm state file, alarm_state.go, holds
// the rest of the alarms); a key of format 1 or 2 has none, as before.
// Format 4 is format 3 with the fleet's pool (keys.tail: fleet; keyed_fleet_state.go) after the
// keys: 4 bytes more under keys.tail: own, 131,396 with the pool full; a file of format 1 to 3
// starts the pool empty, as every restart did before.
//
//	keyHeader: dims u32, dims x feature name (length u32, UTF-8), keys.window u32,
//	           keys.min_records u32, keys.k u32, score.detectors (text), score.combine (text)
//
// A key's model on the model topic (one message per key, EncodeKeyModel): magic
// "\x89ODKM\r\n\x1a", format version 2 (1: without the weights, as above), payload keyHeader, key (length u32, bytes), version u64,
// then encodeRanker. Both are refused, with the reason, when the header differs from the
// configuration (the features, keys.window/k, score.detectors/combine shape a key's model), as
// the global snapshot is (ErrSnapshotMismatch); a file or message that does not read back whole
// is refused with ErrSnapshotFormat. keys.min_records is written but not compared: it decides
// when a cold key's first model is built, nothing of a model, and its default has moved (50,
// 40, 30): compared, every key started cold at such an upgrade, and a scorer refused the models
// of a builder not yet updated (TestKeysStateAcrossMinRecords). A cold key that holds the new
// value's records builds at its next record.
const (
	keysSnapshotMagic = "\x89ODKS\r\n\x1a"
	keyModelMagic     = "\x89ODKM\r\n\x1a"
	// KeysSnapshotFormat is the newest keys' state format this code reads and writes.
	KeysSnapshotFormat = 4
	// KeyModelFormat is the newest format of a key's model on the model topic.
	KeyModelFormat = 2
	keysPrefix     = "keys-"
	maxKeyLength   = 1 << 16
)

var (
	keysSnapshotFile = sealed.Format{Magic: keysSnapshotMagic, Name: "outlierd keys' state snapshot", Newest: KeysSnapshotFormat, MaxPayload: maxSnapshotPayload}
	keyModelFile     = sealed.Format{Magic: keyModelMagic, Name: "outlierd key model", Newest: KeyModelFormat, MaxPayload: 1 << 32}
)

// encodeKeyHeader writes what shapes the keys' models: the features and the keys' settings.
func encodeKeyHeader(e *sealed.Encoder, features []string, cfg *Config) {
	e.U32(uint32(len(features)))
	for _, f := range features {
		e.Text(f)
	}
	e.U32(uint32(cfg.Keys.Window))
	e.U32(uint32(cfg.Keys.MinRecords))
	e.U32(uint32(cfg.Keys.K))
	e.Text(string(cfg.Score.Detectors))
	e.Text(string(cfg.Score.Combine))
}

// KeyModelHeader is the header EncodeKeyModel writes for features and cfg: what a key's model's
// fit to a configuration is judged by (CheckKeyModel). Equal headers judge every key's model
// alike (a builder's record of its scan of the model topic is kept under it: pipeline).
func KeyModelHeader(features []string, cfg *Config) []byte {
	var e sealed.Encoder
	encodeKeyHeader(&e, features, cfg)
	return e.Payload()
}

// checkKeyHeader reads a header and says how it differs from features and cfg (nil: it fits).
func checkKeyHeader(d *sealed.Decoder, features []string, cfg *Config) error {
	dims := d.U32("dims")
	if d.Err() == nil && (dims < 1 || dims > maxSnapshotDims) {
		return snapErr("dims %d out of range [1, %d]", dims, maxSnapshotDims)
	}
	names := make([]string, 0, dims)
	for j := uint32(0); j < dims && d.Err() == nil; j++ {
		names = append(names, d.Text(maxSnapshotName, "feature name"))
	}
	w, _, k := d.U32("keys.window"), d.U32("keys.min_records"), d.U32("keys.k") // (min_records: above)
	det, comb := d.Text(64, "score.detectors"), d.Text(64, "score.combine")
	if d.Err() != nil {
		return sealedErr(d.Err())
	}
	if !slices.Equal(names, features) {
		return fmt.Errorf("%w: keys' models built for features [%s], the stream has [%s]", ErrSnapshotMismatch,
			strings.Join(names, " "), strings.Join(features, " "))
	}
	var diff []string
	cmp := func(name string, a, b uint32) {
		if a != b {
			diff = append(diff, fmt.Sprintf("%s %d -> %d", name, a, b))
		}
	}
	cmp("keys.window", w, uint32(cfg.Keys.Window))
	cmp("keys.k", k, uint32(cfg.Keys.K))
	if det != string(cfg.Score.Detectors) || comb != string(cfg.Score.Combine) {
		diff = append(diff, fmt.Sprintf("score.detectors/combine %s/%s -> %s/%s", det, comb, cfg.Score.Detectors, cfg.Score.Combine))
	}
	if len(diff) > 0 {
		return fmt.Errorf("%w: keys' models built with other settings (%s)", ErrSnapshotMismatch, strings.Join(diff, ", "))
	}
	return nil
}

// checkKeyRanker refuses a key's model that its settings cannot have built.
func checkKeyRanker(r *Ranker, cfg *Config) error {
	// (A key's sample R of m records has k = min(keys.k, m-1) neighbours.)
	if r.Params.Detectors != cfg.Score.Detectors || r.Params.Combine != cfg.Score.Combine || r.Params.K != cfg.Keys.K || r.Ref.K > cfg.Keys.K {
		return snapErr("a key's model of score %+v (k %d) under keys.k %d", r.Params, r.Ref.K, cfg.Keys.K)
	}
	return nil
}

// EncodeKeyModel is a key's model r as one model-topic message value (the format above).
func EncodeKeyModel(features []string, cfg *Config, key string, version uint64, r *Ranker) ([]byte, error) {
	var e sealed.Encoder
	encodeKeyHeader(&e, features, cfg)
	e.Text(key)
	e.U64(version)
	encodeRanker(&e, r, true)
	var b bytes.Buffer
	if err := keyModelFile.Write(&b, KeyModelFormat, e.Payload()); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// DecodeKeyModel reads a value of EncodeKeyModel, refusing one that does not fit features and
// cfg (ErrSnapshotMismatch) or does not read back whole (ErrSnapshotFormat).
func DecodeKeyModel(value []byte, features []string, cfg *Config) (key string, version uint64, r *Ranker, err error) {
	format, p, err := keyModelFile.Read(bytes.NewReader(value))
	if err != nil {
		return "", 0, nil, sealedErr(err)
	}
	d := sealed.NewDecoder(p)
	if err := checkKeyHeader(d, features, cfg); err != nil {
		return "", 0, nil, err
	}
	key = d.Text(maxKeyLength, "key")
	version = d.U64("version")
	if d.Err() != nil {
		return "", 0, nil, sealedErr(d.Err())
	}
	if r, err = decodeRanker(d, features, format >= 2); err == nil {
		err = checkKeyRanker(r, cfg)
		r.noteKey(key)
	}
	if err == nil && d.Left() != 0 {
		err = snapErr("%d unread bytes at the end of a key's model", d.Left())
	}
	if err != nil {
		return "", 0, nil, fmt.Errorf("key %q: %w", key, err)
	}
	return key, version, r, nil
}

// CheckKeyModel says whether a value of EncodeKeyModel was built for features and cfg, reading
// its envelope (checksum included) and header only, not the model: nil when it was,
// ErrSnapshotMismatch with the reason when it was built for other features or keys' settings
// (what DecodeKeyModel refuses it for), ErrSnapshotFormat when it does not read back (corrupt,
// of a newer format). A builder's scan of the model topic for its keys' models of another
// configuration (pipeline) reads every key's message so, at the cost of a checksum each.
func CheckKeyModel(value []byte, features []string, cfg *Config) error {
	_, p, err := keyModelFile.Read(bytes.NewReader(value))
	if err != nil {
		return sealedErr(err)
	}
	return checkKeyHeader(sealed.NewDecoder(p), features, cfg)
}

// encodeKeys is the payload of the keys' state file: every key, least recently seen first (so
// that decoding them in order rebuilds the recency order).
// (at stream position 0: the tests').
func (k *keyedScorer) encodeKeys(features []string, cfg *Config) []byte {
	return encodeKeyStates(k.keysCopy(), k.fleet.fleetCopy(), 0, features, cfg)
}

// keysCopy copies every key's state, least recently seen first, for an encoding elsewhere: the
// windows, bits and caps (the next batch changes them); the models are shared (a key's model is
// replaced, never changed).
func (k *keyedScorer) keysCopy() []keyState {
	out, _ := k.keysCopyContext(context.Background()) // (no error: the context never ends)
	return out
}

// keysCopyContext is keysCopy ending when ctx does (every 256 keys: a stop's deadline), with
// ctx.Err() (about 0.1 s at 100,000 keys).
func (k *keyedScorer) keysCopyContext(ctx context.Context) ([]keyState, error) {
	out := make([]keyState, 0, len(k.keys))
	var err error
	k.lru.eachWhile(func(st *keyState) bool {
		if len(out)%256 == 0 {
			if err = ctx.Err(); err != nil {
				return false
			}
		}
		c := keyState{key: st.key, partition: st.partition, size: st.size, next: st.next, since: st.since,
			model: st.model, sig: st.sig.clone(), warming: st.warming.clone(), cols: make([][]float32, len(st.cols))}
		for j := range st.cols {
			c.cols[j] = slices.Clone(st.cols[j])
		}
		capCopy := st.cap.clone()
		c.cap = &capCopy
		out = append(out, c)
		return true
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// encodeKeyStates is encodeKeys of copied states (keysCopy) and fleet's pool (fleetCopy; nil:
// empty) at stream position pos, but the keys longer than a key read back may be (maxKeyLength;
// the messages' keys have no bound): one would make the whole file unreadable, every key cold
// after a restart; it alone starts cold instead.
func encodeKeyStates(states []keyState, fleet *fleetTail, pos uint64, features []string, cfg *Config) []byte {
	p, _ := encodeKeyStatesContext(context.Background(), states, fleet, pos, features, cfg) // (no error: the context never ends)
	return p
}

// encodeKeyStatesContext is encodeKeyStates ending when ctx does (every 256 keys: a stop's
// deadline), with ctx.Err().
func encodeKeyStatesContext(ctx context.Context, states []keyState, fleet *fleetTail, pos uint64, features []string, cfg *Config) ([]byte, error) {
	states = slices.DeleteFunc(states, func(st keyState) bool { return len(st.key) > maxKeyLength })
	var e sealed.Encoder
	encodeKeyHeader(&e, features, cfg)
	e.U64(pos)
	e.U64(uint64(len(states)))
	for i := range states {
		if i%256 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		st := &states[i]
		w := st.sig.len()
		e.Text(st.key)
		e.U32(uint32(st.partition))
		e.U32(uint32(st.size))
		first := (st.next - st.size + w) % w
		for _, c := range st.cols {
			for i := range st.size {
				e.U32(math.Float32bits(c[(first+i)%w]))
			}
		}
		for i := range st.size { // (the record's significance, and its warming as the byte's second bit: keyed_warmup.go)
			e.Raw([]byte{boolByte(st.sig.at((first+i)%w)) | boolByte(st.warmingAt((first+i)%w))<<1})
		}
		e.U32(uint32(st.since))
		e.U32(uint32(st.cap.next))
		e.U32(uint32(st.cap.filled))
		for i := range st.cap.ring().len() {
			e.Raw([]byte{boolByte(st.cap.ring().at(i))})
		}
		e.U64(st.cap.at)
		if st.model == nil {
			e.Raw([]byte{0})
			continue
		}
		e.Raw([]byte{1})
		encodeRanker(&e, st.model, true)
	}
	encodeFleet(&e, fleet)
	return e.Payload(), nil
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// decodeKeys reads a keys' state payload of this format version into k (empty, of the stage's
// settings); it returns the stream position the state was saved at (0: a format without one).
func (k *keyedScorer) decodeKeys(ctx context.Context, format uint32, p []byte, features []string, cfg *Config) (uint64, error) {
	d := sealed.NewDecoder(p)
	if err := checkKeyHeader(d, features, cfg); err != nil {
		return 0, err
	}
	dims, w := len(features), cfg.Keys.Window
	least := 21 + w
	var at uint64
	if format >= 3 {
		at = d.U64("position")
		least += 8
	}
	n := d.U64("key count")
	// A key takes at least its length, partition, size, since, cap and model flag: a count the
	// payload cannot hold is refused before any allocation.
	if d.Err() == nil && n > uint64(d.Left())/uint64(least) {
		return 0, snapErr("%d keys cannot fit in the %d bytes left", n, d.Left())
	}
	flag := func(what string) (bool, error) {
		b := d.Take(1, what)
		if d.Err() != nil {
			return false, sealedErr(d.Err())
		}
		if b[0] > 1 {
			return false, snapErr("%s is %d, want 0 or 1", what, b[0])
		}
		return b[0] == 1, nil
	}
	for i := range n {
		if i%256 == 0 { // (a start's stop: 100,000 keys take seconds)
			if err := ctx.Err(); err != nil {
				return 0, err
			}
		}
		key := d.Text(maxKeyLength, "key")
		partition := int32(d.U32("partition"))
		size := int(d.U32("window size"))
		if d.Err() != nil {
			return 0, sealedErr(d.Err())
		}
		if size > w {
			return 0, snapErr("key %q holds %d records, keys.window is %d", key, size, w)
		}
		if _, dup := k.keys[key]; dup {
			return 0, snapErr("key %q twice", key)
		}
		st := k.state(key, cfg, dims)
		st.partition = partition
		for j := range dims {
			copy(st.cols[j], d.F32s(uint64(size), "window values"))
		}
		var err error
		for i := range size {
			b := d.Take(1, "significance")
			if d.Err() != nil {
				return 0, sealedErr(d.Err())
			}
			if b[0] > 3 {
				return 0, snapErr("key %q, record %d of %d: significance is %d, want 0 to 3 (its bit 1: the record was warming)", key, i, size, b[0])
			}
			st.sig.set(i, b[0]&1 != 0)
			if b[0]&2 != 0 && st.warming == nil {
				k.bytes += warmRingBytes(w) // (counted as the stage counts it: append)
			}
			st.noteWarming(i, b[0]&2 != 0)
		}
		st.size, st.next = size, size%w
		st.since = int32(min(d.U32("records since the key's build"), math.MaxInt32))
		next, filled := d.U32("alarm cap position"), d.U32("alarm cap filled")
		if d.Err() == nil && (next >= uint32(w) || filled > uint32(w)) {
			return 0, snapErr("key %q: alarm cap at %d, filled %d, of %d", key, next, filled, w)
		}
		st.cap.next, st.cap.filled = int32(next), int32(filled)
		for i := range st.cap.ring().len() {
			f, err := flag("alarm flag")
			if err != nil {
				return 0, err
			}
			st.cap.ring().set(i, f)
			if f {
				st.cap.count++
			}
		}
		if format >= 3 {
			if st.cap.at = d.U64("alarm cap position"); d.Err() == nil && st.cap.at > at {
				return 0, snapErr("key %q: alarm cap at position %d, the stream at %d", key, st.cap.at, at)
			}
		}
		model, err := flag("model flag")
		if err != nil || !model {
			if err != nil {
				return 0, err
			}
			continue
		}
		r, err := decodeRanker(d, features, format >= 2)
		if err == nil {
			err = checkKeyRanker(r, cfg)
			r.noteKey(key)
		}
		if err != nil {
			return 0, fmt.Errorf("key %q: %w", key, err)
		}
		st.model = r
		k.markWarm(st)
	}
	if d.Err() != nil {
		return 0, sealedErr(d.Err())
	}
	if format >= 4 {
		f, err := decodeFleet(d)
		if err != nil {
			return 0, err
		}
		if f != nil {
			k.fleet = *f
		}
	}
	if d.Left() != 0 {
		return 0, snapErr("%d unread bytes at the end of the keys' state", d.Left())
	}
	return at, nil
}

// loadKeys installs the newest keys' state of state_dir that reads back whole and fits the
// stage's features and keys' settings (the others are logged and skipped, as model snapshots),
// then the newest alarm state (loadAlarms), the keys' caps' positions moved to its stream
// position.
func (s *Stage) loadKeys(ctx context.Context) error {
	d := s.ext.snaps
	if d == nil {
		return nil
	}
	at, err := s.loadKeyStates(ctx, d)
	if err != nil {
		return err
	}
	if s.deps.Role == RoleBuilder {
		return nil
	}
	return s.loadAlarms(ctx, at)
}

// loadKeyStates is loadKeys' keys' state; it returns the stream position the state was saved at.
func (s *Stage) loadKeyStates(ctx context.Context, d *SnapshotDir) (uint64, error) {
	if s.keyed == nil || s.deps.Role == RoleScorer {
		return 0, nil
	}
	s.keysQuiet()
	files, err := d.list(keysPrefix)
	if err != nil {
		return 0, err
	}
	for _, path := range files {
		k := s.newKeyed()
		var at uint64
		var newest bool
		err := readSealedFileVetted(ctx, path, keysSnapshotFile, keyHeaderVet(s.features, &s.cfg), func(format uint32, p []byte) (err error) {
			at, err = k.decodeKeys(ctx, format, p, s.features, &s.cfg)
			newest = format == KeysSnapshotFormat
			return err
		})
		if ctx.Err() != nil { // cut by a stop: the file is not the worse for it
			return 0, ctx.Err()
		}
		if err != nil {
			s.deps.Log.Warn().Err(err).Str("file", path).Msg("keys' state snapshot skipped")
			s.ext.keysSkipped = append(s.ext.keysSkipped, SkippedSnapshot{Path: path, Reason: err})
			continue
		}
		s.keyed.takeStateOf(k)
		if newest { // (as the file holds it: noteLoaded checks that the rest of the load left it so)
			sum, err := s.liveKeysDigest(ctx, at)
			if err != nil { // cut by a stop, as the read
				return 0, err
			}
			s.ext.saved.set(&s.ext.saved.keys, sum, path)
		}
		for _, st := range s.keyed.keys { // published again by a builder: it may have died before
			if st.model != nil {
				s.keyed.markDirty(st)
			}
		}
		st := s.keyed.stats()
		s.deps.Log.Info().Str("file", path).Int("keys", st.Live+st.Warming).Int("warm", st.Live).
			Msg("keys' state loaded from snapshot: warm keys score with their own models at once")
		return at, nil
	}
	return 0, nil
}

// keyHeadRead is how much of a keys' state payload keyHeaderVet reads: a header of a hundred
// features of 1,000 bytes each fits; a longer one is checked after the whole read, as before.
const keyHeadRead = 1 << 17

// keyHeaderVet refuses a keys' state file built for other features or keys' settings by its
// header (checkKeyHeader on the payload's first keyHeadRead bytes), before its body is read and
// checksummed: at a million keys a file is 12.7 GB, and after a change of ingest.features every
// file of state_dir (up to 3) was read whole at the start to be discarded (minutes). What it
// cannot decide (a header longer than what it read, or one that does not decode) it lets
// through to the whole read. A header corrupt into another configuration's is refused as a
// mismatch rather than by its checksum: skipped either way.
func keyHeaderVet(features []string, cfg *Config) func(uint32, []byte) error {
	return func(_ uint32, head []byte) error {
		if err := checkKeyHeader(sealed.NewDecoder(head), features, cfg); errors.Is(err, ErrSnapshotMismatch) {
			return err
		}
		return nil
	}
}

// readSealedFile reads path, a file of format sf, and decodes its payload; ctx ends the read
// (sealed.ReadContext: a stop during the start), its error then ctx's.
func readSealedFile(ctx context.Context, path string, sf sealed.Format, decode func(format uint32, p []byte) error) error {
	return readSealedFileVetted(ctx, path, sf, nil, decode)
}

// readSealedFileVetted is readSealedFile that refuses the file by the payload's head when vet
// (nil: none) does, before the rest is read (sealed.ReadContextVetted; keyHeadRead bytes).
func readSealedFileVetted(ctx context.Context, path string, sf sealed.Format, vet func(uint32, []byte) error, decode func(format uint32, p []byte) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("detect: %s: %w", sf.Name, err)
	}
	defer f.Close()
	format, p, err := sf.ReadContextVetted(ctx, bufio.NewReader(f), keyHeadRead, vet)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	switch {
	case err == nil:
		err = decode(format, p)
	case !errors.Is(err, ErrSnapshotMismatch): // (vet's refusal is already the stage's)
		err = sealedErr(err)
	}
	if err != nil && !errors.Is(err, ErrSnapshotFormat) && !errors.Is(err, ErrSnapshotMismatch) {
		err = fmt.Errorf("%w: %w", ErrSnapshotFormat, err)
	}
	return err
}

// SkippedKeys are the keys' state files NewStage passed over, with the reasons (newest first).
func (s *Stage) SkippedKeys() []SkippedSnapshot { return s.ext.keysSkipped }

// KeyModelBound is the most bytes EncodeKeyModel takes for a key of keyLen bytes under cfg: a
// key's model holds at most keys.window records in its tails, its sample and its calibrations.
func KeyModelBound(features []string, cfg *Config, keyLen int) int {
	d, w := len(features), cfg.Keys.Window
	names := 0
	for _, f := range features {
		names += 4 + len(f)
	}
	// (score.weights is a live change that key models follow at their next build: a model
	// built under either value may be sent under the other, so the longer name is counted.)
	weights := max(len(WeightsAgreement), len(WeightsEqual))
	score := 2*(4+len(cfg.Score.Detectors)) + 2*(4+len(cfg.Score.Combine)) + 4 + weights + 16
	head := sealed.HeaderSize + sealed.SumSize + 4 + names + 12 + score + 4 + keyLen + 8
	return head + 8 + d*(8+4*w) + 3*8*d + 12 + 4*d*w + 3*(16+8*w)
}
