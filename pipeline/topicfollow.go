package pipeline

import (
	"context"
	"sync"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"
)

// TopicFollower reads partitions of a topic for a command outside a pipeline (outlierd tail
// reads sink.topic) through the scorer's followers' reader, partitionReader: every exchange
// with a broker bounded by brokerAttemptWait (a lost request costs a retry, not the rest of the
// run: kafka-go's Reader waited for it until it was closed), a stop ending a read at once, and
// its partitions' readers sharing the broker that answered last (brokerHint).
type TopicFollower struct {
	cfg    modelTopicConfig
	dialer *kafka.Dialer
	log    zerolog.Logger
}

// Follower is a TopicFollower of t whose fetches take messages of up to maxMessageBytes (the
// topic's writers' bound: sink.max_message_bytes for sink.topic; a fetch asks for twice that, at
// least 2 MiB), logging its warnings to log.
func (t TopicRef) Follower(maxMessageBytes int, log zerolog.Logger) (*TopicFollower, error) {
	dialer, err := t.Dialer()
	if err != nil {
		return nil, err
	}
	cfg := modelTopicConfig{brokers: t.Brokers, topic: t.Name, security: t.Security, maxMessageBytes: maxMessageBytes,
		answered: &brokerHint{}, key: t.Key}
	return &TopicFollower{cfg: cfg, dialer: dialer, log: log}, nil
}

// Follow reads partition p from offset on (kafka.FirstOffset: from its first; kafka.LastOffset:
// from its end when the reader first reaches its leader), handing each message to handle, until
// ctx ends (nil) or handle fails (its error). A failed read is retried after a backoff growing
// with the reads failed in a row, and warned of at its pace (failureRun: at once where none of
// the partition's was within failureLineEvery, else counted into the next line). sending, if
// not nil, is called once, as the first fetch is sent (after the dial and the offsets).
func (f *TopicFollower) Follow(ctx context.Context, p int, offset int64, sending func(), handle func(kafka.Message) error) error {
	r := newPartitionReader(f.cfg, f.dialer, p, offset, f.log)
	defer r.Close()
	if sending != nil {
		r.sending = sync.OnceFunc(sending)
	}
	log := f.log.With().Str("topic", f.cfg.topic).Int("partition", p).Logger()
	for {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if e := r.warning(&log, err); e != nil {
				e.Msg(f.cfg.what() + ": read failed; retrying")
			}
			if !backoff(ctx, max(r.failures(), 1)) {
				return nil
			}
			continue
		}
		if err := handle(m); err != nil {
			return err
		}
	}
}
