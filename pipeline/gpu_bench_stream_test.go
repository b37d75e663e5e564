package pipeline

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outlierd/outlierd/internal/datasets/synth"
	"github.com/outlierd/outlierd/internal/testsupport"
)

// benchStream is BenchmarkPipelineDevice's sensor stream: n messages of synth's sensor stream
// from a seed (1% anomalies, 0.5% malformed), generated before the runs and held without
// pointers: every key and value back to back in one byte slice, their ends in another. Held as
// records (makeSensorRecords: a struct and two byte slices a message), the runs' 2.5M messages
// were 2 GB and 7.5M objects in the benchmark's process, which every GC cycle of the pipeline
// under test marked (a forced collection of them alone: 0.3 s on the 2-core development
// machine; docs/BENCHMARKS.md §4.10); noscan slices are marked without being read. A
// production pipeline's process holds none of its input.
type benchStream struct {
	n     int
	data  []byte  // message i's key, then its value, after message i-1's
	ends  []int64 // 2i: the end of message i's key in data, 2i+1: of its value
	valid int     // messages that are not malformed
}

func newBenchStream(n int, seed uint64) benchStream {
	gen := synth.NewSensorStream(seed, 0.01, 0.005)
	s := benchStream{n: n, ends: make([]int64, 0, 2*n)}
	for range n {
		key, value, _, malformed := gen.Next()
		s.data = append(s.data, key...)
		s.ends = append(s.ends, int64(len(s.data)))
		s.data = append(s.data, value...)
		s.ends = append(s.ends, int64(len(s.data)))
		if !malformed {
			s.valid++
		}
	}
	return s
}

// message is message i's key and value (slices of data).
func (s benchStream) message(i int) (key, value []byte) {
	start := int64(0)
	if i > 0 {
		start = s.ends[2*i-1]
	}
	return s.data[start:s.ends[2*i]:s.ends[2*i]], s.data[s.ends[2*i]:s.ends[2*i+1]:s.ends[2*i+1]]
}

// streamInput is a benchStream's topic as it is produced: the sensorInput's bookkeeping (topic,
// partitions, end offsets, the message count) and the produce times.
type streamInput struct {
	*sensorInput
	stream benchStream
	sent   [][]int64 // per partition, by offset: the message's produce time (Unix ms)
}

func (s benchStream) input(topic string, parts int) *streamInput {
	return &streamInput{
		sensorInput: &sensorInput{topic: topic, parts: parts, unkept: s.n, end: make([]int64, parts)},
		stream:      s,
		sent:        make([][]int64, parts),
	}
}

// produce produces the stream at rate records/s, or at rate 0 as fast as the broker takes it
// (paced), and returns the rate achieved. The produce time in each message is the time of its
// produce call; messages go round-robin over the partitions, as makeSensorRecords spreads them.
func (in *streamInput) produce(b *testing.B, br testsupport.Broker, rate int) float64 {
	var krs []*kgo.Record
	return paced(b, br, in.stream.n, rate, func(ctx context.Context, cl *kgo.Client, lo, hi int) error {
		krs = krs[:0]
		now := time.Now()
		for i := lo; i < hi; i++ {
			key, value := in.stream.message(i)
			krs = append(krs, &kgo.Record{Topic: in.topic, Partition: int32(i % in.parts), Key: key, Value: value, Timestamp: now})
		}
		if err := cl.ProduceSync(ctx, krs...).FirstErr(); err != nil {
			return fmt.Errorf("produce %d records to %s: %w", len(krs), in.topic, err)
		}
		for _, kr := range krs {
			in.setSent(kr.Partition, kr.Offset, kr.Timestamp.UnixMilli())
		}
		return nil
	})
}

func (in *streamInput) setSent(p int32, off, ms int64) {
	s := in.sent[p]
	for int64(len(s)) <= off {
		s = append(s, -1)
	}
	s[off] = ms
	in.sent[p] = s
	in.end[p] = max(in.end[p], off+1)
}

// sentAt is the produce time (Unix ms) of the message at c, if it was produced.
func (in *streamInput) sentAt(c coord) (int64, bool) {
	if c.p < 0 || int(c.p) >= len(in.sent) || c.off < 0 || c.off >= int64(len(in.sent[c.p])) || in.sent[c.p][c.off] < 0 {
		return 0, false
	}
	return in.sent[c.p][c.off], true
}
