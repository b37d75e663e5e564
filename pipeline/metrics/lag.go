package metrics

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"
)

// LagConfig says whose consumer lag to poll.
type LagConfig struct {
	// Brokers are the bootstrap addresses (host:port).
	Brokers []string
	// Topic is the input topic; GroupID the consumer group reading it.
	Topic, GroupID string
	// FromEarliest says where the group starts a partition it has no committed offset for:
	// the earliest offset (the lag is the whole partition), or the latest (the lag is 0).
	FromEarliest bool
	// Interval is the time between polls (each poll is four small broker round trips).
	Interval time.Duration
	// Transport carries the source's TLS and SASL (kafkasec.Config.Transport); nil means
	// plaintext. The poller owns it: it closes its idle connections when Run ends.
	Transport *kafka.Transport
}

// LagPoller measures the consumer group's lag from the brokers: per partition, the high
// watermark (ListOffsets) minus the group's committed offset (OffsetFetch).
//
// Why the committed offset and not this instance's own position: kafka-go's Reader.Stats
// reports lag only for a reader of a single partition, and the group reader does not expose
// which partitions it holds. The committed offset is the group's durable position, the same
// figure kafka-consumer-groups.sh shows; it is identical from every instance of the group,
// so dashboards aggregate with max by (partition). It trails the records done by at most
// run.commit_interval, so at a steady rate the lag has a floor of about rate x interval plus
// the batches in flight.
//
// Each successful poll also tells that the brokers answer: it sets the broker-connected
// state that /readyz reads. Polls failing for the source's stale time make the lag unknown
// (lagstale.go).
type LagPoller struct {
	cfg       LagConfig
	m         *Metrics
	log       zerolog.Logger
	transport *kafka.Transport
	client    *kafka.Client
}

// NewLagPoller validates cfg; it does not connect (the first Poll does).
func NewLagPoller(cfg LagConfig, m *Metrics, log zerolog.Logger) (*LagPoller, error) {
	var errs []error
	if len(cfg.Brokers) == 0 {
		errs = append(errs, errors.New("no brokers"))
	}
	if cfg.Topic == "" || cfg.GroupID == "" {
		errs = append(errs, fmt.Errorf("topic %q and group %q must both be set", cfg.Topic, cfg.GroupID))
	}
	if cfg.Interval <= 0 {
		errs = append(errs, fmt.Errorf("interval must be > 0, got %s", cfg.Interval))
	}
	if m == nil {
		errs = append(errs, errors.New("nil Metrics"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("metrics: lag poller: %w", err)
	}
	tr := cfg.Transport
	if tr == nil {
		// A poll that cannot dial within DialTimeout reports the brokers unreachable.
		tr = &kafka.Transport{DialTimeout: 5 * time.Second}
	}
	tr.ClientID = "outlierd-lag"
	// Connections stay open between polls; one idle for several intervals is closed.
	tr.IdleTimeout = max(30*time.Second, 3*cfg.Interval)
	// The source's readiness needs the lag this poller provides (metrics.go Ready).
	m.setSourceStaleAfter(max(3*cfg.Interval, 10*time.Second))
	m.lagPollStarted()
	return &LagPoller{
		cfg:       cfg,
		m:         m,
		log:       log.With().Str("component", "lag").Logger(),
		transport: tr,
		client:    &kafka.Client{Addr: kafka.TCP(cfg.Brokers...), Transport: tr},
	}, nil
}

// Run polls at once and then every Interval until ctx ends; then it marks the brokers
// disconnected (nothing checks them any more) and closes its connections.
func (l *LagPoller) Run(ctx context.Context) {
	defer l.transport.CloseIdleConnections()
	defer l.m.SetBrokerConnected(false)
	t := time.NewTicker(l.cfg.Interval)
	defer t.Stop()
	failing := false
	for {
		// Each poll is bounded by the interval (at least 1 s), so polls never pile up and a
		// broker that stops answering turns the connected state off within two intervals.
		pctx, cancel := context.WithTimeout(ctx, max(time.Second, l.cfg.Interval))
		_, err := l.Poll(pctx)
		cancel()
		switch {
		case err != nil && ctx.Err() != nil:
			return
		case err != nil && !failing:
			l.log.Warn().Err(err).Msg("consumer lag poll failed; retrying every interval")
		case err == nil && failing:
			l.log.Info().Msg("consumer lag poll works again")
		}
		failing = err != nil
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Poll measures the lag of every partition of the topic once, publishes it (SetLag) and
// updates the broker-connected state: connected when the brokers answered, even with an
// error code (for example a coordinator still loading), disconnected when they could not be
// reached. It returns the lag per partition.
func (l *LagPoller) Poll(ctx context.Context) (map[int]int64, error) {
	lag, err := l.poll(ctx)
	var kerr kafka.Error
	l.m.SetBrokerConnected(err == nil || errors.As(err, &kerr))
	unknown := l.m.lagPolled(err)
	if err != nil {
		l.m.LagPollFailed()
		switch {
		case errors.Is(err, errNoTopic): // (deleted while running: the source fetches nothing, for ever)
			l.m.setInputMissing(fmt.Sprintf("input topic %q does not exist on the brokers (deleted?): nothing to consume", l.cfg.Topic))
			l.m.SetLag(l.cfg.GroupID, l.cfg.Topic, nil) // (no partitions left to show a lag for)
		case unknown: // (no poll succeeded for the stale time: lagstale.go)
			l.m.dropLag()
		}
		return nil, err
	}
	l.m.setInputMissing("")
	l.m.SetLag(l.cfg.GroupID, l.cfg.Topic, lag)
	return lag, nil
}

// errNoTopic marks a poll whose topic the brokers do not know.
var errNoTopic = errors.New("the brokers do not know the topic")

func (l *LagPoller) poll(ctx context.Context) (map[int]int64, error) {
	md, err := l.client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{l.cfg.Topic}})
	if err != nil {
		return nil, fmt.Errorf("metrics: lag: metadata: %w", err)
	}
	var parts []int
	for _, t := range md.Topics {
		if t.Name != l.cfg.Topic {
			continue
		}
		if errors.Is(t.Error, kafka.UnknownTopicOrPartition) {
			return nil, fmt.Errorf("metrics: lag: metadata of topic %q: %w: %w", l.cfg.Topic, errNoTopic, t.Error)
		}
		if t.Error != nil {
			return nil, fmt.Errorf("metrics: lag: metadata of topic %q: %w", l.cfg.Topic, t.Error)
		}
		for _, p := range t.Partitions {
			parts = append(parts, p.ID)
		}
	}
	if len(parts) == 0 {
		return nil, fmt.Errorf("metrics: lag: topic %q has no partitions: %w", l.cfg.Topic, errNoTopic)
	}

	of, err := l.client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: l.cfg.GroupID, Topics: map[string][]int{l.cfg.Topic: parts}})
	if err != nil {
		return nil, fmt.Errorf("metrics: lag: committed offsets of group %q: %w", l.cfg.GroupID, err)
	}
	// A group the broker does not know has committed nothing: each partition counts as without
	// a commit (kfake and Kafka's newer group protocol answer so; the classic one with -1s).
	if of.Error != nil && !errors.Is(of.Error, kafka.GroupIdNotFound) {
		return nil, fmt.Errorf("metrics: lag: committed offsets of group %q: %w", l.cfg.GroupID, of.Error)
	}
	committed := make(map[int]int64, len(parts))
	for _, p := range of.Topics[l.cfg.Topic] {
		if p.Error != nil {
			return nil, fmt.Errorf("metrics: lag: committed offset of partition %d: %w", p.Partition, p.Error)
		}
		committed[p.Partition] = p.CommittedOffset // -1: none
	}

	// One ListOffsets request may not name a partition twice, so the high watermarks and the
	// log starts (needed where nothing is committed, or the commit fell behind retention)
	// are two requests.
	last, err := l.offsets(ctx, parts, false)
	if err != nil {
		return nil, err
	}
	first, err := l.offsets(ctx, parts, true)
	if err != nil {
		return nil, err
	}
	lag := make(map[int]int64, len(parts))
	for _, p := range parts {
		c, ok := committed[p]
		if !ok {
			c = -1
		}
		lag[p] = partitionLag(last[p], first[p], c, l.cfg.FromEarliest)
	}
	return lag, nil
}

// partitionLag is the records the group has yet to commit on one partition: from its next
// offset to the high watermark. With no commit (committed < 0) the group starts at the log
// start or the end; a commit below the log start (deleted by retention) restarts there too.
func partitionLag(highWatermark, logStart, committed int64, fromEarliest bool) int64 {
	next := committed
	if committed < 0 {
		if !fromEarliest {
			return 0
		}
		next = logStart
	}
	next = max(next, logStart)
	return max(0, highWatermark-next)
}

// offsets lists the log start (first) or the high watermark of every partition.
func (l *LagPoller) offsets(ctx context.Context, parts []int, first bool) (map[int]int64, error) {
	reqs := make([]kafka.OffsetRequest, len(parts))
	for i, p := range parts {
		if first {
			reqs[i] = kafka.FirstOffsetOf(p)
		} else {
			reqs[i] = kafka.LastOffsetOf(p)
		}
	}
	res, err := l.client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{l.cfg.Topic: reqs}})
	if err != nil {
		return nil, fmt.Errorf("metrics: lag: list offsets: %w", err)
	}
	out := make(map[int]int64, len(parts))
	for _, p := range res.Topics[l.cfg.Topic] {
		if p.Error != nil {
			return nil, fmt.Errorf("metrics: lag: list offsets of partition %d: %w", p.Partition, p.Error)
		}
		if first {
			out[p.Partition] = p.FirstOffset
		} else {
			out[p.Partition] = p.LastOffset
		}
	}
	for _, p := range parts {
		if _, ok := out[p]; !ok {
			return nil, fmt.Errorf("metrics: lag: no offset returned for partition %d", p)
		}
	}
	return out, nil
}
