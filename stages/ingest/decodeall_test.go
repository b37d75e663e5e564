package ingest

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/segmentio/kafka-go"
)

// TestDecodeAllIsSerial: a batch decoded on several goroutines gives every message the serial
// decode's result (values, uncertainties, key bytes, event time, error text), with valid,
// malformed, keyless and empty-key messages interleaved across the chunks; a configured key that
// is present is never null, even when empty (KeyNil: the decoder's own Key is nil or empty for
// an empty key depending on what it decoded before).
func TestDecodeAllIsSerial(t *testing.T) {
	cfg := testConfig(FormatJSON, []string{"a", "b"}, func(c *Config) {
		c.KeyField = "id"
		c.EventTimeField = "ts"
		c.Uncertainty = &Uncertainty{Suffix: "_sd", Default: ptr(0.5)}
	})
	dec, err := NewDecoder(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var decs []Decoder
	for range 4 {
		d, err := NewDecoder(cfg)
		if err != nil {
			t.Fatal(err)
		}
		decs = append(decs, d)
	}
	const n = 1000 // 4 goroutines of 250
	msgs := make([]pendingMsg, n)
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
		msgs[i].m = kafka.Message{Value: []byte(v)}
	}
	serial := &Source{cfg: cfg, decs: []Decoder{dec}}
	parallel := &Source{cfg: cfg, decs: decs}
	want := append([]pendingMsg(nil), msgs...)
	serial.decodeAll(want)
	got := append([]pendingMsg(nil), msgs...)
	parallel.decodeAll(got)
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
			t.Fatalf("message %d: parallel %+v, serial %+v", i, of(got[i]), of(want[i]))
		}
		if want[i].err != nil {
			errs++
		}
	}
	if errs == 0 || errs == n {
		t.Fatalf("%d of %d messages failed to decode: the test needs both kinds", errs, n)
	}
}
