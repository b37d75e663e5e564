package pipeline

import (
	"context"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"

	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/stages/detect"
)

// TestModelVersionFromTheFutureRefused (sec26 item 2): a publication of version 2^64-1 (a
// hostile writer's, or a corrupted header with a snapshot to match) outranked every model to
// come: scorers served it for good, and a builder's next version (one above the topic's
// highest) wrapped to 0. A version is its builder's clock in ms (detect's buildVersion), so a
// reader refuses one more than maxVersionAhead ahead of its own clock: not served, not the
// builder's floor, and its chunks stay live for the builder's tombstones. One just within the
// bound is taken (clocks differ a little between hosts).
func TestModelVersionFromTheFutureRefused(t *testing.T) {
	now := time.Now()
	legit, later := uint64(now.Add(-time.Minute).UnixMilli()), uint64(now.UnixMilli())
	within, beyond := uint64(now.Add(maxVersionAhead-time.Minute).UnixMilli()), uint64(now.Add(maxVersionAhead+time.Minute).UnixMilli())
	msgs := func(v uint64) []kafka.Message {
		x, err := modelMessages(publication{model: testModel(t, v, 600)}, 4096)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	hostile := msgs(math.MaxUint64)
	log := slices.Concat(msgs(legit), hostile, msgs(beyond), msgs(later))
	a := &modelAssembler{live: map[string]uint64{}}
	refused := map[string]int{}
	a.refused = func(reason string, m kafka.Message, err error) { refused[reason]++ }
	var got []uint64
	for _, m := range log {
		if pub, err := a.add(m); err == nil && pub != nil {
			got = append(got, pub.version)
		}
	}
	if !slices.Equal(got, []uint64{legit, later}) || a.highest != later {
		t.Errorf("publications completed %v, highest %d; want %d and %d (versions 2^64-1 and an hour ahead refused)", got, a.highest, legit, later)
	}
	if refused[refusedVersionAhead] != 2 {
		t.Errorf("refusals %v, want 2 %s (one per publication)", refused, refusedVersionAhead)
	}
	p := &modelPublisher{live: a.live}
	tomb := map[string]bool{}
	for _, m := range p.tombstones(later + 1) {
		tomb[string(m.Key)] = true
	}
	for _, m := range hostile {
		if !tomb[string(m.Key)] {
			t.Errorf("the hostile publication's chunk %s is not tombstoned by the builder's next publication", m.Key)
		}
	}
	if floor := modelVersionFloor(a.highest, 0, now); floor == math.MaxUint64 || floor < later {
		t.Errorf("a builder's floor %d after the hostile publication, want the legitimate %d or the clock", floor, later)
	}
	a = &modelAssembler{}
	for _, m := range msgs(within) {
		if pub, err := a.add(m); err != nil || pub != nil && pub.version != within {
			t.Fatalf("a publication %s ahead: %v %v", maxVersionAhead-time.Minute, pub, err)
		}
	}
	if a.highest != within {
		t.Errorf("a publication %s ahead of the clock was refused (highest %d)", maxVersionAhead-time.Minute, a.highest)
	}
}

// TestKeyModelFromTheFutureRefused (sec26 item 2): a key's model (or tombstone) of version
// 2^64-1 won over every later model of its key at the scorer, and was a builder's floor for its
// keys' versions. A scorer skips it (counted as version_ahead) and keeps the key's legitimate
// model; a builder's floor passes over it.
func TestKeyModelFromTheFutureRefused(t *testing.T) {
	br := testsupport.KfakeBroker(t)
	cfg := roleConfig(br, "in", "out", "dlq", "g", "models")
	cfg.Detect.FlagBy, cfg.Detect.KeyBy = detect.FlagBySignificance, detect.KeyByKey
	r := warmKeyModel(t, cfg)
	msg := func(v uint64, model bool) kafka.Message {
		m := kafka.Message{Key: []byte(keyModelPrefix + "k"), Headers: []kafka.Header{
			{Key: headerKeyModelVersion, Value: []byte(strconv.FormatUint(v, 10))}, {Key: headerKeyPartition, Value: []byte("0")}}}
		if model {
			enc, err := detect.EncodeKeyModel(cfg.Ingest.Columns(), &cfg.Detect, "k", v, r)
			if err != nil {
				t.Fatal(err)
			}
			m.Value = enc
		}
		return m
	}
	scorer, err := detect.NewStage(cfg.Detect, cfg.Ingest.Columns(), cfg.Ingest.Uncertainty != nil, detect.Deps{Log: zerolog.Nop(), Role: detect.RoleScorer})
	if err != nil {
		t.Fatal(err)
	}
	defer scorer.Close()
	p := &Pipeline{cfg: cfg, keys: newKeyInbox()}
	read := p.keyReader(func(int32) bool { return true }, zerolog.Nop())
	legit := uint64(time.Now().UnixMilli())
	for _, m := range []kafka.Message{msg(legit-1, true), msg(math.MaxUint64, true), msg(math.MaxUint64, false), msg(legit, true)} {
		read(m)
		scorer.InstallKeyModels(p.keys.take(func(int32) bool { return true }))
	}
	if v, ok := scorer.KeyVersions()["k"]; !ok || v != legit {
		t.Errorf("key k held at version %d (held %v) after a model and a tombstone of version 2^64-1 between two of its own: want %d", v, ok, legit)
	}
	var highest uint64
	floor := keyVersionFloor(&highest, newPartition0Keys(10))
	floor(msg(legit, false))
	floor(msg(math.MaxUint64, true))
	if highest != legit {
		t.Errorf("a builder's keys' floor %d after a key's model of version 2^64-1, want %d", highest, legit)
	}
}

// TestBuilderWarnsOfItsOwnVersionAhead (reread26): a builder whose clock was more than an hour
// ahead and was set back (NTP) goes on numbering above the last version it built (in memory, or
// from its state_dir snapshot after a restart: versions never go back), so every scorer with a
// right clock refuses its models (version_ahead) until its clock reaches that version. The
// scorers counted it; the builder said nothing but "model published". It now warns at such a
// publication (once a minute at most), naming the version, its lead over the clock and what to
// do; a version within the bound publishes as before, without the warning.
func TestBuilderWarnsOfItsOwnVersionAhead(t *testing.T) {
	br := testsupport.KfakeBroker(t)
	_, _, _, _, mt := roleTopics(t, br, 1)
	cfg := roleConfig(br, "in", "out", "dlq", "g", mt)
	var logs testsupport.LogBuffer
	pub, err := newModelPublisher(cfg.modelTopic(), zerolog.New(&logs))
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const warning = "ahead of this clock"
	now := time.Now()
	if err := pub.write(ctx, publication{model: testModel(t, uint64(now.UnixMilli()), 600)}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), warning) {
		t.Fatalf("a version of the clock warned: %s", logs.String())
	}
	ahead := uint64(now.Add(2 * maxVersionAhead).UnixMilli())
	if err := pub.write(ctx, publication{model: testModel(t, ahead, 600)}); err != nil {
		t.Fatal(err)
	}
	var line string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, warning) {
			line = l
		}
	}
	if line == "" || !strings.Contains(line, `"level":"warn"`) || !strings.Contains(line, strconv.FormatUint(ahead, 10)) || !strings.Contains(line, "version_ahead") {
		t.Fatalf("a publication of version %d, %s ahead of the clock: log %s; want a warning naming it and the scorers' refusal", ahead, 2*maxVersionAhead, logs.String())
	}
}

// TestKeyPublisherWarnsOfItsOwnVersionAhead (twenty-eighth session; the closing note's "the
// keys' publisher does not warn of its own versions ahead"): the keys' publisher numbers its
// publications above its previous one as the global model's publisher does, so a builder whose
// clock ran more than an hour ahead and was set back publishes keys' models every scorer with a
// right clock refuses (version_ahead) until its clock reaches them. The global model's
// publisher warned of it (TestBuilderWarnsOfItsOwnVersionAhead); the keys' publisher said
// "keys' models published" alone. It now warns likewise; a version of the clock does not.
func TestKeyPublisherWarnsOfItsOwnVersionAhead(t *testing.T) {
	br := testsupport.KfakeBroker(t)
	_, _, _, _, mt := roleTopics(t, br, 1)
	cfg := roleConfig(br, "in", "out", "dlq", "g", mt)
	const warning = "ahead of this clock"
	for _, tc := range []struct {
		name  string
		from  time.Duration // the publisher's previous version, ahead of the clock by
		warns bool
	}{{"clock", 0, false}, {"within the bound", maxVersionAhead / 2, false}, {"set back", 2 * maxVersionAhead, true}} {
		var logs testsupport.LogBuffer
		kp, err := newKeyPublisher(cfg.modelTopic(), cfg.Ingest.Columns(), cfg.Detect, zerolog.New(&logs))
		if err != nil {
			t.Fatal(err)
		}
		kp.version = uint64(time.Now().Add(tc.from).UnixMilli())
		kp.add([]detect.KeyModel{{Key: "k"}}) // a tombstone: a publication without a model to encode
		drain := make(chan struct{})
		close(drain) // one round, then run returns
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		kp.run(ctx, drain)
		cancel()
		kp.Close()
		if !strings.Contains(logs.String(), "keys' models published") {
			t.Fatalf("%s: the publication did not happen: %s", tc.name, logs.String())
		}
		var line string
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, warning) {
				line = l
			}
		}
		switch {
		case !tc.warns && line != "":
			t.Errorf("%s: a version %v ahead of the clock warned: %s", tc.name, tc.from, line)
		case tc.warns && (line == "" || !strings.Contains(line, `"level":"warn"`) || !strings.Contains(line, strconv.FormatUint(kp.version, 10)) ||
			!strings.Contains(line, "version_ahead") || !strings.Contains(line, "keys' models")):
			t.Errorf("%s: a keys' publication of version %d, %v ahead of the clock: log %s; want a warning naming the keys' models, the version and the scorers' refusal", tc.name, kp.version, tc.from, logs.String())
		}
	}
}
