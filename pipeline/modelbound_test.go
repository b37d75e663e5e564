package pipeline

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"

	"github.com/outlierd/outlierd/internal/datasets/synth"
	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/stages/detect"
)

// hostileChunk is chunk i of n of version v holding value: what anyone with Write on the model
// topic can send (the headers well-formed, the digest of nothing).
func hostileChunk(v uint64, i, n int, value []byte, offset int64) kafka.Message {
	return kafka.Message{Topic: "models", Partition: 0, Offset: offset, Key: []byte(modelChunkKey(v, i)), Value: value,
		Headers: []kafka.Header{
			{Key: headerModelVersion, Value: []byte(strconv.FormatUint(v, 10))},
			{Key: headerModelChunk, Value: []byte(strconv.Itoa(i) + "/" + strconv.Itoa(n))},
			{Key: headerModelSHA256, Value: []byte(strings.Repeat("ab", 32))},
		}}
}

// heapInUse is the live heap after a collection.
func heapInUse() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// TestModelAssemblerBoundsMemory (sec26 item 1): a writer to the model topic grew a scorer's
// memory chunk by chunk without limit (one publication of 2^30 chunks held every chunk until
// its last). The assembler holds at most the configuration's PublicationBound: the chunk that
// would pass it refuses the publication (reason too_large, the rest of its chunks passed over
// without a word each), a publication started over another drops the one pending (reason
// incomplete), and a real publication after all that still reassembles. Measured: the heap the
// assembler keeps after a hostile stream of 10 bounds, against the bound.
func TestModelAssemblerBoundsMemory(t *testing.T) {
	cfg := detect.Default()
	bound := detect.PublicationBound(synth.SensorFeatures, &cfg)
	a := modelAssembler{bound: bound}
	reasons := map[string]int{}
	a.refused = func(reason string, m kafka.Message, err error) {
		reasons[reason]++
		if !strings.Contains(err.Error(), "version") {
			t.Errorf("refusal %s at offset %d says %q, naming no version", reason, m.Offset, err)
		}
	}
	value := make([]byte, 64<<10)
	base := heapInUse()
	held, n, off, kept := 0, 0, int64(0), int64(0)
	for ; n*len(value) < 10*bound; n++ {
		if pub, _ := a.add(hostileChunk(9, n, 1<<30, value, off)); pub != nil {
			t.Fatal("a hostile publication completed")
		}
		off++
		held = max(held, cap(a.data))
		if n%4 == 0 { // (the peak lasts the ~100 chunks up to the refusal)
			kept = max(kept, heapInUse()-base)
		}
	}
	t.Logf("%d chunks of %d bytes (%d MB) of one publication of 2^30 chunks: the assembler held at most %d bytes, the heap grew by %d bytes at most; bound %d bytes (detect.Default, %d features)",
		n, len(value), n*len(value)>>20, held, kept, bound, len(synth.SensorFeatures))
	if held > bound {
		t.Errorf("the assembler held %d bytes, over the bound %d", held, bound)
	}
	// (the heap also holds what the runtime allocated meanwhile: 1 MB of slack for it)
	if kept > int64(bound)+1<<20 {
		t.Errorf("the heap grew by %d bytes under the hostile publication, want at most the bound %d + 1 MB", kept, bound)
	}
	if reasons[refusedTooLarge] != 1 {
		t.Errorf("refusals %v, want one %s (the publication, not each of its chunks)", reasons, refusedTooLarge)
	}
	// A publication declaring 2^62 chunks: its storage is sized by the bound, not by the count
	// times the first chunk (which overflows).
	if _, err := a.add(hostileChunk(10, 0, 1<<62, value, off)); err != nil || cap(a.data) > bound {
		t.Errorf("a publication of 2^62 chunks: %v, %d bytes held", err, cap(a.data))
	}
	off++
	reasons[refusedIncomplete]-- // (it is dropped by the next start below)
	// Many publications started and never finished: one is pending at a time.
	for v := range uint64(100) {
		a.add(hostileChunk(100+v, 0, 2, value, off))
		off++
	}
	if reasons[refusedIncomplete] != 99 || cap(a.data) > bound {
		t.Errorf("refusals %v after 100 publications started, want 99 %s; %d bytes held", reasons, refusedIncomplete, cap(a.data))
	}
	// A model published by the builder afterwards still reassembles.
	msgs, err := modelMessages(publication{model: testModel(t, 300, 600)}, 4096)
	if err != nil {
		t.Fatal(err)
	}
	var pub *assembled
	for _, x := range msgs {
		if pub, err = a.add(x); err != nil {
			t.Fatalf("the builder's publication after the hostile ones: %v", err)
		}
	}
	if pub == nil || pub.version != 300 {
		t.Fatalf("the builder's publication after the hostile ones: %+v", pub)
	}
	if reasons[refusedIncomplete] != 100 {
		t.Errorf("refusals %v, want the last hostile start dropped too", reasons)
	}
}

// TestModelAssemblerRefusesTooLarge: a publication over the bound is refused whole with an error
// that says why (errPublicationTooLarge), whatever its chunks' sizes; one at the bound passes.
func TestModelAssemblerRefusesTooLarge(t *testing.T) {
	m := testModel(t, 5, 600)
	msgs, err := modelMessages(publication{model: m}, 4096)
	if err != nil {
		t.Fatal(err)
	}
	size := 0
	for _, x := range msgs {
		size += len(x.Value)
	}
	for _, bound := range []int{size, size - 1} {
		a := modelAssembler{bound: bound}
		var errs []error
		a.refused = func(_ string, _ kafka.Message, err error) { errs = append(errs, err) }
		var pub *assembled
		for _, x := range msgs {
			p, err := a.add(x)
			if err != nil {
				errs = append(errs, err)
			}
			if p != nil {
				pub = p
			}
		}
		switch {
		case bound == size && (pub == nil || len(errs) > 0):
			t.Errorf("a publication of %d bytes under a bound of %d: completed %v, %v", size, bound, pub != nil, errs)
		case bound < size && (pub != nil || len(errs) == 0 || !errors.Is(errs[0], errPublicationTooLarge)):
			t.Errorf("a publication of %d bytes under a bound of %d: completed %v, %v; want refused as too large", size, bound, pub != nil, errs)
		}
	}
}

// TestPublicationWithBadHypercubeNotUsable: a publication whose snapshot decodes but whose
// hypercube counts do not (anyone's with Write on the model topic) was taken as usable by the
// follower, and a scorer's InstallModel refused it only then: at a scorer's start, where the
// newest usable model is installed, the refusal failed the start, so one such message stopped
// every scorer from starting. The follower now passes over it as it does any unusable one (the
// older model stays the newest usable).
func TestPublicationWithBadHypercubeNotUsable(t *testing.T) {
	m := testModel(t, 5, 600)
	msgs, err := modelMessages(publication{model: m, hypercube: []byte{1, 2, 3}}, 4096)
	if err != nil {
		t.Fatal(err)
	}
	var a modelAssembler
	var pub *assembled
	for _, x := range msgs {
		if pub, err = a.add(x); err != nil {
			t.Fatal(err)
		}
	}
	if pub == nil {
		t.Fatal("the publication did not reassemble")
	}
	cfg := detect.Default()
	scorer, err := detect.NewStage(cfg, synth.SensorFeatures, true, detect.Deps{Log: zerolog.Nop(), Role: detect.RoleScorer})
	if err != nil {
		t.Fatal(err)
	}
	defer scorer.Close()
	if _, _, err := scorer.InstallModel(m, pub.hypercube); err == nil {
		t.Fatal("InstallModel took hypercube counts of 3 bytes: the test's premise no longer holds")
	}
	f := &modelFollower{features: synth.SensorFeatures}
	if got, err := f.usable(pub); err == nil || got != nil {
		t.Errorf("a publication with hypercube counts that do not read: usable (%v), want refused", err)
	}
}

// TestReloadMovesThePublicationBound: a scorer's bound on a publication is its configuration's
// in force: a reload of detect.window (a rebuild key) stores the bound of the new window, so a
// builder's larger models are taken once the scorer's window grew too.
func TestReloadMovesThePublicationBound(t *testing.T) {
	br := testsupport.KfakeBroker(t)
	in, out, dlq, group, mt := roleTopics(t, br, 1)
	cfg := roleConfig(br, in, out, dlq, group, mt)
	cfg.Run.Role = detect.RoleScorer
	run := startPipeline(t, cfg, nil)
	bound := func(c Config) int64 { return int64(detect.PublicationBound(c.Ingest.Columns(), &c.Detect)) }
	if got := run.p.follow.bound.Load(); got != bound(cfg) {
		t.Fatalf("a scorer's publication bound %d, want its configuration's %d", got, bound(cfg))
	}
	next := cfg
	next.Detect.Window *= 2
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := NewReloader(run.p, "", zerolog.Nop()).Apply(ctx, next); err != nil {
		t.Fatal(err)
	}
	if got := run.p.follow.bound.Load(); got != bound(next) || got <= bound(cfg) {
		t.Errorf("after a reload of detect.window %d -> %d: bound %d, want %d", cfg.Detect.Window, next.Detect.Window, got, bound(next))
	}
}

// TestModelAssemblerStartsSmall (reread26): a publication's first chunk that declares more
// chunks than the bound holds (n x its size past it: a hostile count, never a builder's, whose
// chunks but the last are all of one size) had the assembler allocate the whole bound at once:
// a message of a few bytes cost a scorer PublicationBound (6.5 MB at detect.Default, hundreds
// of MB at large windows), once per message, 100 of them 650 MB of allocation for the
// collector. Such a publication now starts with room for two of its chunks and grows by
// doubling up to the bound as chunks come (it is refused at the chunk that passes it); a
// builder's, whose count fits, still gets its room at once.
func TestModelAssemblerStartsSmall(t *testing.T) {
	cfg := detect.Default()
	bound := detect.PublicationBound(synth.SensorFeatures, &cfg)
	a := modelAssembler{bound: bound}
	value := make([]byte, 64)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for v := range uint64(100) {
		a.add(hostileChunk(1000+v, 0, 1<<62, value, int64(v)))
		if c := cap(a.data); c > 1<<10 {
			t.Fatalf("a first chunk of %d bytes declaring 2^62 chunks: %d bytes allocated, want room for a few chunks", len(value), c)
		}
	}
	runtime.ReadMemStats(&after)
	// (100 starts of two 64-byte chunks each are 12.8 KB; the rest is the assembler's maps and
	// headers and what the runtime allocated meanwhile: 1 MB of slack, against 650 MB before)
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
		t.Errorf("100 hostile first chunks of %d bytes allocated %d bytes, want about their size", len(value), got)
	}
	// A builder's publication (its count fits the bound) gets its room at once.
	a = modelAssembler{bound: bound}
	a.add(hostileChunk(2000, 0, 10, value, 0))
	if c := cap(a.data); c != 10*len(value) {
		t.Errorf("a first chunk of %d bytes of 10: room for %d bytes, want %d", len(value), c, 10*len(value))
	}
}
