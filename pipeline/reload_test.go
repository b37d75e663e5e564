package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"gopkg.in/yaml.v3"

	"github.com/outlierd/outlierd/internal/testsupport"
)

func TestClassifyChanges(t *testing.T) {
	base := Default()
	cases := []struct {
		name                   string
		edit                   func(*Config)
		live, rebuild, restart []string
	}{
		{"nothing", func(*Config) {}, nil, nil, nil},
		{"thresholds and emit", func(c *Config) {
			c.Detect.Density.Eta, c.Detect.Density.Delta, c.Detect.Combine, c.Sink.Emit = 0.3, 0.25, "all", "all"
			c.Detect.Distance.N = 10
		}, []string{"detect.combine", "detect.density.eta", "detect.density.delta", "detect.distance.n", "sink.emit"}, nil, nil},
		{"model shape", func(c *Config) { c.Detect.Distance.K, c.Detect.Window, c.Detect.Density.Clusters = 5, 60000, 100 },
			nil, []string{"detect.window", "detect.density.clusters", "detect.distance.k"}, nil},
		{"features, topic, format, queues, device", func(c *Config) {
			c.Ingest.Features = []string{"a"}
			c.Ingest.Topic, c.Sink.Format, c.Run.QueueBatches, c.Device = "other", "arrow", 9, "cpu"
		}, nil, nil, []string{"device", "ingest.topic", "ingest.features", "sink.format", "run.queue_batches"}},
		{"state dir", func(c *Config) { c.Detect.StateDir = "/x" }, nil, nil, []string{"detect.state_dir"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := Default()
			c.edit(&n)
			got := ClassifyChanges(base, n)
			if !slices.Equal(got.Live, c.live) || !slices.Equal(got.Rebuild, c.rebuild) || !slices.Equal(got.Restart, c.restart) {
				t.Errorf("got %+v, want live %v rebuild %v restart %v", got, c.live, c.rebuild, c.restart)
			}
		})
	}
}

// reloadOutput is what the test reads of an output.
type reloadOutput struct {
	Partition    int32 `json:"partition"`
	Offset       int64 `json:"offset"`
	ModelVersion uint64
	Scores       struct {
		Outlier bool `json:"outlier"`
	} `json:"scores"`
}

// TestReloadRunningPipeline runs the pipeline on kfake and reloads it through a config file:
// thresholds apply without a rebuild and change the verdicts, emit changes the outputs, a k
// change rebuilds, invalid or restart-only configs are rejected while the pipeline keeps
// going; reloads come from Apply, from a file change and from SIGHUP.
func TestReloadRunningPipeline(t *testing.T) {
	br := testsupport.KfakeBroker(t)
	const parts = 2
	in, out, dlq, group := testsupport.UniqueName("in"), testsupport.UniqueName("out"), testsupport.UniqueName("dlq"), testsupport.UniqueName("group")
	testsupport.CreateTopics(t, br, map[string]int{in: parts, out: parts, dlq: 1})
	input := newInput(in, parts, makeSensorRecords(t, 6000, parts, 21, 0.01, 0))
	index := map[coord]int{} // record -> its place in the stream, filled as produced

	cfg := sensorConfig(br, in, out, dlq, group, "all")
	d := &cfg.Detect
	d.Window, d.MinRecords, d.RefreshRecords, d.RecalibrateRecords, d.RefreshInterval = 4000, 2000, 1<<30, 1<<30, time.Hour
	d.Density.Clusters, d.Density.Iterations, d.Density.Samples = 50, 2, 100
	d.Distance.K, d.Distance.N, d.Distance.M = 10, 20, 50
	d.Combine = "density"
	path := filepath.Join(t.TempDir(), "pipeline.yaml")
	saveConfig(t, path, cfg)
	cfg, err := LoadConfig(path) // as outlierd run does: the file is the configuration
	if err != nil {
		t.Fatal(err)
	}

	var rl *Reloader
	run := startPipeline(t, cfg, func(p *Pipeline) {
		rl = NewReloader(p, path, zerolog.New(zerolog.NewTestWriter(t)))
	})
	p := run.p
	cl := testsupport.NewProducer(t, br)
	defer cl.Close()
	produced := 0
	produce := func(n int) (lo, hi int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		recs := input.records[produced : produced+n]
		if err := produceRecords(ctx, cl, input, recs); err != nil {
			t.Fatal(err)
		}
		for i, r := range recs {
			index[coord{r.p, r.off}] = produced + i
		}
		produced += n
		deadline := time.Now().Add(30 * time.Second)
		for p.Stats().RecordsOut.Load() < int64(produced) {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d records out after 30 s", p.Stats().RecordsOut.Load(), produced)
			}
			time.Sleep(10 * time.Millisecond)
		}
		return produced - n, produced
	}
	// outputs returns the outputs of stream records [lo, hi).
	outputs := func(lo, hi int) []reloadOutput {
		t.Helper()
		var outs []reloadOutput
		for _, r := range testsupport.ReadTopic(t, br, out, parts) {
			var o reloadOutput
			if err := json.Unmarshal(r.Value, &o); err != nil {
				t.Fatal(err)
			}
			var mv struct {
				V uint64 `json:"model_version"`
			}
			json.Unmarshal(r.Value, &mv)
			o.ModelVersion = mv.V
			if i, ok := index[coord{o.Partition, o.Offset}]; ok && i >= lo && i < hi {
				outs = append(outs, o)
			}
		}
		return outs
	}
	flaggedIn := func(outs []reloadOutput, versions ...uint64) int {
		t.Helper()
		n := 0
		for _, o := range outs {
			if !slices.Contains(versions, o.ModelVersion) {
				t.Fatalf("record %d/%d scored by model %d, want %v", o.Partition, o.Offset, o.ModelVersion, versions)
			}
			if o.Scores.Outlier {
				n++
			}
		}
		return n
	}
	ctx := context.Background()

	// 1. The first model, with eta 0.5 and delta 0.5.
	aLo, aHi := produce(3000)
	if v := p.Stats().ModelVersion.Load(); v != 1 {
		t.Fatalf("model version %d after the first 3000 records, want 1", v)
	}

	// 2. A stricter density test, by Apply: live, no rebuild.
	next := cfg
	next.Detect.Density.Eta, next.Detect.Density.Delta = 1, 0.9
	res, err := rl.Apply(ctx, next)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Live, []string{"detect.density.eta", "detect.density.delta"}) || len(res.Rebuild) > 0 || res.RebuildStarted {
		t.Fatalf("Apply = %+v, want eta and delta live, no rebuild", res)
	}
	bLo, bHi := produce(1000)
	if v := p.Stats().ModelVersion.Load(); v != 1 {
		t.Fatalf("model version %d after a threshold change, want 1 (no rebuild)", v)
	}
	fa, fb := flaggedIn(outputs(aLo, aHi), 1), flaggedIn(outputs(bLo, bHi), 1)
	t.Logf("flagged: %d of %d before the reload (eta 0.5, delta 0.5), %d of %d after (eta 1, delta 0.9)", fa, aHi-aLo, fb, bHi-bLo)
	// Measured: 4.5% before and 24% after in one run, 8% and 44% in another (about 5x);
	// requiring twice the rate leaves a wide margin for the variation between the two spans.
	if float64(fb)/float64(bHi-bLo) < 2*float64(fa)/float64(aHi-aLo) {
		t.Errorf("the stricter thresholds did not flag more records")
	}

	// 3. Rejected reloads change nothing: an invalid value, a key that needs a restart.
	for _, bad := range []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.Detect.Density.Eta = 2 }, "detect.density.eta: must be in (0, 1]"},
		{func(c *Config) { c.Ingest.Topic = "elsewhere"; c.Sink.Emit = "outliers" }, "ingest.topic cannot change while running"},
	} {
		n := next
		bad.edit(&n)
		if _, err := rl.Apply(ctx, n); !errors.Is(err, ErrReloadRejected) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("Apply: err = %v, want ErrReloadRejected with %q", err, bad.want)
		}
		if !slicesEqualConfig(rl.Config(), next) {
			t.Error("a rejected reload changed the configuration in force")
		}
	}

	// 4. Through the file: emit outliers (live) and k (rebuild) at once.
	next.Sink.Emit = "outliers"
	next.Detect.Distance.K = 5
	saveConfig(t, path, next)
	wctx, stopWatch := context.WithCancel(ctx)
	watchDone := make(chan struct{})
	go func() { defer close(watchDone); rl.Watch(wctx, 20*time.Millisecond) }()
	deadline := time.Now().Add(20 * time.Second)
	for c := rl.Config(); c.Detect.Distance.K != 5 || c.Sink.Emit != "outliers"; c = rl.Config() {
		if time.Now().After(deadline) {
			t.Fatalf("20 s after the file changed, the config in force has k %d emit %s", c.Detect.Distance.K, c.Sink.Emit)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if v := p.Stats().ModelVersion.Load(); v != 1 {
		t.Fatalf("model version %d before any record followed the reload, want 1", v)
	}
	// The rebuild runs off the hot path; the first batch after it ends is scored by model 2.
	cLo := produced
	for round := 0; p.Stats().ModelVersion.Load() != 2; round++ {
		if round == 40 {
			t.Fatalf("model version %d after the k change and %d records over %d s, want 2", p.Stats().ModelVersion.Load(), produced-cLo, 4)
		}
		produce(50)
		time.Sleep(100 * time.Millisecond)
	}
	_, cHi := produce(200)
	outsC := outputs(cLo, cHi)
	if fc := flaggedIn(outsC, 1, 2); fc != len(outsC) || fc == 0 {
		t.Errorf("emit outliers: %d outputs of which %d flagged; want only flagged ones, and some", len(outsC), fc)
	}

	// 5. An invalid file is logged and ignored; then SIGHUP applies a valid one even when the
	// watcher would not look (the poll interval is an hour).
	stopWatch()
	<-watchDone
	os.WriteFile(path, []byte("detect: {density: {eta: 7}}\n"), 0o644)
	if _, err := rl.Reload(ctx); !errors.Is(err, ErrReloadRejected) || !strings.Contains(err.Error(), "eta") {
		t.Errorf("Reload of an invalid file: %v", err)
	}
	next.Detect.Combine = "distance"
	saveConfig(t, path, next)
	rl.noteFile() // as seen: only SIGHUP can apply it now
	watching := make(chan struct{})
	rl.watching = func() { close(watching) }
	wctx, stopWatch = context.WithCancel(ctx)
	defer stopWatch()
	go rl.Watch(wctx, time.Hour)
	<-watching
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(10 * time.Second)
	for rl.Config().Detect.Combine != "distance" {
		if time.Now().After(deadline) {
			t.Fatal("SIGHUP did not reload the file within 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	produce(500) // still running
	if err := run.stop(t, 30*time.Second); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// slicesEqualConfig compares configurations the way reloads do.
func slicesEqualConfig(a, b Config) bool {
	c := ClassifyChanges(a, b)
	return len(c.Live)+len(c.Rebuild)+len(c.Restart) == 0
}

// TestWatchWarnsOnceWhenTheFileIsGone: the watcher reloads on a change of the file, but a
// deleted (or unreadable) file said nothing until the next SIGHUP, while an edit of it would
// have been applied. It warns once per disappearance that the running configuration is kept,
// and once the file is back with the same content there is nothing to reload.
func TestWatchWarnsOnceWhenTheFileIsGone(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pipeline.yaml")
	content := []byte("ingest:\n  features: [a]\n")
	if err := os.WriteFile(path, content, 0o644); err != nil {
		t.Fatal(err)
	}
	var logs testsupport.LogBuffer
	r := &Reloader{path: path, log: zerolog.New(&logs)}
	r.noteFile()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Watch(ctx, 5*time.Millisecond) }()
	// Each step waits for the watcher to have seen it (its log line; a fixed 150 ms raced the
	// watcher: fewer than two of its ticks in it, on a stalled machine, and the test failed),
	// then 150 ms more (30 intervals) in which a second warning, or a reload, would show.
	seen := func(what string, n int) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); strings.Count(logs.String(), what) < n; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the watcher did not log %q (%d times) in 20 s:\n%s", what, n, logs.String())
			}
		}
		time.Sleep(150 * time.Millisecond)
	}
	time.Sleep(150 * time.Millisecond)
	for i := range 2 {
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		seen("running configuration is kept", i+1)
		if err := os.WriteFile(path, content, 0o644); err != nil {
			t.Fatal(err)
		}
		seen("config file readable again", i+1)
	}
	cancel()
	<-done
	log := logs.String()
	if n := strings.Count(log, `"level":"warn"`); n != 2 || !strings.Contains(log, "running configuration is kept") ||
		!strings.Contains(log, path) || !strings.Contains(log, "no such file") {
		t.Errorf("%d warnings (want 1 per deletion, 2), naming the file and the cause:\n%s", n, log)
	}
	if strings.Contains(log, "config reload") { // a reload here is rejected and logged (no pipeline)
		t.Errorf("the same content back was reloaded:\n%s", log)
	}
}

// TestReloaderSeesAnEditDuringTheStart: outlierd run loads the file, starts the pipeline (the
// topic check alone waits up to 30 s for brokers that cannot be reached) and only then makes
// its Reloader, which took the file as it found it then for the one in force: an edit saved
// in between was never reloaded (the watcher saw no change), and the pipeline ran the
// configuration of before the edit until the next one. The file's content in force at the
// Reloader's start is seen; another one is reloaded at the watcher's first look.
func TestReloaderSeesAnEditDuringTheStart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pipeline.yaml")
	base := Default()
	base.Ingest.Brokers, base.Ingest.Topic, base.Ingest.GroupID, base.Ingest.Features = []string{"127.0.0.1:1"}, "in", "g", []string{"x"}
	base.Sink.Brokers, base.Sink.Topic, base.Sink.DeadLetterTopic = []string{"127.0.0.1:1"}, "out", "dlq"
	saveConfig(t, path, base)
	loaded, err := LoadConfig(path) // as outlierd run does, before the start
	if err != nil {
		t.Fatal(err)
	}
	log := zerolog.New(zerolog.NewTestWriter(t))

	// The file unchanged since it was loaded: nothing to reload.
	r := NewReloader(&Pipeline{cfg: loaded}, path, log)
	if changed, err := r.fileChanged(); err != nil || changed {
		t.Fatalf("file as loaded: fileChanged = %v, %v; want false", changed, err)
	}

	// Edited during the start: reloaded at the first look.
	edited := loaded
	edited.Detect.Density.Eta = 0.9
	saveConfig(t, path, edited)
	r = NewReloader(&Pipeline{cfg: loaded}, path, log)
	if changed, err := r.fileChanged(); err != nil || !changed {
		t.Fatalf("file edited after it was loaded: fileChanged = %v, %v; want true (the edit is reloaded)", changed, err)
	}
	if changed, _ := r.fileChanged(); changed {
		t.Error("the edit was seen twice")
	}
}

// saveConfig writes c to path as YAML, as an operator's edit of the file, and returns what it
// wrote. Another size or mtime makes a Reloader's watcher look; equal content is not reloaded.
func saveConfig(t *testing.T, path string, c Config) []byte {
	t.Helper()
	b, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return b
}
