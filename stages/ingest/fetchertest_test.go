package ingest

import (
	"fmt"
	"slices"
	"sync"

	"github.com/segmentio/kafka-go"
)

// errLines are a test fetcher's error lines (its errf), safe to log from its partition goroutine.
type errLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *errLines) errf(format string, args ...any) {
	l.mu.Lock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

// all is every line logged so far.
func (l *errLines) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.lines)
}

// testFetcher is a fetcher of env's topic outside any group, for tests that run fetchPartition
// alone: chunks of up to chunkSize messages, fetches of at most maxBytes, queue chunks waiting
// (0: each waits until taken), its error lines in the errLines returned.
func testFetcher(env kafkaEnv, chunkSize, maxBytes, queue int) (*groupFetcher, *errLines) {
	errs := &errLines{}
	return &groupFetcher{newDecoder: offsetsOnlyDecoder, newDecoded: offsetsOnlyConfig.NewDecoded,
		topic: env.topic, brokers: env.br.Addrs, dialer: kafka.DefaultDialer, chunkSize: chunkSize,
		maxBytes: maxBytes, logf: func(string, ...any) {}, errf: errs.errf, chunks: make(chan chunk, queue)}, errs
}
