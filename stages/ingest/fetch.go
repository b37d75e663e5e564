package ingest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/outlierd/outlierd/internal/core/kafkasec"
)

// Fetching in chunks, not message by message.
//
// kafka-go's Reader hands every message from its partition goroutines to FetchMessage over one
// channel: on the 16-core GPU host that hand-off held the pipeline near 500k records/s
// (docs/BENCHMARKS.md §4.7: runtime.selectgo 2.5 s and runtime.lock2 1.4 s of 17 s of CPU, six
// partition goroutines contending for the channel and one consumer waiting on it). The Source
// therefore drives kafka-go's lower layers itself: kafka.ConsumerGroup for membership (joins,
// heartbeats, assignments and the committed offsets they start from: the Reader's own), and per
// assigned partition one goroutine that fetches record batches from the partition leader
// (Dialer.DialLeader, Conn.ReadBatchWith: the Reader's fetch loop, its error cases kept but for
// the few fetchPartition names) and hands them on in chunks of up to Config.BatchSize
// messages: one channel operation per chunk instead of per message. Commits go through the
// live Generation.
//
// Rebalances: when a generation ends (kafka-go's heartbeat saw a rebalance, or the coordinator
// went away), its partition goroutines stop before the next generation starts, the offsets done
// so far are committed with the ending generation (one attempt: the next owner starts from them
// instead of from older ones), and chunks of that generation not yet taken by Next are dropped
// (their records were never registered; the partition's next owner reads them again from the
// committed offset). What Next had already taken stays tracked until the next generation
// starts, which drops it (Source.newGeneration: every partition is read again from the
// committed offset).

// fetchChunks is how many chunks wait between the partition goroutines and Next, beyond the one
// each partition goroutine holds: enough for Next to fill batches while the partitions' next
// fetches are on the wire (with 4, on the 16-core GPU host, the six partition goroutines spent
// 60% of their time waiting to hand a chunk on and then fetched at once, and Next waited 22%
// of its time for them: docs/BENCHMARKS.md §4.9), few enough that memory stays near
// (partitions + fetchChunks) x BatchSize messages.
const fetchChunks = 16

// Retry pacing of the partition goroutines and commits: kafka-go's Reader's defaults
// (ReadBackoffMin/Max, MaxAttempts, the commit retries), so that outages are ridden out as before.
const (
	readBackoffMin  = 100 * time.Millisecond
	readBackoffMax  = time.Second
	readMaxAttempts = 3
	// pastEndAttempts is how many dials in a row find the partition's end below the offset
	// to fetch before the offset is reset (start_offset): about 2.4 s of back-off (more after
	// other failures), enough for a new leader's high watermark to catch up after an election
	// (where the end may be below an offset already read for a moment), far too little for
	// records to refill a recreated topic up to an old offset.
	pastEndAttempts = 5
	// readBatchTimeout bounds the reading of one chunk's messages from a fetch response
	// already under way (kafka-go's ReadBatchTimeout default).
	readBatchTimeout = 10 * time.Second
	// dialLeaderWait bounds a dial of a partition's leader through one bootstrap broker
	// (Dialer.DialLeader: a dial, a metadata request, a dial), which kafka-go bounds by the
	// context alone: a broker that took the request and never answered (seen under load) held
	// the partition's fetch until its generation ended, where the next broker, or the next
	// attempt after the backoff, answers at once. 10 s: the bound of the offsets' requests
	// that follow (readOffsets, kafka-go's Reader's).
	dialLeaderWait   = 10 * time.Second
	commitAttempts   = 3
	commitBackoffMin = 100 * time.Millisecond
	commitBackoffMax = 5 * time.Second
)

// chunk is consecutive messages of one partition from one fetch, or an error of a partition
// goroutine, tagged with the generation that fetched it.
type chunk struct {
	gen  int64        // groupFetcher's sequence number of the generation
	msgs []pendingMsg // fetched and decoded (decodeMsg), in fetch order; Next takes them from the front
	buf  []pendingMsg // msgs as sent, handed back for reuse once Next took all of it (recycle)
	err  error
}

// groupFetcher is the consumer-group member and its partition goroutines.
type groupFetcher struct {
	topic     string
	brokers   []string
	dialer    *kafka.Dialer
	chunkSize int
	maxBytes  int
	// resetLatest is ingest.start_offset latest: an offset past the partition's end is reset
	// to the end (else to the first retained record), as Kafka's auto.offset.reset.
	resetLatest bool
	logf, errf  func(string, ...any)
	// assigned is called with a generation's member id and assignment (its id, its partitions
	// of the topic, ascending) when it starts, before any of them is fetched.
	assigned func(member string, a Assignment)
	// revoked is called when a generation ends while the fetcher is open, after its partition
	// goroutines stopped: the Source commits what is done with that generation.
	revoked func(*kafka.Generation)
	resume  *Resume // where a partition without a committed offset starts (resume.go); nil: as kafka-go says

	cg     *kafka.ConsumerGroup
	chunks chan chunk
	free   chan []pendingMsg // chunks' buffers Next is done with (recycle), for reuse
	// newDecoder makes a partition goroutine's own decoder; newDecoded a record's slots.
	newDecoder func() Decoder
	newDecoded func() *Decoded
	errs       chan error // group errors, offered to a waiting Next as the Reader does (unbuffered)
	stctx      context.Context
	stop       context.CancelFunc
	done       chan struct{} // run returned (the group was left)

	// live is the sequence number of the generation in progress, 0 between generations.
	live atomic.Int64
	// mu guards gen and started.
	mu  sync.Mutex
	gen *kafka.Generation // in progress; nil between generations
	// started is closed when a generation starts; replaced when it ends.
	started chan struct{}
}

func newGroupFetcher(cgc kafka.ConsumerGroupConfig, topic string, chunkSize, maxBytes int,
	newDecoder func() Decoder, newDecoded func() *Decoded,
	logf, errf func(string, ...any), assigned func(string, Assignment), revoked func(*kafka.Generation), resume *Resume) (*groupFetcher, error) {
	cg, err := kafka.NewConsumerGroup(cgc)
	if err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(context.Background())
	f := &groupFetcher{
		topic: topic, brokers: cgc.Brokers, dialer: cgc.Dialer, chunkSize: chunkSize, maxBytes: maxBytes,
		resetLatest: cgc.StartOffset == kafka.LastOffset,
		logf:        logf, errf: errf, assigned: assigned, revoked: revoked, resume: resume,
		cg: cg, chunks: make(chan chunk, fetchChunks), free: make(chan []pendingMsg, fetchChunks), errs: make(chan error),
		newDecoder: newDecoder, newDecoded: newDecoded,
		stctx: ctx, stop: stop, done: make(chan struct{}), started: make(chan struct{}),
	}
	go f.run()
	return f, nil
}

// run takes the group's generations one after the other until close (kafka-go's Reader.run).
func (f *groupFetcher) run() {
	defer close(f.done)
	defer f.cg.Close() // leaves the group
	var seq int64
	failures := 0
	for {
		gen, err := f.cg.Next(f.stctx)
		if err != nil {
			if f.stctx.Err() != nil {
				return
			}
			f.errf("%v", err)
			// The Reader reports every readMaxAttempts-th failure to a waiting FetchMessage and
			// otherwise only logs it; the group keeps trying either way.
			if failures++; failures%readMaxAttempts == 0 {
				select {
				case f.errs <- err:
				default:
				}
			}
			continue
		}
		failures = 0
		seq++
		f.startGeneration(gen, seq)
	}
}

// startGeneration starts fetching the generation's partitions of the topic.
func (f *groupFetcher) startGeneration(gen *kafka.Generation, seq int64) {
	var parts []kafka.PartitionAssignment
	for topic, as := range gen.Assignments {
		if topic == f.topic {
			parts = append(parts, as...)
		}
	}
	f.logf("generation %d of group %s (member %s): fetching %d partitions of %s %v",
		gen.ID, gen.GroupID, gen.MemberID, len(parts), f.topic, parts)
	slices.SortFunc(parts, func(a, b kafka.PartitionAssignment) int { return a.ID - b.ID })
	as := Assignment{Generation: gen.ID, Partitions: make([]int32, len(parts)), Offsets: make([]int64, len(parts))}
	for i, a := range parts {
		as.Partitions[i], as.Offsets[i] = int32(a.ID), a.Offset
	}
	f.assigned(gen.MemberID, as)
	f.mu.Lock()
	f.gen = gen
	f.live.Store(seq)
	close(f.started)
	f.mu.Unlock()
	gen.Start(func(ctx context.Context) {
		fctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for _, a := range parts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				f.fetchPartition(fctx, seq, a.ID, a.Offset)
			}()
		}
		select {
		case <-ctx.Done(): // the generation ended
		case <-f.stctx.Done(): // closing: ends the generation
		}
		// At once, not after the partition goroutines stopped: from here its chunks are
		// dropped and Commit waits for the next generation; this one's last commit, of what
		// is done, follows below.
		f.mu.Lock()
		f.gen = nil
		f.live.Store(0)
		f.started = make(chan struct{})
		f.mu.Unlock()
		cancel()
		wg.Wait()
		if f.stctx.Err() == nil {
			f.revoked(gen)
		}
	})
}

// current returns the generation in progress, waiting for one while the group rebalances.
func (f *groupFetcher) current(ctx context.Context) (*kafka.Generation, error) {
	for {
		f.mu.Lock()
		gen, started := f.gen, f.started
		f.mu.Unlock()
		if gen != nil {
			return gen, nil
		}
		select {
		case <-started:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-f.stctx.Done():
			return nil, io.ErrClosedPipe // as the Reader's commits after Close
		}
	}
}

// next returns the next chunk of messages of the generation in progress, or an error of the
// group or of a partition goroutine; io.EOF once the fetcher is closed.
func (f *groupFetcher) next(ctx context.Context) (chunk, error) {
	for {
		select {
		case <-ctx.Done():
			return chunk{}, ctx.Err()
		case <-f.stctx.Done():
			return chunk{}, io.EOF
		case err := <-f.errs:
			return chunk{}, err
		case c := <-f.chunks:
			if c.gen != f.live.Load() {
				continue // a revoked generation's (see above)
			}
			if c.err != nil {
				if errors.Is(c.err, io.EOF) { // io.EOF means closed (kafka-go's convention)
					c.err = fmt.Errorf("%v: %w", c.err, io.ErrUnexpectedEOF) // (keeping where)
				}
				return chunk{}, c.err
			}
			return c, nil
		}
	}
}

// close stops the partition goroutines, leaves the group and waits for all of it.
func (f *groupFetcher) close() {
	f.stop()
	<-f.done
}

func (f *groupFetcher) send(ctx context.Context, c chunk) error {
	select {
	case f.chunks <- c:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// fetchPartition fetches partition from offset (the group's committed offset, or
// kafka.FirstOffset/LastOffset) until ctx ends, retrying what may heal: kafka-go's reader.run,
// with chunks for messages, except that the back-off grows over reconnections until one
// fetches (the Reader's restarts at 100 ms after each dial), records that cannot be decoded
// are reported (ErrUndecodable; the Reader retried forever unless the codec was unknown), and
// an offset past the end is reset (dialPartition; the Reader waited).
func (f *groupFetcher) fetchPartition(ctx context.Context, seq int64, partition int, offset int64) {
	// badAt is the offset whose record batch could not be decoded, bad how many times in a row;
	// pastEnd counts the dials in a row that found offset past the partition's end.
	badAt, bad, pastEnd := int64(-1), 0, 0
	offset, ok := f.resumeAt(ctx, seq, partition, offset) // (none committed: after the restored window's newest, committed)
	if !ok {
		return
	}
	dec := f.newDecoder()
	for attempt := 0; ; attempt++ {
		if attempt != 0 && !sleepCtx(ctx, backoffDelay(attempt, readBackoffMin, readBackoffMax)) {
			return
		}
		f.logf("fetching partition %d of %s from offset %d", partition, f.topic, offset)
		conn, start, err := f.dialPartition(ctx, partition, offset, pastEnd+1 >= pastEndAttempts)
		if errors.Is(err, kafka.OffsetOutOfRange) {
			pastEnd++
		} else {
			pastEnd = 0
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if !errors.Is(err, kafka.OffsetOutOfRange) && attempt >= readMaxAttempts {
				_ = f.send(ctx, chunk{gen: seq, err: fmt.Errorf("partition %d: starting its fetch at offset %d: %w", partition, offset, err)})
			} else {
				// Past the partition's end: reset after pastEndAttempts (dialPartition). Else
				// the broker may be briefly away: tried readMaxAttempts times before it is
				// reported.
				f.errf("error initializing the fetch of partition %d of %s: %v", partition, f.topic, err)
			}
			continue
		}
		// attempt is reset once the connection fetched (below), not here: a partition whose
		// every connection fails at once (no leader there, an offset out of range, records that
		// cannot be decoded) backs off as one whose dials fail, rather than every 100 ms.
		// When the generation ends or the fetcher closes, a fetch waiting on the broker's long
		// poll (up to fetchLongPoll) is cut short: rebalances and Close need not wait for it.
		stopCut := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
		closeConn := func() {
			stopCut()
			conn.Close()
		}
		offset = start
		errcount := 0
	readLoop:
		for {
			if !sleepCtx(ctx, backoffDelay(errcount, readBackoffMin, readBackoffMax)) {
				closeConn()
				return
			}
			from := offset
			offset, err = f.read(ctx, seq, conn, dec, offset)
			if ctx.Err() != nil { // the generation ended, or the fetcher closed
				closeConn()
				return
			}
			if offset != from || errors.Is(err, io.EOF) {
				attempt = 0 // fetching: a failure from here does not inherit the backoff
			}
			switch {
			case errors.Is(err, io.EOF): // the fetch's records all read
				errcount = 0
				continue
			case errors.Is(err, io.ErrNoProgress): // a corrupted connection: a new one
				f.errf("fetching partition %d of %s at offset %d: %v (reconnecting)", partition, f.topic, offset, err)
				closeConn()
				break readLoop
			case errors.Is(err, kafka.UnknownTopicOrPartition), errors.Is(err, kafka.NotLeaderForPartition):
				f.errf("fetching partition %d of %s at offset %d: %v (finding its leader again)", partition, f.topic, offset, err)
				closeConn()
				break readLoop
			case errors.Is(err, kafka.RequestTimedOut):
				errcount = 0
				continue
			case errors.Is(err, kafka.OffsetOutOfRange):
				// Retention (or DeleteRecords) overtook offset, or the log was truncated below
				// it. The failed fetch leaves its response unread on the connection (the next
				// request there fails: io.ErrNoProgress), so the partition is dialled again,
				// where its first and last offsets decide (dialPartition: skip to the first
				// retained, saying how many records are lost; past the last, wait, then reset).
				f.errf("fetching partition %d of %s at offset %d: %v (reading its first and last offsets again)", partition, f.topic, offset, err)
				closeConn()
				break readLoop
			default:
				var ke kafka.Error
				switch {
				case errors.As(err, &ke): // (Next names the topic)
					_ = f.send(ctx, chunk{gen: seq, err: fmt.Errorf("partition %d at offset %d: %w", partition, offset, err)})
				case connectionError(err):
					f.errf("fetching partition %d of %s at offset %d: %v (reconnecting)", partition, f.topic, offset, err)
					closeConn()
					break readLoop
				default:
					// The fetched records could not be decoded (an unknown compression codec,
					// a corrupt or unknown record batch): no retry heals that. Read again
					// readMaxAttempts times on new connections (in case), then reported: Next
					// returns ErrUndecodable, which stops the pipeline naming where, and the
					// records stay uncommitted (docs/OPERATIONS.md, the failure table).
					closeConn()
					if offset != badAt {
						badAt, bad = offset, 0
					}
					if bad++; bad < readMaxAttempts {
						f.errf("fetching partition %d of %s at offset %d: its record batch cannot be decoded: %v (reading it again, %d of %d)",
							partition, f.topic, offset, err, bad, readMaxAttempts)
						break readLoop
					}
					bad = 0
					if f.send(ctx, chunk{gen: seq, err: fmt.Errorf("partition %d at offset %d: %w: %v", partition, offset, ErrUndecodable, err)}) != nil {
						return
					}
					break readLoop
				}
			}
			errcount++
		}
	}
}

// dialPartition connects to the partition's leader, trying each bootstrap broker, and seeks to
// offset (FirstOffset/LastOffset resolved; an offset before the first retained moved up to it,
// with the records skipped logged). An offset past the last is an error wrapping
// kafka.OffsetOutOfRange unless reset: then it is reset as ingest.start_offset says (the first
// retained record, or the end with latest), logged. Kafka's consumers do the same
// (auto.offset.reset): the group's offset is past the end when the topic was deleted and
// created again or the partition's log was truncated (an unclean leader election), and
// waiting for records to reach it would skip every record below it, or wait forever.
func (f *groupFetcher) dialPartition(ctx context.Context, partition int, offset int64, reset bool) (*kafka.Conn, int64, error) {
	var err error
	for _, broker := range f.brokers {
		var conn *kafka.Conn
		if conn, err = f.dialLeader(ctx, broker, partition); err != nil {
			continue
		}
		first, last, oerr := readOffsets(conn)
		if oerr != nil {
			conn.Close()
			return nil, 0, oerr
		}
		switch {
		case offset == kafka.FirstOffset:
			offset = first
		case offset == kafka.LastOffset:
			offset = last
		case offset < first:
			f.errf("partition %d of %s: offset %d is before the first retained (%d); skipping %d records",
				partition, f.topic, offset, first, first-offset)
			offset = first
		case offset > last && !reset:
			conn.Close()
			return nil, 0, fmt.Errorf("offset %d is past the last (%d), waiting for records: %w", offset, last, kafka.OffsetOutOfRange)
		case offset > last:
			to, how := first, "earliest: reading from the first retained record"
			if f.resetLatest {
				to, how = last, "latest: reading from the end"
			}
			f.errf("partition %d of %s: offset %d is past the end (%d; first retained %d): the topic was recreated or the partition truncated; start_offset %s, offset %d",
				partition, f.topic, offset, last, first, how, to)
			offset = to
		}
		start, serr := conn.Seek(offset, kafka.SeekAbsolute)
		if serr != nil {
			conn.Close()
			return nil, 0, serr
		}
		_ = conn.SetDeadline(time.Time{})
		return conn, start, nil
	}
	return nil, 0, err
}

// dialLeader is a connection to partition's leader, found through broker within dialLeaderWait.
func (f *groupFetcher) dialLeader(ctx context.Context, broker string, partition int) (*kafka.Conn, error) {
	dctx, cancel := context.WithTimeout(ctx, dialLeaderWait)
	defer cancel()
	dialer, release := kafkasec.CutAtEnd(dctx, f.dialer) // (its SASL handshake bounded too)
	defer release()                                      // (before cancel: the connection lives on)
	conn, err := dialer.DialLeader(dctx, "tcp", broker, f.topic, partition)
	if err != nil && ctx.Err() == nil && dctx.Err() != nil {
		return nil, fmt.Errorf("broker %s: no answer within %s: %w", broker, dialLeaderWait, err)
	}
	return conn, err
}

func readOffsets(conn *kafka.Conn) (first, last int64, err error) {
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	return conn.ReadOffsets()
}

// read makes one fetch from offset and hands its messages on, decoded with dec, in chunks of up
// to chunkSize. It returns the offset after the last message handed on and the error that ended
// the fetch (io.EOF: all of it read).
func (f *groupFetcher) read(ctx context.Context, seq int64, conn *kafka.Conn, dec Decoder, offset int64) (int64, error) {
	// The read deadline is what the fetch's long poll derives from (kafka-go: deadline minus
	// an allowance for the round trip); see fetchLongPoll.
	_ = conn.SetReadDeadline(time.Now().Add(fetchLongPoll))
	if err := ctx.Err(); err != nil {
		return offset, err // ended before the deadline was set: the cut (fetchPartition) came first
	}
	b := conn.ReadBatchWith(kafka.ReadBatchConfig{MinBytes: 1, MaxBytes: f.maxBytes})
	var msgs []pendingMsg
	var err error
	for {
		if msgs == nil {
			// Per chunk rather than per message (the Reader's way): a chunk is read (and
			// decoded, a few µs a message) from the connection's buffer in well under the
			// timeout unless the broker stalls.
			_ = conn.SetReadDeadline(time.Now().Add(readBatchTimeout))
			msgs = f.buffer()
		}
		var m kafka.Message
		if m, err = b.ReadMessage(); err != nil {
			break
		}
		msgs = grow(msgs)
		p := &msgs[len(msgs)-1]
		p.m = m
		decodeMsg(dec, f.newDecoded, p)
		if len(msgs) == f.chunkSize {
			if err = f.send(ctx, chunk{gen: seq, msgs: msgs, buf: msgs}); err != nil {
				break
			}
			offset = m.Offset + 1
			msgs = nil
		}
	}
	b.Close()
	if msgs != nil && len(msgs) == 0 { // an empty fetch (an idle long poll): its buffer goes back
		f.recycle(msgs)
	}
	if len(msgs) > 0 && ctx.Err() == nil {
		last := msgs[len(msgs)-1].m.Offset // (read before the send: Next clears what it takes)
		if serr := f.send(ctx, chunk{gen: seq, msgs: msgs, buf: msgs}); serr != nil {
			err = serr
		} else {
			offset = last + 1
		}
	}
	_ = conn.SetReadDeadline(time.Time{})
	return offset, err
}

// buffer is an empty chunk buffer: one Next handed back (recycle), whose slots keep their
// Decoded for reuse, or a new one.
func (f *groupFetcher) buffer() []pendingMsg {
	select {
	case b := <-f.free:
		return b[:0]
	default:
		return make([]pendingMsg, 0, min(f.chunkSize, 1024))
	}
}

// recycle hands back a chunk's buffer Next took every message of (their payloads cleared).
func (f *groupFetcher) recycle(buf []pendingMsg) {
	select {
	case f.free <- buf:
	default: // enough spare: left to the collector
	}
}

// grow extends msgs by one slot, reusing the one beyond its length when there is one.
func grow(msgs []pendingMsg) []pendingMsg {
	if len(msgs) < cap(msgs) {
		return msgs[:len(msgs)+1]
	}
	return append(msgs, pendingMsg{})
}

// ErrUndecodable is a partition's fetch whose records cannot be decoded: an unknown compression
// codec (a producer's newer codec, a corrupt batch header), an unknown record batch format, a
// corrupt compressed batch. No retry heals it, and the records' values are not at hand for a
// dead letter: Next returns it naming the partition and the offset, and the pipeline stops
// (docs/OPERATIONS.md, the failure table).
var ErrUndecodable = errors.New("its record batch cannot be decoded")

// connectionError reports whether err, met reading a fetch, is the connection's (closed,
// reset, timed out, cut short) rather than the fetched data's: a new connection may not meet it.
func connectionError(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, os.ErrDeadlineExceeded) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// backoffDelay is kafka-go's backoff: attempt² x lo, at most hi (0 for attempt 0).
func backoffDelay(attempt int, lo, hi time.Duration) time.Duration {
	return min(time.Duration(attempt*attempt)*lo, hi)
}

// sleepCtx waits d, reporting false if ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
