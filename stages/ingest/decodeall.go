package ingest

import (
	"runtime"
	"sync"

	"github.com/segmentio/kafka-go"
)

// A batch's messages are decoded on several goroutines once fetched: on the 16-core GPU machine
// the one fetch goroutine was the pipeline's limit, 91% busy at about 200k records/s, 3.9 of its
// 5.6 µs per record in the JSON decoder (docs/BENCHMARKS.md §4.5). Fetching, the checkpoint and
// the Arrow builder stay on the caller's goroutine, in fetch order, so a batch and its dead
// letters are the ones the serial loop made.

// pendingMsg is one fetched message of the batch being filled, and its decode.
type pendingMsg struct {
	m   kafka.Message
	d   *Decoded // reused batch after batch
	err error
	// key is the decoded key (Decoded.Key is only valid until its decoder's next Decode):
	// keyBuf's bytes when Decoded.HasKey, else nil.
	key, keyBuf []byte
}

// decodeChunk is the fewest messages a decoding goroutine takes: below it a goroutine costs
// more than the decoding it takes over (a few µs per message).
const decodeChunk = 64

// decodeAll decodes msgs with s.decs, one goroutine per decoder, each over consecutive messages.
func (s *Source) decodeAll(msgs []pendingMsg) {
	workers := min(len(s.decs), len(msgs)/decodeChunk)
	if workers <= 1 {
		s.decodeRange(s.decs[0], msgs)
		return
	}
	var wg sync.WaitGroup
	for w := range workers {
		part := msgs[len(msgs)*w/workers : len(msgs)*(w+1)/workers]
		wg.Add(1)
		go func(dec Decoder) {
			defer wg.Done()
			s.decodeRange(dec, part)
		}(s.decs[w])
	}
	wg.Wait()
}

func (s *Source) decodeRange(dec Decoder, msgs []pendingMsg) {
	for i := range msgs {
		p := &msgs[i]
		if p.d == nil {
			p.d = s.cfg.NewDecoded()
		}
		p.err = dec.Decode(p.m.Value, p.d)
		p.key = nil
		if p.err == nil && p.d.HasKey {
			// An empty key field is an empty key, never a null one (the decoder's Key is nil or
			// empty for it depending on what it decoded before).
			p.keyBuf = append(p.keyBuf[:0], p.d.Key...)
			if p.keyBuf == nil {
				p.keyBuf = []byte{}
			}
			p.key = p.keyBuf
		}
	}
}

// newDecoders makes one decoder per core (the first is dec).
func newDecoders(cfg Config, dec Decoder) ([]Decoder, error) {
	decs := []Decoder{dec}
	for range runtime.GOMAXPROCS(0) - 1 {
		d, err := NewDecoder(cfg)
		if err != nil {
			return nil, err
		}
		decs = append(decs, d)
	}
	return decs, nil
}
