package ingest

import (
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/segmentio/kafka-go"
)

// TestDecodeMsgInReusedSlots: messages decoded into a recycled chunk buffer (groupFetcher.recycle:
// each slot's Decoded and key bytes held another message before, decoded by a decoder that
// decoded others since) get the result of a fresh decode (values, uncertainties, key bytes,
// event time, error text), with valid, malformed, keyless and empty-key messages interleaved; a
// configured key that is present is never null, even when empty (KeyNil: the decoder's own Key
// is nil or empty for an empty key depending on what it decoded before).
func TestDecodeMsgInReusedSlots(t *testing.T) {
	cfg := testConfig(FormatJSON, []string{"a", "b"}, func(c *Config) {
		c.KeyField = "id"
		c.EventTimeField = "ts"
		c.Uncertainty = &Uncertainty{Suffix: "_sd", Default: ptr(0.5)}
	})
	fresh := mustDecoder(t, cfg)
	reused := mustDecoder(t, cfg)
	const n = 1000
	msgs := make([]kafka.Message, n)
	for i := range msgs {
		var v string
		switch i % 7 {
		case 0:
			v = fmt.Sprintf(`{"a":%d,"b":"x","id":"k%d","ts":%d}`, i, i, 1700000000000+i) // not a number
		case 1:
			v = fmt.Sprintf(`{"a":%d.5,"b":2,"ts":%d}`, i, 1700000000000+i) // no key
		case 2:
			v = fmt.Sprintf(`{"a":%d,"b":1e3,"id":"","ts":%d}`, i, 1700000000000+i) // empty key
		default:
			v = fmt.Sprintf(`{"a":%d,"a_sd":0.%d,"b":-%d,"id":"dev-%d","ts":%d}`, i, i%10, i, i*31, 1700000000000+i)
		}
		msgs[i] = kafka.Message{Value: []byte(v)}
	}
	decodeInto := func(dec Decoder, buf []pendingMsg, ms []kafka.Message) []pendingMsg {
		for _, m := range ms {
			buf = grow(buf)
			p := &buf[len(buf)-1]
			p.m = m
			decodeMsg(dec, cfg.NewDecoded, p)
		}
		return buf
	}
	want := decodeInto(fresh, nil, msgs)
	// The reused buffer first held the messages shifted by three (another kind in each slot).
	buf := decodeInto(reused, make([]pendingMsg, 0, n), append(slices.Clone(msgs[3:]), msgs[:3]...))
	got := decodeInto(reused, buf[:0], msgs)
	type result struct {
		Values, SD     []float32
		HasKey, KeyNil bool
		Key            string
		HasTime        bool
		Time           int64
		Err            string
	}
	of := func(p pendingMsg) result {
		r := result{Err: fmt.Sprint(p.err)}
		if p.err == nil {
			r.Values, r.SD = p.d.Values, p.d.SD
			r.HasKey, r.KeyNil, r.Key = p.d.HasKey, p.d.HasKey && p.key == nil, string(p.key)
			r.HasTime, r.Time = p.d.HasEventTime, p.d.EventTime
		}
		return r
	}
	errs := 0
	for i := range msgs {
		if !reflect.DeepEqual(of(got[i]), of(want[i])) {
			t.Fatalf("message %d: in a reused slot %+v, fresh %+v", i, of(got[i]), of(want[i]))
		}
		if want[i].err != nil {
			errs++
		}
	}
	if errs == 0 || errs == n {
		t.Fatalf("%d of %d messages failed to decode: the test needs both kinds", errs, n)
	}
}

// decodedChunk is a chunk of msgs of generation gen as a partition goroutine hands it to Next:
// decoded under cfg.
func decodedChunk(t *testing.T, cfg Config, gen int64, msgs ...kafka.Message) chunk {
	t.Helper()
	dec := mustDecoder(t, cfg)
	c := chunk{gen: gen}
	for _, m := range msgs {
		c.msgs = grow(c.msgs)
		c.msgs[len(c.msgs)-1].m = m
		decodeMsg(dec, cfg.NewDecoded, &c.msgs[len(c.msgs)-1])
	}
	c.buf = c.msgs
	return c
}

// offsetsOnlyConfig and offsetsOnlyDecoder are the partition goroutines' decoding in tests of
// the fetching that look at offsets, not values (their records are dead letters to it or not).
var offsetsOnlyConfig = testConfig(FormatJSON, []string{"temp"}, nil)

func offsetsOnlyDecoder() Decoder {
	k, err := offsetsOnlyConfig.Check()
	if err != nil {
		panic(err) // (a fixed config that Check passes)
	}
	return k.NewDecoder()
}
