package ingest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/core/checkpoint"
)

// benchJSON is a typical sensor message: 10 features, their uncertainties, a nested device
// object, a key, a time and a few fields the decoder skips (about 420 bytes).
var benchJSON = func() []byte {
	var b strings.Builder
	b.WriteString(`{"device":{"id":"sensor-0042","site":"plant-7","fw":"1.4.2"},"ts":1700000000123,`)
	for j := range 10 {
		fmt.Fprintf(&b, `"x%d":%g,"x%d_sd":%g,`, j, 0.123456*float64(j+1), j, 0.01*float64(j+1))
	}
	b.WriteString(`"tags":["a","b"],"ok":true,"note":"calibrated \"weekly\""}`)
	return []byte(b.String())
}()

func benchFeatures() []string {
	f := make([]string, 10)
	for j := range f {
		f[j] = fmt.Sprintf("x%d", j)
	}
	return f
}

// BenchmarkDecodeJSON compares the scanner with the obvious alternative, encoding/json into a
// map[string]any plus lookups (which must also walk the path and check types).
func BenchmarkDecodeJSON(b *testing.B) {
	cfg := testConfig(FormatJSON, benchFeatures(), func(c *Config) {
		c.KeyField = "device.id"
		c.EventTimeField = "ts"
		c.Uncertainty = &Uncertainty{Suffix: "_sd"}
	})
	b.Run("scanner", func(b *testing.B) {
		dec := mustDecoder(b, cfg)
		out := cfg.NewDecoded()
		b.SetBytes(int64(len(benchJSON)))
		b.ReportAllocs()
		for b.Loop() {
			if err := dec.Decode(benchJSON, out); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json-map", func(b *testing.B) {
		values := make([]float32, 10)
		sds := make([]float32, 10)
		b.SetBytes(int64(len(benchJSON)))
		b.ReportAllocs()
		for b.Loop() {
			var m map[string]any
			if err := json.Unmarshal(benchJSON, &m); err != nil {
				b.Fatal(err)
			}
			for j, f := range cfg.Features {
				v, ok := m[f].(float64)
				sd, ok2 := m[f+"_sd"].(float64)
				if !ok || !ok2 {
					b.Fatal("missing")
				}
				values[j], sds[j] = float32(v), float32(sd)
			}
			if _, ok := m["device"].(map[string]any)["id"].(string); !ok {
				b.Fatal("no key")
			}
		}
	})
}

func BenchmarkDecodeCSV(b *testing.B) {
	header := []string{"id"}
	var line strings.Builder
	line.WriteString("sensor-0042")
	for j := range 10 {
		header = append(header, fmt.Sprintf("x%d", j), fmt.Sprintf("x%d_sd", j))
		fmt.Fprintf(&line, ",%g,%g", 0.123456*float64(j+1), 0.01*float64(j+1))
	}
	cfg := testConfig(FormatCSV, benchFeatures(), func(c *Config) {
		c.CSVHeader = header
		c.KeyField = "id"
		c.Uncertainty = &Uncertainty{Suffix: "_sd"}
	})
	benchDecoder(b, cfg, []byte(line.String()))
}

func BenchmarkDecodeLogfmt(b *testing.B) {
	var line strings.Builder
	line.WriteString(`level=info dev=sensor-0042 msg="a reading"`)
	for j := range 10 {
		fmt.Fprintf(&line, " x%d=%g x%d_sd=%g", j, 0.123456*float64(j+1), j, 0.01*float64(j+1))
	}
	cfg := testConfig(FormatLogfmt, benchFeatures(), func(c *Config) {
		c.KeyField = "dev"
		c.Uncertainty = &Uncertainty{Suffix: "_sd"}
	})
	benchDecoder(b, cfg, []byte(line.String()))
}

func benchDecoder(b *testing.B, cfg Config, msg []byte) {
	dec := mustDecoder(b, cfg)
	out := cfg.NewDecoded()
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		if err := dec.Decode(msg, out); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSourceKfake and BenchmarkSourceRealBroker measure the source end to end over
// loopback: fetch through a consumer group, JSON decode, Arrow batch build, checkpoint
// registration, acks, and a synchronous Commit every 1 or every 10 batches of 1000 (the commit
// rate is the main cost against a real broker). Reported as records/s; b.N is the number of
// records (use -benchtime 200000x: the produce before the timer is not free).
func BenchmarkSourceKfake(b *testing.B) {
	for _, every := range []int{1, 10} {
		b.Run(fmt.Sprintf("commit-every-%d-batches", every), func(b *testing.B) { benchSource(b, kfakeEnv(b), every) })
	}
}

func BenchmarkSourceRealBroker(b *testing.B) {
	for _, every := range []int{1, 10} {
		b.Run(fmt.Sprintf("commit-every-%d-batches", every), func(b *testing.B) { benchSource(b, realEnv(b), every) })
	}
}

func benchSource(b *testing.B, env kafkaEnv, commitEvery int) {
	var msgs []itMessage
	per := b.N/itPartitions + 1
	for p := range itPartitions {
		msgs = append(msgs, makeMessages(p, 0, per, false)...)
	}
	produce(b, env, msgs)
	cp := checkpoint.New()
	cfg := itConfig(env, fmt.Sprintf("g-bench-%d", time.Now().UnixNano()))
	cfg.BatchSize = 1000
	src, err := NewSource(cfg, cp, memory.NewGoAllocator(), zerolog.Nop())
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	ctx := context.Background()
	b.ResetTimer()
	got := 0
	for batches := 1; got < b.N; batches++ {
		bt, _, err := src.Next(ctx)
		if err != nil {
			b.Fatal(err)
		}
		bt.Ack()
		got += bt.Len()
		bt.Release()
		if batches%commitEvery == 0 || got >= b.N {
			if _, err := src.Commit(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer() // the deferred Close waits for the fetch long-poll; not part of the rate
	b.ReportMetric(float64(got)/b.Elapsed().Seconds(), "records/s")
}
