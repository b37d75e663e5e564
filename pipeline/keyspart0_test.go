package pipeline

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/stages/detect"
)

// TestPartition0KeysBounded: a builder's start-up read of the model topic's partition 0 held
// every key whose newest message there is a model, as many as a writer put there (failed
// before the bound: 25 keys held under keys.max_keys 10). Now it holds at most max_keys; past
// them it notes where the first key not held lay, and after the tombstones of the keys held
// reads partition 0 again from there, until every key left there has its tombstone: here 25
// keys (one tombstoned by the writer before, one written twice, one tombstoned and written
// again) in 3 passes, never more than 10 held.
func TestPartition0KeysBounded(t *testing.T) {
	f := newScanFixture(t)
	what := keysOf("p0", 25, "new")
	f.write(t, what)
	f.write(t, map[string]string{"p0-003": "tomb", "p0-004": "new", "p0-005": "tomb"})
	f.write(t, map[string]string{"p0-005": "new"})
	f.write(t, keysOf("k", 6, "new")) // (the keys' partitions: not partition 0's)
	p, err := newKeyPublisher(f.cfg.modelTopic(), f.cfg.Ingest.Columns(), f.cfg.Detect, zerolog.New(zerolog.NewTestWriter(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	fol, err := newModelFollower(f.cfg.modelTopic(), f.cfg.Ingest.Columns(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer fol.Close()
	var highest uint64
	on0 := newPartition0Keys(10)
	on0.track = true
	most, notes := 0, 0
	on0.held = func(n int) { most, notes = max(most, n), notes+1 }
	fol.onKey = keyVersionFloor(&highest, on0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := fol.newest(ctx); err != nil { // the builder's start-up read (readModelTopic)
		t.Fatal(err)
	}
	if notes != 29 {
		t.Fatalf("the start-up read noted %d key model messages of partition 0, want 29", notes)
	}
	p.tombstonePartition0(ctx, kafka.DefaultDialer, on0, highest)
	newest := map[string]kafka.Message{}
	for _, m := range modelPartitionMessages(t, f.br, f.mt, 0) {
		newest[string(m.Key[len(keyModelPrefix):])] = m
	}
	if len(newest) != 25 {
		t.Fatalf("%d keys on partition 0, want 25", len(newest))
	}
	for k, m := range newest {
		if m.Value != nil {
			t.Errorf("key %s: its model left on partition 0 (offset %d), not tombstoned", k, m.Offset)
		}
	}
	if most > 10 {
		t.Errorf("held %d keys of partition 0 at once, keys.max_keys 10", most)
	}
	t.Logf("at most %d keys held", most)
}

// TestBuilderStartReadsOnFromItsScanRecord: a builder with detect.state_dir, started again,
// reads only the key model messages written since its previous start's scan (failed before the
// record: all 38 again, not 3); and on a one-partition model topic, where a key's model on
// partition 0 is no leftover, its start-up read holds none of the keys' names (before: every
// key on the topic, held for nothing).
func TestBuilderStartReadsOnFromItsScanRecord(t *testing.T) {
	for _, parts := range []int{3, 1} {
		t.Run(fmt.Sprintf("model_partitions=%d", parts), func(t *testing.T) {
			br := testsupport.KfakeBroker(t, kfake.SeedTopics(2, "in", "out", "dlq"))
			createCompactedTopic(t, br, "models", parts)
			f := newScanFixtureOn(t, br, "models")
			cfg := f.cfg
			cfg.Run.Role, cfg.Run.KeyPublishInterval = detect.RoleBuilder, time.Second
			cfg.Detect.StateDir = t.TempDir()
			total := f.write(t, keysOf("old", 30, "old"))
			total += f.write(t, keysOf("new", 8, "new"))
			start := func(want int) {
				t.Helper()
				b := startPipeline(t, cfg, nil)
				var read, on0 int
				waitFor(t, 30*time.Second, "the builder's scan of the model topic", func() bool {
					b.p.keyPub.stale.mu.Lock()
					defer b.p.keyPub.stale.mu.Unlock()
					read = b.p.keyPub.stale.read
					return b.p.keyPub.stale.scanned
				})
				on0 = len(b.p.keysOn0.keys)
				if err := b.stop(t, 20*time.Second); err != nil {
					t.Fatal(err)
				}
				if read != want {
					t.Errorf("the builder's scan read %d messages, want %d", read, want)
				}
				if on0 != 0 {
					t.Errorf("the builder's start-up read holds %d keys of partition 0, want none (no key's model there is a leftover)", on0)
				}
			}
			start(total)
			start(f.write(t, map[string]string{"old-000": "new", "old-001": "tomb", "later-000": "old"}))
		})
	}
}
