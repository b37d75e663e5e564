package pipeline

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/outlierd/outlierd/internal/core/atomicfile"
	"github.com/outlierd/outlierd/internal/core/sealed"
	"github.com/outlierd/outlierd/stages/detect"
)

// A builder's record of its scan of the model topic (detect.state_dir; keystale.go).
//
// The scan reads every key model message of the model topic at each start: 12-20 s at 100,000
// keys of 8 features, minutes at a million (docs/BENCHMARKS.md §13.2.5). With detect.state_dir
// the builder writes, once its scan has ended, the offset the scan read to on each model
// partition (past the bound on the keys held, that of the first stale key not held:
// keyscanbound.go) and the keys it found stale there (not yet tombstoned), in the file
// model-topic-scan.state, and the next start reads on from those offsets with those keys: every
// message below them was judged already, and what came since (its own models, mostly, and its
// tombstones) is judged as the scan judges it. That is the state a scan from the start would
// have at those offsets, so the findings are the same (TestStaleScanResumesFromTheRecord).
//
// The record is kept under the identity of what the judgment depends on (scanIdentity: the
// keys' model formats the release reads, the keys' models' header of the configuration, its
// derived columns, the topic, its brokers and its partitions): any change of them reads the
// topic from the start again. A model partition whose first offset is now above the record's
// (records deleted, retention) or whose end is below it (the topic deleted and created again: its offsets start at 0) is read from its start
// too; a compacted partition reads correctly from any offset above its first, the messages
// compaction removed passed over. What it cannot tell: a topic recreated and written past the
// recorded offsets before the builder's start (by another writer: the builder itself was not
// running). The offsets recorded are the scan's, moved on through the builder's own writes
// (keyscanadvance.go), not by its catch-ups (tombstoneStale): a catch-up judges the keys found
// stale alone, so a key of another configuration published after the scan is first judged at
// the next start's reading from the record.
const (
	scanStateName   = "model-topic-scan.state"
	scanStateMagic  = "\x89ODMS\r\n\x1a"
	scanStateFormat = 1
	// scanJudgment is the judgment's own version (keystale.go's otherConfiguration): raise it
	// when a release judges a key's model otherwise, so that its builders read the topic whole
	// once instead of going on from a record of the former judgment (a new keys' model format
	// needs none: the identity holds detect.KeyModelFormat).
	scanJudgment = 1
	// scanStateMaxText bounds a key's or a reason's length read back (a key's model's key is at
	// most 65,536 bytes: detect's maxKeyLength).
	scanStateMaxText = 1 << 16
)

var scanStateFile = sealed.Format{Magic: scanStateMagic, Name: "outlierd model topic scan record", Newest: scanStateFormat, MaxPayload: 1 << 36}

// scanRecord is what a builder's scan left in state_dir: per model partition, the offset every
// message below which was judged, and the keys found stale there (by model partition).
type scanRecord struct {
	ends  map[int]int64
	found map[int]map[staleRef]staleKey
}

// scanIdentity is what the judgment of the keys' models on the topic depends on: the judgment's
// version, the newest keys' model format the release reads (a message of a format above it is
// passed over as not the builder's to judge; a release that reads it judges it), the keys'
// models' header of the builder's configuration (its features, derived columns' names included,
// and keys' settings but keys.min_records, which a scorer's check passes over), its derived
// columns' definitions, the topic, its bootstrap brokers (another cluster's topic of the same
// name is another topic) and its m partitions.
func (p *keyPublisher) scanIdentity(m int) [32]byte {
	return p.scanIdentityReading(m, detect.KeyModelFormat)
}

// scanIdentityReading is scanIdentity for a release that reads the keys' models' formats up to
// readable.
func (p *keyPublisher) scanIdentityReading(m int, readable uint32) [32]byte {
	h := sha256.New()
	var e sealed.Encoder
	e.U32(scanJudgment)
	e.U32(readable) // (a message of a format above it is not judged: otherConfiguration)
	det := p.detect
	det.Keys.MinRecords = 0 // (in the header, not in the judgment: a change of it reads nothing again)
	e.Raw(detect.KeyModelHeader(p.features, &det))
	e.Text(p.cfg.derived)
	e.Text(p.cfg.topic)
	brokers := slices.Sorted(slices.Values(p.cfg.brokers))
	e.U32(uint32(len(brokers)))
	for _, b := range brokers {
		e.Text(b)
	}
	e.U32(uint32(m))
	h.Write(e.Payload())
	return [32]byte(h.Sum(nil))
}

// encodeScanRecord is the record's payload: the identity, the ends and the stale keys (their
// reasons once each).
func encodeScanRecord(id [32]byte, ends map[int]int64, found map[staleRef]staleKey) []byte {
	var e sealed.Encoder
	e.Raw(id[:])
	e.U32(uint32(len(ends)))
	for _, mp := range slices.Sorted(maps.Keys(ends)) {
		e.U32(uint32(mp))
		e.U64(uint64(ends[mp]))
	}
	reasons := map[string]uint32{}
	var texts []string
	for _, sk := range found {
		if _, ok := reasons[sk.reason]; !ok {
			reasons[sk.reason] = uint32(len(texts))
			texts = append(texts, sk.reason)
		}
	}
	e.U32(uint32(len(texts)))
	for _, r := range texts {
		e.Text(r)
	}
	e.U64(uint64(len(found)))
	for ref, sk := range found {
		e.U32(uint32(ref.mp))
		e.Text(ref.key)
		e.U32(uint32(sk.part)) // (-1 as 2^32-1: read back as int32)
		e.U64(sk.version)
		e.U32(reasons[sk.reason])
	}
	return e.Payload()
}

// errScanIdentity is decodeScanRecord's for a record of another identity.
var errScanIdentity = errors.New("written for another configuration, model topic or partition count")

// decodeScanRecord reads a payload of encodeScanRecord written under id.
func decodeScanRecord(payload []byte, id [32]byte) (*scanRecord, error) {
	d := sealed.NewDecoder(payload)
	if got := d.Take(32, "identity"); d.Err() == nil && [32]byte(got) != id {
		return nil, errScanIdentity
	}
	rec := &scanRecord{ends: map[int]int64{}, found: map[int]map[staleRef]staleKey{}}
	n := d.U32("partitions")
	for i := uint32(0); i < n && d.Err() == nil; i++ {
		mp, end := d.U32("model partition"), d.U64("offset")
		if d.Err() == nil && (int(mp) < 0 || int64(end) < 0) {
			return nil, fmt.Errorf("model partition %d: offset %d out of range", mp, int64(end))
		}
		rec.ends[int(mp)] = int64(end)
	}
	nr := d.U32("reasons")
	var texts []string
	for i := uint32(0); i < nr && d.Err() == nil; i++ {
		texts = append(texts, d.Text(scanStateMaxText, "reason"))
	}
	nk := d.U64("stale keys")
	for i := uint64(0); i < nk && d.Err() == nil; i++ {
		mp, key := d.U32("model partition"), d.Text(scanStateMaxText, "key")
		part, version, r := int32(d.U32("input partition")), d.U64("version"), d.U32("reason")
		if d.Err() != nil {
			break
		}
		if _, ok := rec.ends[int(mp)]; !ok || int(r) >= len(texts) {
			return nil, fmt.Errorf("stale key %q: model partition %d or reason %d not in the record", key, mp, r)
		}
		if rec.found[int(mp)] == nil {
			rec.found[int(mp)] = map[staleRef]staleKey{}
		}
		rec.found[int(mp)][staleRef{int(mp), key}] = staleKey{part: part, version: version, reason: texts[r]}
	}
	if d.Err() == nil && d.Left() != 0 {
		return nil, fmt.Errorf("%d unread bytes at the end", d.Left())
	}
	if err := d.Err(); err != nil {
		return nil, err
	}
	return rec, nil
}

// loadScanRecord is state_dir's record of the last scan under this configuration and m model
// partitions (nil: none, another identity's, or one that does not read, logged; the scan
// reads the topic from the start).
func (p *keyPublisher) loadScanRecord(m int) *scanRecord {
	if p.stale.dir == "" {
		return nil
	}
	path := filepath.Join(p.stale.dir, scanStateName)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		p.log.Info().Str("file", path).Msg("builder: no record of an earlier scan of the model topic in detect.state_dir: it is read from the start")
		return nil
	}
	var rec *scanRecord
	if err == nil {
		var payload []byte
		_, payload, err = scanStateFile.Read(f)
		f.Close()
		if err == nil {
			rec, err = decodeScanRecord(payload, p.scanIdentity(m))
		}
	}
	switch {
	case errors.Is(err, errScanIdentity):
		p.log.Info().Str("file", path).Msg("builder: the record of the last scan of the model topic was " + err.Error() + ": the topic is read from the start")
		return nil
	case err != nil:
		p.log.Warn().Err(err).Str("file", path).Msg("builder: the record of the last scan of the model topic does not read: the topic is read from the start")
		return nil
	}
	held := 0
	for _, f := range rec.found {
		held += len(f)
	}
	if held > 0 && p.staleFull(held-1) { // (past the bound: keyscanbound.go; detect.keys.max_keys lowered since)
		p.log.Info().Str("file", path).Int("stale_keys", held).Int("keys_max", p.detect.Keys.MaxKeys).
			Msg("builder: the record of the last scan of the model topic holds more stale keys than detect.keys.max_keys: the topic is read from the start")
		return nil
	}
	return rec
}

// saveScanRecord writes the scan's ends and findings to state_dir (a failure is logged: the
// next start reads from the last record written, or from the start).
func (p *keyPublisher) saveScanRecord(ctx context.Context, m int, ends map[int]int64, found map[staleRef]staleKey) {
	if p.stale.dir == "" {
		return
	}
	path := filepath.Join(p.stale.dir, scanStateName)
	payload := encodeScanRecord(p.scanIdentity(m), ends, found)
	err := os.MkdirAll(p.stale.dir, 0o755)
	if err == nil {
		_, err = atomicfile.Write(ctx, path, func(w io.Writer) error { return scanStateFile.WriteContext(ctx, w, scanStateFormat, payload) })
	}
	if err != nil {
		p.log.Warn().Err(err).Str("file", path).Msg("builder: the record of the scan of the model topic not written: the next start reads from the last one written, or from the start")
		return
	}
	p.log.Debug().Str("file", path).Int("stale_keys", len(found)).Int("bytes", len(payload)).Msg("builder: the record of the scan of the model topic written")
}

// resumeFrom is the offset the scan of model partition mp reads from, given the record's end
// for it (< 0: none) and the partition's first and end offsets now, and why it reads from the
// start instead ("": it does not, or there is no record).
func resumeFrom(recorded, first, end int64) (int64, string) {
	switch {
	case recorded < 0:
		return -1, ""
	case recorded < first:
		return -1, "the partition's first offset " + strconv.FormatInt(first, 10) + " is past the recorded " + strconv.FormatInt(recorded, 10) + " (records deleted)"
	case recorded > end:
		return -1, "the partition's end " + strconv.FormatInt(end, 10) + " is below the recorded " + strconv.FormatInt(recorded, 10) + " (the topic recreated?)"
	}
	return recorded, ""
}
