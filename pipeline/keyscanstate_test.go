package pipeline

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/stages/detect"
)

// scanFixture is a model topic of 3 partitions (the global model's and two of keys' models) on
// kfake and a builder's configuration (cfg) and another's (a feature dropped: old).
type scanFixture struct {
	br       testsupport.Broker
	mt       string
	cfg, old Config
	model    *detect.Ranker
	oldModel *detect.Ranker
	w        *kafka.Writer
	version  uint64
	m        int // the model topic's partitions the builder's scan is told of
}

func newScanFixture(t *testing.T) *scanFixture {
	t.Helper()
	br := testsupport.KfakeBroker(t)
	createCompactedTopic(t, br, "models", 3)
	return newScanFixtureOn(t, br, "models")
}

// newScanFixtureOn is newScanFixture's on br, its model topic mt (created already).
func newScanFixtureOn(t *testing.T, br testsupport.Broker, mt string) *scanFixture {
	t.Helper()
	f := &scanFixture{br: br, mt: mt, m: 3}
	f.cfg = roleConfig(f.br, "in", "out", "dl", "g", f.mt)
	f.cfg.Detect.FlagBy, f.cfg.Detect.KeyBy = detect.FlagBySignificance, detect.KeyByKey
	f.old = f.cfg
	f.old.Ingest.Features = f.cfg.Ingest.Features[:len(f.cfg.Ingest.Features)-1]
	f.model, f.oldModel = warmKeyModel(t, f.cfg), warmKeyModel(t, f.old)
	f.w = &kafka.Writer{Addr: kafka.TCP(f.br.Addrs...), Topic: f.mt, Balancer: keyModelBalancer(), BatchSize: 1000,
		BatchTimeout: time.Millisecond, RequiredAcks: kafka.RequireAll}
	t.Cleanup(func() { f.w.Close() })
	return f
}

// write writes a message per key: a model of cfg ("new"), of old ("old") or a tombstone
// ("tomb"), each key on input partition 0 or 1 by its last digit (model partition 1 or 2), or
// on partition 0 when the key starts with "p0-" (a one-partition layout's).
func (f *scanFixture) write(t *testing.T, what map[string]string) int {
	t.Helper()
	var msgs []kafka.Message
	for key, kind := range what {
		f.version++
		v := []byte(strconv.FormatUint(f.version, 10))
		part := strconv.Itoa(int(key[len(key)-1]-'0') % 2)
		if strings.HasPrefix(key, "p0-") {
			part = "-1"
		}
		m := kafka.Message{Key: []byte(keyModelPrefix + key), Headers: []kafka.Header{{Key: headerKeyModelVersion, Value: v},
			{Key: headerKeyPartition, Value: []byte(part)}}}
		var err error
		switch kind {
		case "new":
			m.Value, err = detect.EncodeKeyModel(f.cfg.Ingest.Columns(), &f.cfg.Detect, key, f.version, f.model)
		case "old":
			m.Value, err = detect.EncodeKeyModel(f.old.Ingest.Columns(), &f.old.Detect, key, f.version, f.oldModel)
		}
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		err := f.w.WriteMessages(ctx, msgs...)
		if err == nil {
			return len(msgs)
		}
		if !transient(err) || ctx.Err() != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// scan is a builder's start-up scan under cfg with state_dir dir ("": none): the stale keys
// found (key -> reason) and the messages read.
func (f *scanFixture) scan(t *testing.T, cfg Config, dir string) (map[string]string, int) {
	t.Helper()
	p := &keyPublisher{cfg: cfg.modelTopic(), features: cfg.Ingest.Columns(), detect: cfg.Detect, log: zerolog.Nop(),
		wake: make(chan struct{}, 1)}
	p.stale.dir = dir
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p.scanStale(ctx, kafka.DefaultDialer, f.m)
	if !p.stale.scanned {
		t.Fatal("the scan did not end")
	}
	got := map[string]string{}
	for ref, sk := range p.stale.found {
		if want := keyModelPartition(int32(ref.key[len(ref.key)-1]-'0')%2, f.m); ref.mp != want {
			t.Fatalf("stale key %s found on model partition %d, written to %d", ref.key, ref.mp, want)
		}
		got[ref.key] = sk.reason
	}
	return got, p.stale.read
}

func keysOf(prefix string, n int, kind string) map[string]string {
	m := map[string]string{}
	for i := range n {
		m[fmt.Sprintf("%s-%03d", prefix, i)] = kind
	}
	return m
}

// TestStaleScanResumesFromTheRecord: a builder with detect.state_dir read the whole model topic
// at each start (failed before the record: the second start read all 66 messages again, not
// the 6 written since the first). Now the second start reads only what was written since the
// first's scan, and finds what a scan from the start finds: the keys stale at the first (their
// model of the old configuration still the newest), not those since replaced by a model of the
// builder's configuration or a tombstone, and a key of the old configuration written since.
func TestStaleScanResumesFromTheRecord(t *testing.T) {
	f := newScanFixture(t)
	dir := t.TempDir()
	total := f.write(t, keysOf("old", 40, "old"))
	total += f.write(t, keysOf("new", 20, "new"))
	first, read := f.scan(t, f.cfg, dir)
	if read != total || len(first) != 40 {
		t.Fatalf("the first scan read %d messages and found %d stale keys, want %d and 40", read, len(first), total)
	}
	if _, err := os.Stat(filepath.Join(dir, scanStateName)); err != nil {
		t.Fatalf("no record of the scan in state_dir: %v", err)
	}
	since := f.write(t, map[string]string{"old-000": "new", "old-001": "tomb", "old-002": "old", "later-000": "old", "later-001": "new", "new-000": "tomb"})
	total += since
	second, read := f.scan(t, f.cfg, dir)
	full, fullRead := f.scan(t, f.cfg, "")
	if fullRead != total {
		t.Fatalf("a scan from the start read %d messages, %d were written", fullRead, total)
	}
	if read != since {
		t.Errorf("the second start read %d messages, want the %d written since the first (of %d)", read, since, total)
	}
	if !maps.Equal(second, full) {
		t.Errorf("the second start found %d stale keys, a scan from the start %d: differ %d", len(second), len(full), changed(second, full))
	}
	if _, ok := full["later-000"]; !ok || len(full) != 39 {
		t.Errorf("a scan from the start found %d stale keys (later-000 among them: %v), want 39 and yes", len(full), ok)
	}
	// A third start with nothing written since reads nothing and finds the same.
	third, read := f.scan(t, f.cfg, dir)
	if read != 0 || !maps.Equal(third, full) {
		t.Errorf("a third start read %d messages (want 0) and found %d stale keys (want %d)", read, len(third), len(full))
	}
}

// TestStaleScanRecordFallsBack: the record is not read on from where it no longer tells the
// truth: another configuration (the keys' settings changed: every model is judged again; not
// keys.min_records, which the judgment passes over), partitions added (the keys' places move), a
// topic deleted and created again (its end below the record's offsets: the record's stale keys
// are gone with it), records deleted below the log's start (past the record's offsets), a
// record that does not read. Each reads the topic from the start and finds what a scan from the
// start finds.
func TestStaleScanRecordFallsBack(t *testing.T) {
	setUp := func(t *testing.T) (*scanFixture, string, int) {
		f := newScanFixture(t)
		dir := t.TempDir()
		n := f.write(t, keysOf("old", 30, "old"))
		n += f.write(t, keysOf("new", 10, "new"))
		if _, read := f.scan(t, f.cfg, dir); read != n {
			t.Fatalf("the first scan read %d messages, want %d", read, n)
		}
		return f, dir, n
	}
	check := func(t *testing.T, f *scanFixture, cfg Config, dir string, wantRead int) {
		t.Helper()
		got, read := f.scan(t, cfg, dir)
		full, fullRead := f.scan(t, cfg, "")
		if read != wantRead || read != fullRead || !maps.Equal(got, full) {
			t.Errorf("read %d messages (want %d, a scan from the start %d) and found %d stale keys, %d differing from a scan from the start",
				read, wantRead, fullRead, len(got), changed(got, full))
		}
	}
	t.Run("another configuration", func(t *testing.T) {
		f, dir, n := setUp(t)
		other := f.cfg
		other.Detect.Keys.K = f.cfg.Detect.Keys.K - 1 // (every model on the topic of another one now)
		check(t, f, other, dir, n)
		if got, _ := f.scan(t, other, ""); len(got) != 40 {
			t.Errorf("under other keys' settings %d keys' models found stale, want all 40", len(got))
		}
	})
	t.Run("keys.min_records changed: read on", func(t *testing.T) {
		f, dir, _ := setUp(t)
		other := f.cfg
		other.Detect.Keys.MinRecords++ // (a scorer's check passes over it: the judgment is the same)
		got, read := f.scan(t, other, dir)
		if full, _ := f.scan(t, other, ""); read != 0 || !maps.Equal(got, full) {
			t.Errorf("read %d messages (want 0) and found %d stale keys, %d differing from a scan from the start", read, len(got), changed(got, full))
		}
	})
	t.Run("partitions added", func(t *testing.T) {
		f, dir, n := setUp(t)
		cl := &kafka.Client{Addr: kafka.TCP(f.br.Addrs...), Timeout: 10 * time.Second}
		res, err := cl.CreatePartitions(context.Background(), &kafka.CreatePartitionsRequest{Topics: []kafka.TopicPartitionsConfig{{Name: f.mt, Count: 4}}})
		if err == nil && res.Errors[f.mt] != nil {
			err = res.Errors[f.mt]
		}
		if err != nil {
			t.Fatal(err)
		}
		f.m = 4 // (the keys of input partitions 0 and 1 stay on model partitions 1 and 2)
		check(t, f, f.cfg, dir, n)
	})
	t.Run("topic recreated", func(t *testing.T) {
		f, dir, _ := setUp(t)
		cl := &kafka.Client{Addr: kafka.TCP(f.br.Addrs...), Timeout: 10 * time.Second}
		if _, err := cl.DeleteTopics(context.Background(), &kafka.DeleteTopicsRequest{Topics: []string{f.mt}}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "the topic deleted", func() bool {
			_, err := modelTopicPartitions(context.Background(), f.cfg.modelTopic(), kafka.DefaultDialer)
			return err != nil
		})
		createCompactedTopic(t, f.br, f.mt, 3)
		n := f.write(t, keysOf("again", 4, "old"))
		check(t, f, f.cfg, dir, n)
	})
	t.Run("records deleted below the log start", func(t *testing.T) {
		f, dir, n := setUp(t)
		n += f.write(t, keysOf("more", 10, "old"))
		cl, err := kgo.NewClient(kgo.SeedBrokers(f.br.Addrs...))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		req := kmsg.NewPtrDeleteRecordsRequest()
		rt := kmsg.NewDeleteRecordsRequestTopic()
		rt.Topic = f.mt
		for mp := range 3 {
			rp := kmsg.NewDeleteRecordsRequestTopicPartition()
			rp.Partition, rp.Offset = int32(mp), 22 // (each key partition: 20 messages at the record, 25 now)
			if mp == 0 {
				rp.Offset = 0
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(context.Background(), cl)
		if err != nil {
			t.Fatal(err)
		}
		for _, tp := range resp.Topics {
			for _, pp := range tp.Partitions {
				if pp.ErrorCode != 0 || pp.Partition > 0 && pp.LowWatermark != 22 {
					t.Fatalf("deleting records of partition %d: error %d, low watermark %d", pp.Partition, pp.ErrorCode, pp.LowWatermark)
				}
			}
		}
		check(t, f, f.cfg, dir, n-2*22)
	})
	t.Run("record that does not read", func(t *testing.T) {
		f, dir, n := setUp(t)
		path := filepath.Join(dir, scanStateName)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)-1] ^= 1
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		check(t, f, f.cfg, dir, n)
	})
}

// TestScanRecordRoundTrip: a record reads back as written (the keys of input partition -1, of a
// release before the header, included), and not under another identity.
func TestScanRecordRoundTrip(t *testing.T) {
	id := [32]byte{1, 2, 3}
	ends := map[int]int64{1: 7, 2: 1 << 40}
	found := map[staleRef]staleKey{{1, "a"}: {part: 0, version: 9, reason: "r1"}, {2, "b"}: {part: -1, version: 1 << 63, reason: "r2"},
		{2, "c"}: {part: 5, version: 3, reason: "r1"}}
	rec, err := decodeScanRecord(encodeScanRecord(id, ends, found), id)
	if err != nil {
		t.Fatal(err)
	}
	back := map[staleRef]staleKey{}
	for mp, f := range rec.found {
		for ref, sk := range f {
			if ref.mp != mp {
				t.Errorf("key %v read back under model partition %d", ref, mp)
			}
			back[ref] = sk
		}
	}
	if !maps.Equal(rec.ends, ends) || !maps.Equal(back, found) {
		t.Errorf("read back %v %v, wrote %v %v", rec.ends, rec.found, ends, found)
	}
	if _, err := decodeScanRecord(encodeScanRecord(id, ends, found), [32]byte{1, 2, 4}); err != errScanIdentity {
		t.Errorf("under another identity: %v, want errScanIdentity", err)
	}
	f := newScanFixture(t)
	p := &keyPublisher{cfg: f.cfg.modelTopic(), features: f.cfg.Ingest.Columns(), detect: f.cfg.Detect}
	q := &keyPublisher{cfg: f.old.modelTopic(), features: f.old.Ingest.Columns(), detect: f.old.Detect}
	other := f.cfg.modelTopic()
	other.topic = "models2"
	r := &keyPublisher{cfg: other, features: f.cfg.Ingest.Columns(), detect: f.cfg.Detect}
	if p.scanIdentity(3) == q.scanIdentity(3) || p.scanIdentity(3) == p.scanIdentity(4) || p.scanIdentity(3) == r.scanIdentity(3) {
		t.Error("the scan's identity does not change with the features, the partitions or the topic")
	}
}

// TestStaleScanResumesOnACompactedTopicRealBroker: on a topic the broker compacted after the
// record was written (models of the keys below the record's offsets replaced and removed,
// messages above them removed too), the next start reads on from the record's offsets, fewer
// messages than a scan from the start, and finds what a scan from the start finds.
func TestStaleScanResumesOnACompactedTopicRealBroker(t *testing.T) {
	br := testsupport.RealBroker(t)
	mt := testsupport.UniqueName("ks-resume")
	compactedAtOnce(t, br, mt, 3)
	f := newScanFixtureOn(t, br, mt)
	dir := t.TempDir()
	written := f.write(t, keysOf("old", 30, "old"))
	if _, read := f.scan(t, f.cfg, dir); read != written {
		t.Fatalf("the first scan read %d messages, want %d", read, written)
	}
	replaced := map[string]string{}
	for i := range 15 {
		replaced[fmt.Sprintf("old-%03d", i)] = map[bool]string{true: "new", false: "tomb"}[i < 10]
	}
	written += f.write(t, replaced)
	written += f.write(t, keysOf("old", 10, "new")) // (again: the first of the two is compacted away)
	written += f.write(t, keysOf("later", 4, "old"))
	waitCompacted(t, br, mt)
	got, read := f.scan(t, f.cfg, dir)
	full, fullRead := f.scan(t, f.cfg, "")
	t.Logf("written %d key model messages; a scan from the start read %d messages, the resumed one %d", written, fullRead, read)
	if !maps.Equal(got, full) || len(full) != 19 {
		t.Errorf("the resumed scan found %d stale keys, a scan from the start %d (want 19): %d differ", len(got), len(full), changed(got, full))
	}
	if read >= fullRead {
		t.Errorf("the resumed scan read %d messages, a scan from the start %d", read, fullRead)
	}
}

// TestScanRecordFollowsOwnWrites: the record held the scan's offsets alone, so a start read all
// the builder had published since the previous start (failed before the record moved on: 15
// messages read, the builder's own, not 0). Now the record moves on through the builder's own
// writes, each key written no longer stale in it, and the next start reads none of them; a
// message of another writer in between stops the record on that model partition (the next
// start reads on from it there: that message and the builder's after it), not on the other.
func TestScanRecordFollowsOwnWrites(t *testing.T) {
	f := newScanFixture(t)
	dir := t.TempDir()
	f.write(t, keysOf("old", 30, "old"))
	f.write(t, keysOf("new", 10, "new"))
	p, err := newKeyPublisher(f.cfg.modelTopic(), f.cfg.Ingest.Columns(), f.cfg.Detect, zerolog.New(zerolog.NewTestWriter(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.stale.dir = dir
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p.scanStale(ctx, kafka.DefaultDialer, 3)
	publish := func(keys map[string]bool) { // key -> a model (true) or evicted (false)
		t.Helper()
		todo := map[string]detect.KeyModel{}
		for k, model := range keys {
			km := detect.KeyModel{Key: k, Partition: int32(k[len(k)-1]-'0') % 2}
			if model {
				km.Model = f.model
			}
			todo[k] = km
		}
		p.version++
		if _, err := p.publish(ctx, todo); err != nil {
			t.Fatal(err)
		}
	}
	own := map[string]bool{"old-005": false}
	for i := range 5 {
		own[fmt.Sprintf("old-%03d", i)] = true
	}
	for i := range 9 {
		own[fmt.Sprintf("fresh-%03d", i)] = true
	}
	publish(own)
	p.saveAdvance(ctx, true)
	got, read := f.scan(t, f.cfg, dir)
	full, _ := f.scan(t, f.cfg, "")
	if read != 0 || !maps.Equal(got, full) || len(full) != 24 {
		t.Errorf("after the builder's own 15 messages: read %d (want 0), found %d stale keys, a scan from the start %d (want 24): %d differ",
			read, len(got), len(full), changed(got, full))
	}

	// Another writer's message on model partition 1, then the builder's two there: the record
	// stops on partition 1 at that message, and moves on on partition 2.
	p2, err := newKeyPublisher(f.cfg.modelTopic(), f.cfg.Ingest.Columns(), f.cfg.Detect, zerolog.New(zerolog.NewTestWriter(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close()
	p2.stale.dir = dir
	p = p2 // (its start: the record read on from, then followed)
	p.scanStale(ctx, kafka.DefaultDialer, 3)
	f.write(t, map[string]string{"later-000": "old"}) // (a key stale from now on)
	publish(map[string]bool{"fresh-020": true, "fresh-022": true, "fresh-031": true, "old-007": true})
	p.saveAdvance(ctx, true)
	got, read = f.scan(t, f.cfg, dir)
	full, _ = f.scan(t, f.cfg, "")
	if read != 3 || !maps.Equal(got, full) {
		t.Errorf("after another writer's message on partition 1: read %d (want 3: it and the builder's 2 after it there), found %d stale keys, a scan from the start %d: %d differ",
			read, len(got), len(full), changed(got, full))
	}
}

// TestKeyedBuilderRestartReadsItsRecordRealBroker: a builder with key_by and state_dir that
// published every key's model, stopped and started again, reads none of the keys' models at
// its second start (the record followed its own writes to the stop's last publication); before
// the record, the second start read every message on the keys' partitions.
func TestKeyedBuilderRestartReadsItsRecordRealBroker(t *testing.T) {
	br := testsupport.RealBroker(t)
	const parts = 3
	in, out, dlq, group, _ := roleTopics(t, br, parts)
	mt := testsupport.UniqueName("ks-restart")
	createCompactedTopic(t, br, mt, parts+1)
	cfg := roleConfig(br, in, out, dlq, group, mt)
	cfg.Run.Role, cfg.Run.KeyPublishInterval = detect.RoleBuilder, time.Second
	cfg.Detect.FlagBy, cfg.Detect.KeyBy = detect.FlagBySignificance, detect.KeyByKey
	cfg.Detect.StateDir = t.TempDir()
	recs := keyedRecords(t, 8000, parts, 93)
	produceSome(t, br, newInput(in, parts, recs), recs)
	onKeys := func() int {
		n := 0
		for mp := 1; mp <= parts; mp++ {
			n += len(modelPartitionMessages(t, br, mt, mp))
		}
		return n
	}
	first := startPipeline(t, cfg, nil)
	waitFor(t, 60*time.Second, "the builder publishing the keys' models", func() bool { return onKeys() >= 64 })
	if err := first.stop(t, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	written := onKeys()
	second := startPipeline(t, cfg, nil)
	var read int
	waitFor(t, 30*time.Second, "the second start's scan", func() bool {
		second.p.keyPub.stale.mu.Lock()
		defer second.p.keyPub.stale.mu.Unlock()
		read = second.p.keyPub.stale.read
		return second.p.keyPub.stale.scanned
	})
	if err := second.stop(t, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d messages on the keys' partitions at the stop; the second start's scan read %d", written, read)
	if read != 0 {
		t.Errorf("the second start's scan read %d messages of the %d the first start wrote, want 0", read, written)
	}
}
