package pipeline

import (
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/outlierd/outlierd/internal/datasets/synth"
	"github.com/outlierd/outlierd/internal/testsupport"
)

// refusedFor is how long TestFollowerWarningsPaced's broker refuses every request: the
// followers' backoff (100 ms doubling) makes 5 to 6 attempts of each in it, every one failing
// at once.
const refusedFor = 4 * time.Second

// TestFollowerWarningsPaced: a broker that refuses every request (each connection closed) for
// refusedFor while a scorer's model follower and a keys' follower read it, then answers again.
// Each follower warns once, at its first failure (its next fetch, within followWait of the
// refusal's start, and attemptSlack), not at every attempt; once it reads again it says so once, with how many
// reads failed. Failed first: a warning at every failed read (6 a follower in 4 s; about 150
// lines a minute over 13 partitions at the backoff's 5 s cap), and no line at the recovery.
func TestFollowerWarningsPaced(t *testing.T) {
	br, set := testsupport.FaultyBroker(t, kfake.SeedTopics(2, "models"))
	cfg := modelTopicConfig{brokers: br.Addrs, topic: "models", maxMessageBytes: 1 << 20}
	publishTestModel(t, cfg, 1)
	produceKeyModel(t, br, "models", 1)
	var logs testsupport.LogBuffer
	f, err := newModelFollower(cfg, synth.SensorFeatures, zerolog.New(&logs))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() }) // (after followInTest's own cleanup: the follower stops first)
	wait := followInTest(t, f, &logs)
	p, k := keyFollowersInTest(t, "models", br.Addrs)
	p.log = zerolog.New(&logs)
	defer k.close()
	k.start(func(int) map[int][]int32 { return map[int][]int32{1: {0}} }, []int32{0}, nil)
	wait(1, 20*time.Second)
	waitFor(t, 20*time.Second, "the key follower's first read", func() bool { return p.stats.KeyModelsRead.Load() >= 1 })

	const modelWarning, keysWarning = "model topic read failed; retrying", "scorer: reading the keys' models failed; retrying"
	set(testsupport.Refuse)
	t0 := time.Now()
	waitFor(t, followWait+attemptSlack, "the first failure's warnings", func() bool {
		return len(logs.Lines(modelWarning)) > 0 && len(logs.Lines(keysWarning)) > 0
	})
	t.Logf("both followers warned %v after the broker began to refuse", time.Since(t0).Round(time.Millisecond))
	time.Sleep(refusedFor - time.Since(t0))
	for _, w := range []string{modelWarning, keysWarning} {
		if n := len(logs.Lines(w)); n != 1 {
			t.Errorf("%d lines %q in %v of a broker refusing every request, want 1 (the first failure's)", n, w, refusedFor)
		}
	}

	set(testsupport.Answer)
	publishTestModel(t, cfg, 2)
	produceKeyModel(t, br, "models", 2)
	wait(2, recoverWithin)
	waitFor(t, recoverWithin, "the key follower's read after the refusals", func() bool { return p.stats.KeyModelsRead.Load() >= 2 })
	again := logs.Lines("read again after failed reads")
	for _, what := range []string{`"model_partition":0`, `"model_partition":1`} {
		n := 0
		for _, l := range again {
			if strings.Contains(l, what) {
				n++
				if !strings.Contains(l, `"failed_reads":`) {
					t.Errorf("the recovery line says not how many reads failed: %s", l)
				}
			}
		}
		if n != 1 {
			t.Errorf("%d recovery lines of the follower of %s, want 1; the log:\n%s", n, what, logs.String())
		}
	}
}
