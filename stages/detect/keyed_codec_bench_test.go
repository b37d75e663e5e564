package detect

import (
	"context"
	"testing"
)

// BenchmarkKeysCodec: what moving the keys' state costs (issue 21 item 3), at 10,000 warm keys of
// 3 features and the default keys' settings (full windows of 200): a key's model encoded for the
// model topic (the builder's publisher, per key) and decoded (a scorer, per key: its start-up
// read and a restore after a rebalance are this times the keys on the topic), and the keys'
// state copied (on the detect goroutine: the pause a save costs), encoded (on the saver's
// goroutine) and decoded (at start). ns/op is per key throughout.
func BenchmarkKeysCodec(b *testing.B) {
	const keys = 10_000
	kb := newKeyedBench(b, keyedConfig(), keys, nil, 0)
	defer kb.s.Close()
	s := kb.s
	names := make([]string, 0, keys)
	for key := range s.keyed.keys {
		names = append(names, key)
	}
	encoded := make([][]byte, len(names))
	for i, key := range names {
		v, err := EncodeKeyModel(s.features, &s.cfg, key, 1, s.keyed.keys[key].model)
		if err != nil {
			b.Fatal(err)
		}
		encoded[i] = v
	}
	b.Run("model-encode", func(b *testing.B) {
		bytes := 0
		for i := range b.N {
			key := names[i%len(names)]
			v, err := EncodeKeyModel(s.features, &s.cfg, key, 1, s.keyed.keys[key].model)
			if err != nil {
				b.Fatal(err)
			}
			bytes += len(v)
		}
		b.ReportMetric(float64(bytes)/float64(b.N), "bytes/key")
	})
	b.Run("model-decode", func(b *testing.B) {
		for i := range b.N {
			if _, _, _, err := DecodeKeyModel(encoded[i%len(encoded)], s.features, &s.cfg); err != nil {
				b.Fatal(err)
			}
		}
	})
	state := s.keyed.encodeKeys(s.features, &s.cfg)
	b.Run("state-copy", func(b *testing.B) {
		for range b.N / keys {
			s.keyed.keysCopy()
		}
	})
	states := s.keyed.keysCopy()
	b.Run("state-encode", func(b *testing.B) {
		for range b.N / keys {
			encodeKeyStates(states, nil, 0, s.features, &s.cfg)
		}
		b.ReportMetric(float64(len(state))/keys, "bytes/key")
	})
	b.Run("state-decode", func(b *testing.B) {
		for range b.N / keys {
			k := newKeyedScorer()
			if _, err := k.decodeKeys(context.Background(), KeysSnapshotFormat, state, s.features, &s.cfg); err != nil {
				b.Fatal(err)
			}
		}
	})
	// A scorer's alarm state with the same keys' models installed: copied on the detect
	// goroutine (the pause its save costs: its keys' caps) and encoded on the saver's.
	sc, err := NewStage(s.cfg, s.features, false, Deps{Log: s.deps.Log, Role: RoleScorer})
	if err != nil {
		b.Fatal(err)
	}
	defer sc.Close()
	ms := make([]KeyModel, 0, keys)
	for _, key := range names {
		ms = append(ms, KeyModel{Key: key, Version: 1, Model: s.keyed.keys[key].model})
	}
	sc.InstallKeyModels(ms)
	b.Run("scorer-alarms-copy", func(b *testing.B) {
		for range b.N / keys {
			sc.alarmsCopy()
		}
	})
	al := sc.alarmsCopy()
	b.Run("scorer-alarms-encode", func(b *testing.B) {
		bytes := 0
		for range b.N / keys {
			bytes = len(al.encode(s.cfg.Keys.Window))
		}
		b.ReportMetric(float64(bytes)/keys, "bytes/key")
	})
}
