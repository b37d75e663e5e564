package pipeline

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/outlierd/outlierd/stages/detect"
)

// The keys' models of another configuration on the model topic (detect.key_by: key).
//
// After ingest.features, ingest.derive or a keys' setting changed, every key's model on the
// topic was built for the old configuration: the builder's new models replace those of the keys
// it sees again (compaction keeps a key's newest message), and the others stayed for good, read,
// skipped and counted in a warning at every scorer's start, the topic's disk never shrinking (a
// builder whose keys' state was of the old configuration does not know those keys, so it never
// evicts them). So a builder reads, at each start and beside its work, every key model message
// on the topic (the partitions of the keys' models, or partition 0 of a one-partition topic) to
// the end it had (with detect.state_dir, those since its last scan's record: keyscanstate.go),
// and notes the keys whose newest message is a model a scorer of the builder's
// configuration would skip as built for another one: other features or keys' settings
// (detect.CheckKeyModel), or other derived columns (headerColumns; a message without the header,
// of a release before it, is judged by its features alone, as scorers judge it). Once a global
// model of the builder's configuration is on the topic (read at the start, or the builder's
// first publication), it writes a tombstone for each of those keys that it has not published
// since its start, and compaction removes both. Such a tombstone carries headerKeyStale: a
// scorer passes over it (keyReaderSkips), keeping the model it holds, since only a scorer of
// another configuration than the builder's can hold that model, and it can still score with it
// (a rolling change: the builder first, the scorers after; its global model is likewise kept by
// a scorer that skips the new one). Its version header is the stale model's own, so that a
// scorer of a release before the header, which installs only a version above the one it holds
// (detect.Stage.InstallKeyModels), keeps the model too. A corrupt message, or one of a format this release does not
// read (a newer builder's), is not the builder's to judge: it stays.
const (
	// headerKeyStale, on a key's tombstone, says the builder removes a model of another
	// configuration than its own (the value says which), not a key it evicted.
	headerKeyStale = "outlierd-key-stale"
	// staleLogKeys is how many stale keys a log line names.
	staleLogKeys = 10
	// staleFetchBytes is the scan's fetch size: a read of the whole topic, in fewer round trips
	// than a follower's fetches (BenchmarkStaleScanRealBroker).
	staleFetchBytes = 16 << 20
	// staleRetry is how long a failed write of the stale keys' tombstones waits to be retried.
	staleRetry = 5 * time.Second
)

// staleRef is a stale key's message's place: the model topic partition and the key.
type staleRef struct {
	mp  int
	key string
}

// staleKey is what a stale key's tombstone needs: its input partition header (the balancer's
// way to mp), the stale model's version and why it is stale.
type staleKey struct {
	part    int32
	version uint64
	reason  string
}

// staleKeys are a builder's scan's findings and what the tombstones wait for.
type staleKeys struct {
	mu      sync.Mutex
	found   map[staleRef]staleKey // the stale keys not tombstoned yet (nil until the scan ends)
	scanned bool
	serving bool // a global model of the builder's configuration is on the topic
	m       int  // the model topic's partitions at the scan
	// ends are, per model partition scanned, the offset its reading reached (the scan's end,
	// then each catch-up's: catchUp); dialer reads on from there.
	ends   map[int]int64
	dialer *kafka.Dialer
	// owned are the input partitions the builder is assigned (ownedKnown: an assignment was
	// heard, or the source reports none: every partition).
	owned      map[int32]bool
	ownedKnown bool
	due        bool // something changed since the last look (tombstoneStale)
	// dir is detect.state_dir ("": none), where the scan's record is kept (keyscanstate.go);
	// read is the messages the scan read (its log's messages_read; tests).
	dir  string
	read int
	// The bound on found (keyscanbound.go): judged is, per model partition, the offset below
	// which every message was judged with its stale keys held (the record's), over where a
	// stale key not held for the bound lay (the next pass reads on from there; empty: none);
	// pass wakes the scan's goroutine for a pass, which assigns and passAssigns (the
	// assignments heard, then at the last pass) tell whether one can make progress; passes
	// counts them and onPass, if set, hears each (metrics).
	judged, over         map[int]int64
	pass                 chan struct{}
	assigns, passAssigns int
	passes               int
	onPass               func()
}

// scanStale reads the key model messages of the model topic's partitions (m of them: the keys'
// ones, or 0 alone when m is 1) to the ends they had, retrying failures with backoff until ctx
// ends, and hands the keys whose newest message is a model of another configuration to the
// publisher (which tombstones them once a global model of its configuration is out). With
// detect.state_dir it reads on from where the last scan's record says (keyscanstate.go) and
// writes its own once it has ended.
func (p *keyPublisher) scanStale(ctx context.Context, dialer *kafka.Dialer, m int) {
	parts := []int{0}
	if m > 1 {
		parts = parts[:0]
		for mp := 1; mp < m; mp++ {
			parts = append(parts, mp)
		}
	}
	start := time.Now()
	rec := p.loadScanRecord(m)
	found, read, reasons, ends := map[staleRef]staleKey{}, 0, map[string]string{}, map[int]int64{}
	resumed, over, notHeld := 0, map[int]int64{}, 0
	for _, mp := range parts {
		for attempt := 1; ; attempt++ {
			from := rec.resume(mp)
			from.retry = attempt > 1
			sr, err := p.scanPartition(ctx, dialer, mp, from, true, found, reasons)
			if err == nil {
				read += sr.read
				ends[mp] = sr.end
				if sr.over >= 0 {
					over[mp], notHeld = sr.over, notHeld+sr.notHeld
				}
				if sr.fellBack != "" {
					p.log.Info().Int("model_partition", mp).Str("why", sr.fellBack).
						Msg("builder: the model partition is read from its start, not from the record of the last scan")
				} else if sr.resumed {
					resumed++
				}
				break
			}
			if ctx.Err() != nil {
				return
			}
			p.log.Warn().Err(err).Int("model_partition", mp).Int("attempt", attempt).
				Msg("builder: reading the keys' models on the model topic for those of another configuration failed; retrying")
			if !backoff(ctx, attempt) {
				return
			}
		}
	}
	judged := judgedTo(ends, over)
	if ctx.Err() == nil && p.stale.dir != "" { // (a stop as the scan ended: the last record written still holds)
		p.saveScanRecord(ctx, m, judged, found)
		p.advance.begin(m, judged, found) // (then moved on through the publisher's writes: keyscanadvance.go)
	}
	ev := p.log.Info()
	if len(found) > 0 {
		ev = p.log.Warn().Strs("first_keys", staleNames(found))
	}
	ev.Int("messages_read", read).Int("partitions_read_on_from_the_record", resumed).Int("partitions", len(parts)).
		Int("other_configuration", len(found)).Dur("took", time.Since(start)).
		Msg("builder: keys' models on the model topic read; those built for another configuration are tombstoned once a model of this configuration is on the topic")
	p.logOver(over, notHeld, len(found), 0)
	p.stale.mu.Lock()
	p.stale.found, p.stale.scanned, p.stale.m, p.stale.due = found, true, m, true
	p.stale.ends, p.stale.dialer, p.stale.read = ends, dialer, read
	p.stale.judged, p.stale.over, p.stale.pass = judged, over, make(chan struct{}, 1)
	p.stale.mu.Unlock()
	p.signal()
	p.passes(ctx, dialer, m, reasons)
}

// assigned tells the publisher the builder's input partitions (nil with all: every one, a
// source that reports no assignment): a stale key is tombstoned by the builder that owns its
// partition. With two builders in the group (each then has part of the partitions), one's
// tombstone could otherwise follow the other's new model of the key, removing it.
func (p *keyPublisher) assigned(parts []int32, all bool) {
	p.stale.mu.Lock()
	p.stale.ownedKnown, p.stale.owned, p.stale.due = true, nil, true
	p.stale.assigns++
	if !all {
		p.stale.owned = map[int32]bool{}
		for _, q := range parts {
			p.stale.owned[q] = true
		}
	}
	p.stale.mu.Unlock()
	p.signal()
}

// scanRead is what scanPartition read: the messages, the partition's end (read to), and, when
// it was to read on from a record's offset, whether it did (resumed) or why it read from the
// partition's start instead (fellBack).
type scanRead struct {
	read     int
	end      int64
	resumed  bool
	fellBack string
	// over is the offset of the first stale key's message not held for the bound (-1: none),
	// notHeld how many such messages were read (all only: keyscanbound.go).
	over    int64
	notHeld int
}

// scanPartition notes in found the keys of model partition mp whose newest message is a model of
// another configuration (removing those whose newer message is not), reading to the partition's
// end. reasons holds each reason once (a key's entry shares it).
//
// all (the scan) judges every key: from the partition's first offset (from.offset < 0), or on
// from a record's (from.found: the keys it found stale then, added to found), unless the
// partition's first offset is past it or its end below it (resumeFrom): then from its first,
// with none of the record's keys. Without all (a catch-up: tombstoneStale) it reads on from
// from.offset and only the keys already in found are judged again: the messages since the
// scan are mostly the builder's own models, whose checksums a second time would cost about as
// much as the scan; a key of another configuration published since (a builder of the old
// configuration still running) waits for the next start's scan.
func (p *keyPublisher) scanPartition(ctx context.Context, dialer *kafka.Dialer, mp int, from scanFrom, all bool, found map[staleRef]staleKey, reasons map[string]string) (scanRead, error) {
	conn, err := dialPartition(ctx, p.cfg, dialer, mp)
	if err != nil {
		return scanRead{}, err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()
	first, end, err := readOffsets(ctx, conn, conn.RemoteAddr().String())
	if err != nil {
		return scanRead{}, err
	}
	sr := scanRead{over: -1}
	if all {
		for ref := range found { // (a failed attempt's)
			if from.retry && ref.mp == mp {
				delete(found, ref)
			}
		}
		var off int64
		if off, sr.fellBack = resumeFrom(from.offset, first, end); off >= 0 {
			sr.resumed = true
			for ref, sk := range from.found { // (mp's alone: scanRecord.resume)
				if r, ok := reasons[sk.reason]; ok {
					sk.reason = r
				} else {
					reasons[sk.reason] = sk.reason
				}
				found[ref] = sk
			}
		}
		from.offset = off
	}
	first = max(first, from.offset)
	sr.end = end
	err = readRange(ctx, conn, first, end, max(p.cfg.maxMessageBytes*2, staleFetchBytes), func(msg kafka.Message) {
		sr.read++
		if !isKeyModel(msg) {
			return
		}
		ref := staleRef{mp, string(msg.Key[len(keyModelPrefix):])}
		if _, known := found[ref]; !all && !known {
			return // (a catch-up judges the keys found stale alone: no model decoded for the others)
		}
		if why := p.otherConfiguration(msg); why != "" {
			if _, held := found[ref]; !held && p.staleFull(len(found)) {
				if sr.over < 0 { // (held keys are judged on: one's newer message may free its place)
					sr.over = msg.Offset
				}
				sr.notHeld++
				return
			}
			if r, ok := reasons[why]; ok {
				why = r
			} else {
				reasons[why] = why
			}
			found[ref] = staleKey{part: keyPartition(msg), version: keyModelVersion(msg), reason: why}
		} else {
			delete(found, ref)
		}
	})
	if err != nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	return sr, err
}

// scanFrom is where scanPartition reads from: an offset (< 0: the partition's first) and, read
// on from a record's, the keys the record found stale on the partition; retry: an attempt
// before failed (its findings on the partition are dropped first).
type scanFrom struct {
	offset int64
	found  map[staleRef]staleKey
	retry  bool
}

// resume is where the record says model partition mp's scan reads on from (its offset -1 when
// the record has none for mp).
func (r *scanRecord) resume(mp int) scanFrom {
	if r == nil {
		return scanFrom{offset: -1}
	}
	end, ok := r.ends[mp]
	if !ok {
		return scanFrom{offset: -1}
	}
	return scanFrom{offset: end, found: r.found[mp]}
}

// otherConfiguration says why msg, a key model message, holds a model a scorer of the builder's
// configuration skips as built for another one ("": it does not, or it is a tombstone, or it
// does not read: not the builder's to judge).
func (p *keyPublisher) otherConfiguration(msg kafka.Message) string {
	if msg.Value == nil {
		return ""
	}
	err := detect.CheckKeyModel(msg.Value, p.features, &p.detect)
	if err == nil {
		pub, said := headerValue(msg, headerColumns)
		err = derivedMismatch(pub, said, p.cfg.derived)
	}
	if !errors.Is(err, detect.ErrSnapshotMismatch) {
		return ""
	}
	return err.Error()
}

// modelServing tells the publisher a global model of its configuration is on the topic (read at
// the start, or published): the stale keys' tombstones may go.
func (p *keyPublisher) modelServing() {
	p.stale.mu.Lock()
	was := p.stale.serving
	p.stale.serving, p.stale.due = true, true
	p.stale.mu.Unlock()
	if !was {
		p.signal()
	}
}

// tombstoneStale writes, once the scan has ended, a global model of the builder's configuration
// is on the topic and the builder's partitions are known, a tombstone (headerKeyStale) for each
// stale key of its partitions that it has not published to the same place since its start (its
// newer model there replaced the stale one). Called by run before a publication: a key of that
// publication gets its model after the tombstone. The keys of other partitions wait for an
// assignment that gives them; a failure is logged and its keys retried in staleRetry.
//
// The scan's findings age: before the tombstones, each model partition they lie on is read
// again from where the last reading ended (catching up), and a key whose newer message is not a
// model of another configuration is left. Without that, a key of a partition another builder
// owned until a rebalance gave it to this one (or one of the keys of a release before the
// partition header, any builder's) got its tombstone after the other builder's new model of
// it, and compaction removed that model (TestStaleTombstoneSparesAnotherBuildersModelRealBroker).
// What is left is the time between that reading and the write (milliseconds), in which only a
// builder that still holds the partition after this one was given it could publish the key.
// The cost: what was published since the last reading is read again (the builder's own models,
// mostly, not decoded: scanPartition) on run's goroutine, whose publications wait for it; at
// the first round that is what the builder published between its start and its first global
// model (or during the scan, when one was found at the start), bounded by the scan's own read.
func (p *keyPublisher) tombstoneStale(ctx context.Context) {
	p.stale.mu.Lock()
	if !p.stale.due || !p.stale.scanned || !p.stale.serving || !p.stale.ownedKnown {
		p.stale.mu.Unlock()
		return
	}
	if len(p.stale.found) == 0 {
		p.stale.due = false
		p.nextPass(true) // (a scan cut at the bound with nothing left held: on to the rest)
		p.stale.mu.Unlock()
		return
	}
	p.stale.due = false
	m, owned, found, ends, dialer := p.stale.m, p.stale.owned, p.stale.found, p.stale.ends, p.stale.dialer
	p.stale.mu.Unlock()
	held := len(found) // (fewer after the round: room for a pass past the bound)
	// (found and ends are run's alone once the scan handed them over: only the flags are shared.)
	ours := func(sk staleKey) bool { return owned == nil || sk.part < 0 || owned[sk.part] }
	catch := map[int]bool{}
	for ref, sk := range found {
		if ours(sk) {
			catch[ref.mp] = true
		}
	}
	for mp := range catch {
		sr, err := p.scanPartition(ctx, dialer, mp, scanFrom{offset: ends[mp]}, false, found, map[string]string{})
		if err != nil {
			if ctx.Err() == nil {
				p.log.Warn().Err(err).Int("model_partition", mp).Msg("keys' models of another configuration: reading the model topic again before their tombstones failed; retried in a few seconds")
				p.stale.mu.Lock()
				p.stale.due = true
				p.stale.mu.Unlock()
				time.AfterFunc(staleRetry, p.signal)
			}
			return
		}
		ends[mp] = sr.end
	}
	p.stale.mu.Lock()
	var refs []staleRef
	todo := map[staleRef]staleKey{}
	for ref, sk := range found {
		if !ours(sk) {
			continue // (another builder's, or one to come at a rebalance; a model without the header: any builder's)
		}
		delete(found, ref)
		if q, ok := p.placed[ref.key]; ok && keyModelPartition(q, m) == ref.mp {
			continue // (published there since the start: its model replaced the stale one)
		}
		refs = append(refs, ref)
		todo[ref] = sk
	}
	if len(refs) == 0 {
		p.nextPass(len(found) < held)
		p.stale.mu.Unlock()
		return
	}
	p.stale.mu.Unlock()
	slices.SortFunc(refs, func(a, b staleRef) int {
		if a.mp != b.mp {
			return a.mp - b.mp
		}
		return strings.Compare(a.key, b.key)
	})
	msgs := make([]kafka.Message, len(refs))
	reasons := map[string]int{}
	for i, ref := range refs {
		sk := todo[ref]
		reasons[sk.reason]++
		part := sk.part
		if keyModelPartition(part, m) != ref.mp { // (its header points elsewhere now: the place it lies at)
			part = int32(ref.mp - 1)
		}
		v := []byte(strconv.FormatUint(sk.version, 10)) // (the stale model's: a scorer of an earlier release keeps it too)
		msgs[i] = kafka.Message{Key: []byte(keyModelPrefix + ref.key), Headers: []kafka.Header{{Key: headerKeyModelVersion, Value: v},
			{Key: headerKeyPartition, Value: []byte(strconv.Itoa(int(part)))}, {Key: headerKeyStale, Value: []byte(staleHeader(sk.reason))}}}
	}
	if err := p.w.WriteMessages(ctx, msgs...); err != nil {
		if ctx.Err() == nil {
			p.log.Warn().Err(err).Int("keys", len(msgs)).Msg("keys' models of another configuration not tombstoned; retried in a few seconds")
		}
		p.stale.mu.Lock()
		maps.Copy(p.stale.found, todo) // (a key published meanwhile is left out at the retry)
		p.stale.due = true
		p.stale.mu.Unlock()
		time.AfterFunc(staleRetry, p.signal)
		return
	}
	p.log.Info().Int("keys", len(msgs)).Strs("first_keys", staleNames(todo)).Interface("why", reasons).
		Msg("keys' models of another configuration tombstoned on the model topic (compaction removes them; a scorer of the old configuration keeps what it holds)")
	p.stale.mu.Lock()
	p.nextPass(true)
	p.stale.mu.Unlock()
}

// staleHeader is headerKeyStale's value: the reason, cut to 512 bytes (a message's headers
// count towards sink.max_message_bytes; a tombstone has room).
func staleHeader(reason string) string {
	if len(reason) > 512 {
		return reason[:509] + "..."
	}
	return reason
}

// staleNames are the first staleLogKeys stale keys, in the order of the key, then the model
// partition (a log line's): kept as found, not formatted and sorted all (at 1,000,000 stale
// keys that was about as much memory again as the keys: TestStaleNamesBounded).
func staleNames(found map[staleRef]staleKey) []string {
	cmp := func(a, b staleRef) int {
		if c := strings.Compare(a.key, b.key); c != 0 {
			return c
		}
		return a.mp - b.mp
	}
	first := make([]staleRef, 0, staleLogKeys+1)
	for ref := range found {
		if len(first) == staleLogKeys && cmp(ref, first[staleLogKeys-1]) >= 0 {
			continue
		}
		i, _ := slices.BinarySearchFunc(first, ref, cmp)
		first = slices.Insert(first, i, ref)
		first = first[:min(len(first), staleLogKeys)]
	}
	names := make([]string, len(first))
	for i, ref := range first {
		names[i] = fmt.Sprintf("%s (model partition %d)", ref.key, ref.mp)
	}
	return names
}
