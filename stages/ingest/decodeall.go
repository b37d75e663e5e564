package ingest

import "github.com/segmentio/kafka-go"

// A message is decoded by the partition goroutine that fetched it (fetch.go's read), with that
// goroutine's own decoder, before its chunk goes to Next: the partitions decode in parallel
// while Next (one goroutine, in fetch order) registers, derives and appends. Before, Next
// decoded each batch over the cores and waited for it, 26% of its time on the 16-core GPU host
// (docs/BENCHMARKS.md §4.9); before that it decoded alone (§4.5: 3.9 of its 5.6 µs a record).

// pendingMsg is one fetched message and its decode.
type pendingMsg struct {
	m   kafka.Message
	d   *Decoded // reused with its chunk's buffer (groupFetcher.recycle)
	err error
	// key is the decoded key (Decoded.Key is only valid until its decoder's next Decode):
	// keyBuf's bytes when Decoded.HasKey, else nil.
	key, keyBuf []byte
}

// decodeMsg decodes p.m's value with dec into p (p.d made with newDecoded the first time).
func decodeMsg(dec Decoder, newDecoded func() *Decoded, p *pendingMsg) {
	if p.d == nil {
		p.d = newDecoded()
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
