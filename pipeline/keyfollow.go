package pipeline

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/stages/ingest"
)

// A scorer's share of the keys' models (detect.key_by: key; issue 21 item 3; docs/DESIGN.md
// "Models per key").
//
// Where a key's model lies: the builder writes it to the model topic's partition
// keyModelPartition(q, m), q the input partition of the key's latest record (which the builder
// sees: no partitioner is re-implemented) and m the model topic's partition count. Partition 0
// holds the global model's chunks; the keys of input partition q go to 1 + q mod (m-1), so on a
// model topic of input partitions + 1 (what `outlierd topics create` makes with key_by) each
// input partition's keys have a partition of their own, and a scorer reads the keys' models of
// its input partitions only. On a topic of one partition (one made before) every key is on
// partition 0 beside the global model, and a scorer reads every key's message (as before); on
// one of fewer partitions, input partitions share one and a scorer reads the keys of the
// others sharing its ones too, decoding only its own.
//
// What it assumes: every record of a key is on one input partition, the one the producers'
// partitioner picks for the key (Kafka's default partitioner with a fixed partition count
// does), so the partition a key's model names is the one its records come from. When a key's
// records move to another partition (partitions added to the input topic) the builder
// writes its model to the new partition's place and a tombstone to the old one's.
//
// Following: a scorer follows, from each assignment of its consumer group on, the model
// partitions of its input partitions, each from its first message and then on (a key's newer
// model reaches it as the builder writes it), and reads nothing before its first assignment
// (it holds no key's model until then: memory bounded by its share). A rebalance stops the
// followers of the model partitions no longer needed (the detect goroutine drops their keys),
// starts those of the partitions moved in, and leaves the others reading on: what a scorer
// holds is not read again. Where partitions moved in share a model partition already
// followed (fewer model partitions than input ones), that partition is read once more up to
// its end now, for their keys only. The generation's fetch waits (at most keyRestoreWait) until
// the partitions moved in are read to the ends they had: a key with a model on the topic never
// has a record scored by the global model for want of it.

// keyModelPartition is the model topic partition of the keys of input partition q on a model
// topic of m partitions (q < 0: a message for partition 0, a key's old place on a one-partition
// layout).
func keyModelPartition(q int32, m int) int {
	if m <= 1 || q < 0 {
		return 0
	}
	return 1 + int(q)%(m-1)
}

// keyModelBalancer writes each key model message to its partition (keyModelPartition of its
// partition header; Kafka numbers a topic's partitions 0..n-1).
func keyModelBalancer() kafka.Balancer {
	return kafka.BalancerFunc(func(msg kafka.Message, partitions ...int) int {
		return keyModelPartition(keyPartition(msg), len(partitions))
	})
}

// modelTopicPartitions is the model topic's partition count now (each broker asked within
// brokerAttemptWait, from the one that answered last where cfg.answered is set).
func modelTopicPartitions(ctx context.Context, cfg modelTopicConfig, dialer *kafka.Dialer) (int, error) {
	var last error
	from, n := cfg.answered.first(), len(cfg.brokers)
	for i := range n {
		at := (from + i) % n
		b := cfg.brokers[at]
		ps, err := lookupPartitions(ctx, dialer, b, cfg.topic)
		if err == nil && len(ps) == 0 {
			err = fmt.Errorf("broker %s: topic %q has no partitions (does it exist?)", b, cfg.topic)
		}
		if err == nil {
			cfg.answered.answered(at)
			return len(ps), nil
		}
		last = err
	}
	return 0, fmt.Errorf("model topic %q: partitions: %w", cfg.topic, last)
}

// partitionOffsets are partition mp's first and end offsets now (each broker's leader asked
// within brokerAttemptWait, from the one that answered last where cfg.answered is set).
func partitionOffsets(ctx context.Context, cfg modelTopicConfig, dialer *kafka.Dialer, mp int) (first, end int64, err error) {
	var last error
	from, n := cfg.answered.first(), len(cfg.brokers)
	for i := range n {
		at := (from + i) % n
		conn, err := dialLeader(ctx, dialer, cfg.brokers[at], cfg.topic, mp)
		if err != nil {
			last = err
			continue
		}
		first, end, err = readOffsets(ctx, conn, conn.RemoteAddr().String())
		conn.Close()
		if err == nil {
			cfg.answered.answered(at)
			return first, end, nil
		}
		last = err
	}
	return 0, 0, fmt.Errorf("model topic %q partition %d: offsets: %w", cfg.topic, mp, last)
}

// scopeChannels are the detect goroutine's signals of the keys' models ready, of a rebalance
// and of KeyVersions' requests (nil where the role has none); called by that goroutine before
// its first batch, it gives the stage its partitions and their assignment's generation (a
// record of one moved away opens no alert group, but an away group of its key that lives one
// generation: detect/alert_away.go).
func (p *Pipeline) scopeChannels() (keyReady, scopeChanged <-chan struct{}, keyQuery chan chan map[string]uint64) {
	if p.scope != nil {
		scopeChanged = p.scope.changed
		if p.det != nil {
			p.det.OwnPartitions(p.scope.owns)
		}
	}
	if p.keys != nil {
		keyReady, keyQuery = p.keys.ready, p.keyQuery
	}
	return keyReady, scopeChanged, keyQuery
}

// rebalance is the detect goroutine's turn at a rebalance: the batches in flight (drainer,
// overlapped; their records fetched before it) finish and go on first, so that the groups
// their records open go with the others of their partition (rebalanced). ok is false when the
// loop must stop, with err where the stage failed.
func (p *Pipeline) rebalance(drainer Overlapped, send func([]*batch.Batch) bool) (ok bool, err error) {
	if drainer != nil {
		ready, err := drainer.Drain()
		if err != nil {
			return false, fmt.Errorf("pipeline: detect: %w", err)
		}
		if !send(ready) {
			return false, nil
		}
	}
	p.rebalanced()
	return true, nil
}

// pendingRebalance takes a rebalance signalled and not read yet (rebalance), before the next
// fetched batch is scored: its generation's fetch started after the signal (the source's
// assignment callback returns first), and the detect loop's select picks either.
func (p *Pipeline) pendingRebalance(changed <-chan struct{}, drainer Overlapped, send func([]*batch.Batch) bool) (ok bool, err error) {
	select {
	case <-changed:
		return p.rebalance(drainer, send)
	default:
		return true, nil
	}
}

// rebalanced is the detect goroutine's turn at a rebalance: the alert groups of the partitions
// that were not the instance's throughout since the last one (left, even if back now; or a
// generation missed: keyScope.stayed) are forgotten, then a scorer's keys of the partitions
// moved away dropped (those back keep their models: their followers read them again).
func (p *Pipeline) rebalanced() {
	gen, known := p.det.AlertsGeneration()
	p.det.DropAlertsOutside(p.scope.stayed(gen, known, p.det.AlertsRestored(), p.det.AlertsTaken))
	if p.keys == nil {
		return
	}
	if n := p.det.DropKeysOutside(p.scope.keep); n > 0 {
		p.log.Info().Int("keys", n).Msg("scorer: keys' models of the partitions moved away dropped")
	}
}

// followerScope is a model partition's follower's context and its cancel.
type followerScope struct {
	ctx  context.Context
	stop context.CancelFunc
}

// keyFollowers are a scorer's readers of the model partitions of its input partitions.
type keyFollowers struct {
	p      *Pipeline
	ctx    context.Context
	cancel context.CancelFunc
	dialer *kafka.Dialer

	// slow, in tests, runs before each message is handled (a slow model topic).
	slow func()
	// decodeWorkers is how many goroutines decode a partition's messages (0: GOMAXPROCS).
	decodeWorkers int

	mu     sync.Mutex
	m      int                   // the model topic's partitions at the last assignment
	live   map[int]followerScope // model partition -> its follower's
	wg     sync.WaitGroup
	closed bool
}

func (p *Pipeline) newKeyFollowers(work context.Context) (*keyFollowers, error) {
	dialer := kafka.DefaultDialer
	if sec := p.cfg.modelTopic().security; sec.Enabled() {
		d, err := sec.Dialer()
		if err != nil {
			return nil, fmt.Errorf("model topic: %w", err)
		}
		dialer = d
	}
	ctx, cancel := context.WithCancel(work)
	return &keyFollowers{p: p, ctx: ctx, cancel: cancel, dialer: dialer, live: map[int]followerScope{}}, nil
}

// close stops every follower and waits for them.
func (k *keyFollowers) close() {
	k.cancel() // (first: start may be retrying under mu)
	k.mu.Lock()
	k.closed = true
	k.mu.Unlock()
	k.wg.Wait()
}

// followAssignments makes a scorer's keys follow its source's assignment; a source that
// reports none makes it keep every key. An assignment's wait for its keys' models, and the
// followers' start (its retries of the model topic's partitions), end with stopping (the soft
// stop: nothing more is fetched to score with them), too: the source may have heard its first
// assignment already, and then both run here, in the role's start, before Run's stages exist
// (TestScorerStopsWhileRestoringKeysRealBroker, TestScorerStopsWhileModelTopicUnreachableRealBroker).
func (p *Pipeline) followAssignments(stopping <-chan struct{}) {
	src, ok := p.src.(Assigning)
	if !ok {
		p.scope.mu.Lock()
		p.scope.all = true
		p.scope.mu.Unlock()
		p.keyFollow.start(func(m int) map[int][]int32 {
			all := map[int][]int32{}
			for mp := range m {
				all[mp] = nil
			}
			return all
		}, nil, stopping)
		return
	}
	src.OnAssigned(func(a ingest.Assignment) {
		parts := a.Partitions
		added := p.scope.set(a)
		p.log.Info().Ints32("partitions", parts).Ints32("moved_in", added).Msg("scorer: keeps the keys' models of its partitions")
		start := time.Now()
		restoring := p.keyFollow.start(func(m int) map[int][]int32 {
			need := map[int][]int32{}
			for _, q := range parts {
				mp := keyModelPartition(q, m)
				need[mp] = append(need[mp], q)
			}
			return need
		}, added, stopping)
		if restoring == nil { // closed or stopping
			return
		}
		// The generation's fetch starts when this returns: first the keys' models of the
		// partitions moved in (bounded: a model topic that cannot be read does not stop the
		// scoring; their records are scored by the global model until the models come).
		waited := make(chan struct{})
		go func() {
			restoring.Wait()
			close(waited)
		}()
		select {
		case <-waited:
			if len(added) > 0 {
				p.log.Info().Ints32("moved_in", added).Dur("took", time.Since(start)).Msg("scorer: keys' models of the partitions moved in read; fetching them")
			}
		case <-time.After(keyRestoreWait):
			p.log.Warn().Ints32("moved_in", added).Dur("waited", keyRestoreWait).
				Msg("scorer: keys' models of the partitions moved in not read yet; fetching them anyway (their records scored by the global model until their models come)")
		case <-p.keyFollow.ctx.Done():
		case <-stopping:
		}
	})
}

// keyRestoreWait bounds how long a rebalance's fetch waits for the keys' models of the
// partitions moved in (about 1.1 s for 16,667 keys' models on the dev machine: BENCHMARKS §13.2.1).
const keyRestoreWait = 30 * time.Second

// start makes the followers those of the model partitions need names (model partition -> the
// input partitions of this scorer there), given the model topic's partition count: it stops
// the others, starts the missing ones, and reads again, for the input partitions added only,
// a followed partition that partitions added share. The model topic's partition count is
// retried until it is read, the followers close or stopping is closed; restoring is nil when
// it gave up so (or the followers were closed), nothing started.
func (k *keyFollowers) start(need func(m int) map[int][]int32, added []int32, stopping <-chan struct{}) (restoring *sync.WaitGroup) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return nil
	}
	retry, cancel := context.WithCancel(k.ctx)
	defer cancel()
	go func() {
		select {
		case <-stopping:
			cancel()
		case <-retry.Done():
		}
	}()
	var m int // read at each assignment: partitions added to the model topic move the keys
	var run failureRun
	for attempt := 1; ; attempt++ {
		var err error
		if m, err = modelTopicPartitions(retry, k.p.followedTopic(), k.dialer); err == nil {
			if e := run.answered(&k.p.log, time.Now()); e != nil {
				e.Msg("scorer: read the model topic's partitions after failed attempts")
			}
			break
		}
		run.fail(time.Now())
		if e := run.warning(&k.p.log, err, time.Now()); e != nil {
			e.Msg("scorer: reading the model topic's partitions failed; retrying")
		}
		if !backoff(retry, attempt) {
			return nil
		}
	}
	restoring = &sync.WaitGroup{}
	if m != k.m {
		for mp, f := range k.live { // every key's place changed: read again
			f.stop()
			delete(k.live, mp)
		}
		if m == 1 {
			k.p.log.Warn().Str("model_topic", k.p.cfg.Run.ModelTopic).
				Msg("scorer: the model topic has one partition: every scorer reads every key's model (a model topic of the input's partitions + 1, as outlierd topics create makes it with detect.key_by, lets each read only its own)")
		}
		k.m = m
	}
	want := need(k.m)
	for mp, f := range k.live {
		if _, ok := want[mp]; !ok {
			f.stop()
			delete(k.live, mp)
		}
	}
	for mp, qs := range want {
		f, ok := k.live[mp]
		if !ok {
			ctx, stop := context.WithCancel(k.ctx)
			k.live[mp] = followerScope{ctx, stop}
			restoring.Add(1)
			k.wg.Go(func() { k.follow(ctx, mp, qs, k.p.scope.keep, false, restoring.Done) })
			continue
		}
		var again []int32
		for _, q := range qs {
			if slices.Contains(added, q) {
				again = append(again, q)
			}
		}
		if len(again) > 0 { // (fewer model partitions than input ones)
			keep := func(q int32) bool { return slices.Contains(again, q) && k.p.scope.keep(q) }
			restoring.Add(1)
			k.wg.Go(func() { k.follow(f.ctx, mp, again, keep, true, restoring.Done) })
		}
	}
	return restoring
}

// follow reads model partition mp from its first message, handing the key models of the
// input partitions keep takes to the detect goroutine, until ctx ends (once: until the end it
// had when it started), retrying failures with backoff from where it was (each exchange with a
// broker bounded: partitionReader, which asks first the broker the scorer's model follower
// learnt; the backoff from its start once a message was read since the last failure; the
// warnings paced, failureRun); it logs when it has read what the partition held at its start
// (the restore of its keys) and calls restored then (or when it ends before).
func (k *keyFollowers) follow(ctx context.Context, mp int, qs []int32, keep func(int32) bool, once bool, restored func()) {
	restoredOnce := sync.OnceFunc(restored)
	defer restoredOnce()
	p, cfg := k.p, k.p.followedTopic()
	log := p.log.With().Str("model_topic", cfg.topic).Int("model_partition", mp).Ints32("partitions", qs).Logger()
	start, next, done, read := time.Now(), int64(-1), false, int64(0)
	readKey, skips := p.keyReaderSkips(keep, log)
	dec := newDecoders(readKey, k.decodeWorkers)
	defer dec.close()
	// One reader for every attempt (partread.go: every exchange with a broker bounded): a failed
	// read hangs up, and the next dials again from where it was (what it read before the failure
	// handed out first), asking first the broker that answered last (cfg.answered). The
	// partition's offsets are asked on its connection (Ends): one dial an attempt.
	r := newPartitionReader(cfg, k.dialer, mp, kafka.FirstOffset, p.log)
	defer r.Close()
	end := int64(0)
	for attempt := 1; ctx.Err() == nil; attempt++ {
		readBefore := read
		var err error
		if !done { // (the restore's end; past it only the reader asks the broker: a silent one once)
			var first int64
			if first, end, err = r.Ends(ctx); err == nil && next < first {
				next = first // (compaction or retention removed what was below)
			}
		}
		if err == nil {
			err = func() error {
				for {
					if !done && next >= end {
						done = true
						dec.wait()
						restoredOnce()
						skips.flush()
						log.Info().Int64("records_read", read).Dur("took", time.Since(start)).Msg("scorer: keys' models of its partitions read from the model topic")
						if once {
							return nil
						}
					}
					msg, err := r.ReadMessage(ctx)
					if err != nil {
						return err
					}
					if k.slow != nil {
						k.slow()
					}
					next = msg.Offset + 1
					read++
					p.stats.KeyModelsRead.Add(1)
					if p.metrics != nil {
						p.metrics.AddKeyModelsRead(1)
					}
					if isKeyModel(msg) {
						dec.do(msg)
					}
				}
			}()
		}
		if err == nil || ctx.Err() != nil || errors.Is(err, context.Canceled) {
			return
		}
		if read > readBefore { // (read on since the last failure: the backoff starts again)
			attempt = 1
		}
		p.readFailed(followerKeys)
		if e := r.warning(&log, err); e != nil {
			e.Int("attempt", attempt).Int64("offset", next).Msg("scorer: reading the keys' models failed; retrying")
		}
		if !backoff(ctx, attempt) {
			return
		}
	}
}

// decoders decode key model messages on as many goroutines as the process has CPUs: a
// restore is bound by decoding (BENCHMARKS §13.2.1). A key's messages go to one goroutine, in
// the partition's order: the detect goroutine takes the inbox whenever it is ready, and the
// inbox forgets what was taken, so a key's model decoded after its newer tombstone was taken
// (the key not held then) would be installed again (TestKeyDecodersKeepAKeysOrder). Between
// keys the order does not matter.
type decoders struct {
	jobs    []chan kafka.Message // by a hash of the message key
	pending sync.WaitGroup       // messages handed out and not decoded yet
	workers sync.WaitGroup
}

func newDecoders(handle func(kafka.Message), n int) *decoders {
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	d := &decoders{jobs: make([]chan kafka.Message, n)}
	for i := range d.jobs {
		jobs := make(chan kafka.Message, 4)
		d.jobs[i] = jobs
		d.workers.Go(func() {
			for m := range jobs {
				handle(m)
				d.pending.Done()
			}
		})
	}
	return d
}

// do hands msg to its key's decoder.
func (d *decoders) do(msg kafka.Message) {
	h := fnv.New32a()
	h.Write(msg.Key)
	d.pending.Add(1)
	d.jobs[h.Sum32()%uint32(len(d.jobs))] <- msg
}

// wait returns once every message handed out is decoded.
func (d *decoders) wait() { d.pending.Wait() }

// close decodes what is handed out and stops the decoders.
func (d *decoders) close() {
	for _, jobs := range d.jobs {
		close(jobs)
	}
	d.workers.Wait()
}
