package detect

import (
	"fmt"
	"math"
	"reflect"
	"runtime"
	"testing"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/rs/zerolog"
)

// TestKeyedParallelMatchesSerial: through the whole stage (the global model, the keys' models,
// the caps, the recent ranks, the explanations), the keys' parallel path on 8 workers gives
// every record the serial path's scores bit for bit, and leaves the same keys in the same
// least-recently-seen order with the same stats: a fleet within keys.max_keys (every batch
// parallel, keys rebuilt several times a batch) and one growing past it (parallel while the new
// keys fit, serial once they evict).
func TestKeyedParallelMatchesSerial(t *testing.T) {
	defer func(p int) { parallelGrain = p }(parallelGrain)
	parallelGrain = 16
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(8))
	for _, c := range []struct {
		name                   string
		sensors, rows, joining int
		maxKeys                int
	}{
		{"within max_keys", 40, 12000, 0, 100000},
		{"growing past max_keys", 130, 16000, 100, 120},
	} {
		t.Run(c.name, func(t *testing.T) {
			rows := joiningFleet(c.sensors, c.rows, c.joining, 0.01, 3, "sensor-%03d")
			cfg := keyedConfig()
			cfg.Keys.MaxKeys = c.maxKeys
			run := func(serial bool) ([]string, *keyedScorer) {
				mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
				defer mem.AssertSize(t, 0)
				s, err := NewStage(cfg, []string{"value"}, false, Deps{Log: zerolog.Nop()})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				s.keyed.serial = serial
				sc := feedRows(t, s, mem, rows, 0, len(rows), func(i int) int64 { return int64(i) }, func(string) int32 { return 0 })
				out := make([]string, len(sc))
				for i, x := range sc { // (%+v: NaN equals NaN; the bits of the score besides)
					out[i] = fmt.Sprintf("%+v %x %x", x, math.Float64bits(x.Score), math.Float64bits(x.Recent))
				}
				return out, s.keyed
			}
			want, ks := run(true)
			got, kp := run(false)
			if len(got) != len(want) {
				t.Fatalf("%d scores, want %d", len(got), len(want))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("record %d: parallel %s\nserial %s", i, got[i], want[i])
				}
			}
			if ks.stats() != kp.stats() || !reflect.DeepEqual(recencyOrder(ks), recencyOrder(kp)) {
				t.Fatalf("stats %+v and %+v, or the keys' order differ", ks.stats(), kp.stats())
			}
			if c.maxKeys < c.sensors && ks.stats().Evictions == 0 || ks.stats().Live == 0 {
				t.Fatalf("stats %+v: no key evicted or none warm: the case misses its point", ks.stats())
			}
			t.Logf("stats %+v", kp.stats())
		})
	}
}
