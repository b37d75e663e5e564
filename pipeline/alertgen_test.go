package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outlierd/outlierd/internal/testsupport"
)

// TestAlertGroupsMissedGenerationRealBroker: end to end on Apache Kafka, two pipeline members
// of one consumer group, A an `outlierd run` process and B in this one, each writing its own
// output topic (emit: all, so that every flagged record shows with its alert fields). Two
// partitions, each with a key in alarm (a0 on partition 0, a1 on 1: temp stuck far out in
// three stretches, every record of the stretch flagged), alert_cooldown 10m and every record
// within 160 s of stream time, so that one instance alone would emit one alert per key.
// About 12 s here (A's session of 6 s is most of it), besides building the binary.
//
//  1. A alone reads records 0-999 of each partition: its alert of each key at 900, 19 more
//     folded into it; every record committed.
//  2. A is paused (SIGSTOP) and B joins: the rebalance waits for A, whose session (6 s)
//     expires, and B alone gets both partitions (a generation A misses). B reads 1000-1499
//     from A's commits (1400-1499 written once B committed the others), builds its own model
//     from the first 500 (clean) and alerts for each key at 1400 (its groups empty: an
//     instance that did not own the partition before alerts anew), 19 folded; every record
//     committed, then deleted below 1500 (DeleteRecords): A's fetches in flight at the pause
//     would otherwise bring some of them to A as it resumes, before it hears it was removed,
//     and whether they do is a race (old-generation records: the other test's).
//  3. A resumes (SIGCONT): told by its next heartbeat it was removed, it joins again, and the
//     range balancer gives each member one partition (which one is the member ids' order). The
//     partition A gets back is one whose committed offset B moved: its alert group of step 1
//     must go (keyScope.stayed: a generation missed, the offset not A's), so its key's record
//     1500 is a new alert, not folded into the stale alert of 900 (B alerted since). B's
//     generations follow one another and it keeps the other partition: its key's 1500-1595 are
//     folded into B's alert of 1400.
//
// The contract checked on the outputs: every input record is written once by one member (no
// re-read in this run: each step waits for the commits, and the deletion); in each member's output every
// flagged record of a key is either an alert or folded into the latest alert of that key the
// same member wrote (never one of before a move: not a stale group's), and an alert's
// folded_into_previous_alert is the number folded into the member's previous alert of the key,
// whether that group lived on or was dropped (before, a dropped group's count was lost: 0); each key's alerts are one more than its
// partition's moves between members (the documented bound: one alert too many per move, never
// one lost): 3 for the key whose partition went A -> B -> A (at 900, 1400, 1500), 2 for the
// other (900, 1400).
func TestAlertGroupsMissedGenerationRealBroker(t *testing.T) {
	br := testsupport.RealBroker(t)
	bin := outlierdBinary(t)
	ag := newAlertGen(t, br)
	cfgA, cfgB := ag.yaml(t, "a", ag.outA), ag.yaml(t, "b", ag.outB)
	log := newChildLog(t)
	defer func() {
		if t.Failed() {
			log.dump(t, 80)
		}
	}()
	cl := &kafka.Client{Addr: kafka.TCP(br.Addrs...), Timeout: 5 * time.Second}
	// Each wait below is for an event the broker shows (commits, the group's members); 30 s
	// bounds each one on a loaded 2-core machine: the slowest, the rebalance waiting for A's
	// session to expire, takes 6 s plus a heartbeat and a join.
	const limit = 30 * time.Second

	ag.produce(t, 0, 1000)
	a := startChild(t, bin, cfgA, log, "A")
	ag.waitCommitted(t, 1000, limit)
	memberA := ag.members(t, cl, 1, limit)[0]

	if err := syscall.Kill(a.pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP %d: %v", a.pid, err)
	}
	stopped := true
	defer func() { // (a failure while paused: SIGKILL, in startChild's cleanup, ends it stopped or not)
		if stopped {
			_ = syscall.Kill(a.pid, syscall.SIGCONT)
		}
	}()
	cfg, err := LoadConfigBytes("b.yaml", []byte(cfgB))
	if err != nil {
		t.Fatal(err)
	}
	b := startPipeline(t, cfg, nil)
	for deadline, m := time.Now().Add(limit), ag.members(t, cl, 1, limit); m[0] == memberA; m = ag.members(t, cl, 1, limit) { // (A's session expires)
		if time.Now().After(deadline) {
			t.Fatalf("A (%s) still the group's one member %s after the pause", memberA, limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
	ag.produce(t, 1000, 1400) // (clean: B's first model is of the first 500 it reads)
	ag.waitCommitted(t, 1400, limit)
	ag.produce(t, 1400, 1500)
	ag.waitCommitted(t, 1500, limit)
	// A's fetches in flight at the pause, at 1000, would bring B's records to A as it resumes,
	// before its heartbeat tells it it was removed (old-generation records: a re-read that
	// TestAlertGroupOfOldGenerationRecordRealBroker pins): deleted, they bring none.
	for p := range int32(2) {
		testsupport.DeleteRecordsBelow(t, br, ag.in, p, 1500)
	}

	if err := syscall.Kill(a.pid, syscall.SIGCONT); err != nil {
		t.Fatalf("SIGCONT %d: %v", a.pid, err)
	}
	stopped = false
	ag.members(t, cl, 2, limit)
	ag.produce(t, 1500, 1600)
	ag.waitCommitted(t, 1600, limit)
	if err := a.stop(t, 30*time.Second); err != nil {
		t.Fatalf("A's graceful stop: %v", err)
	}
	if err := b.stop(t, cfg.Run.ShutdownTimeout+10*time.Second); err != nil {
		t.Fatalf("B's graceful stop: %v", err)
	}

	outs := map[string][]genOutput{"A": ag.outputs(t, ag.outA), "B": ag.outputs(t, ag.outB)}
	// Who wrote each record, and who had each partition in step 3.
	wrote := map[[2]int]string{}
	back := -1 // the partition A got back
	for who, os := range outs {
		for _, o := range os {
			if prev, ok := wrote[[2]int{o.part, o.idx}]; ok {
				t.Errorf("record %d of partition %d written by %s and %s: want once (each step waited for the commits)", o.idx, o.part, prev, who)
			}
			wrote[[2]int{o.part, o.idx}] = who
			if who == "A" && o.idx >= 1500 {
				back = o.part
			}
		}
	}
	for p := range 2 {
		for i := range 1600 {
			want := "A"
			if i >= 1000 && (i < 1500 || p != back) {
				want = "B"
			}
			if got := wrote[[2]int{p, i}]; got != want {
				t.Fatalf("record %d of partition %d written by %q, want %s (A got partition %d back)", i, p, got, want, back)
			}
		}
	}
	// Each member's output, key by key: alerts, folded records and the counts.
	alerts := map[string][]string{} // key -> "member@index" of its alerts, by index
	carried := 0                    // alerts after a drop saying a count above 0 (the dropped group's)
	for _, who := range []string{"A", "B"} {
		latest := map[string]genOutput{} // key -> the member's latest alert of it
		folded := map[string]int{}       // key -> records folded into that alert so far
		dropped := map[string]bool{}     // key -> its group dropped since that alert (its partition left this member)
		owner := map[int]bool{}
		for _, o := range outs[who] {
			if stint := o.idx >= 1000 && o.idx < 1500 || o.idx >= 1500 && who == "A"; stint && !owner[o.part] { // (a new stint here: A's return, B's take-over)
				owner[o.part] = true
				for k, l := range latest {
					if l.part == o.part {
						dropped[k] = true
					}
				}
			}
			if !o.flagged {
				continue
			}
			k := o.key
			if !o.grouped {
				alerts[k] = append(alerts[k], fmt.Sprintf("%s@%d", who, o.idx))
				if l, ok := latest[k]; ok {
					want := folded[k] // (dropped or not: the drop leaves its count to this alert)
					if dropped[k] && want > 0 {
						carried++
					}
					if o.foldedInto != want {
						t.Errorf("%s's alert of %s at %d: folded_into_previous_alert %d, want %d (folded into its alert at %d: %d; group dropped since %v)",
							who, k, o.idx, o.foldedInto, want, l.idx, folded[k], dropped[k])
					}
				} else if o.foldedInto != 0 {
					t.Errorf("%s's first alert of %s (at %d): folded_into_previous_alert %d, want 0", who, k, o.idx, o.foldedInto)
				}
				latest[k], folded[k], dropped[k] = o, 0, false
				continue
			}
			l, ok := latest[k]
			switch {
			case !ok:
				t.Errorf("%s's record %d of %s folded into the alert of %s, but %s wrote no alert of %s before it", who, o.idx, k, o.alertAt, who, k)
			case dropped[k]:
				t.Errorf("%s's record %d of %s folded into its alert at %d (%s), of before its partition moved away and back: a stale group's", who, o.idx, k, l.idx, o.alertAt)
			case o.alertAt != l.ts:
				t.Errorf("%s's record %d of %s folded into the alert of %s, want its latest alert's, at %d (%s)", who, o.idx, k, o.alertAt, l.idx, l.ts)
			}
			folded[k]++
		}
	}
	if carried == 0 { // (A's alert at 1500 follows its group of 900 dropped at the pause, with records folded into it)
		t.Error("no alert after a dropped group said its count: the check of folded_into_previous_alert across a drop did not run")
	}
	for _, as := range alerts {
		slices.SortStableFunc(as, func(x, y string) int { // (by index; A's before B's at one)
			i, _ := strconv.Atoi(x[2:])
			j, _ := strconv.Atoi(y[2:])
			return i - j
		})
	}
	for p := range 2 {
		k := fmt.Sprintf("a%d", p)
		want := []string{"A@900", "B@1400"}
		if p == back {
			want = append(want, "A@1500")
		}
		if !slices.Equal(alerts[k], want) {
			t.Errorf("alerts of %s (partition %d; A got partition %d back): %v, want %v", k, p, back, alerts[k], want)
		}
	}
	for k, as := range alerts {
		if !strings.HasPrefix(k, "a") {
			t.Logf("alerts of %s, a key not in alarm (a false positive of 1e-5): %v", k, as)
		}
	}
	t.Logf("A (member %s) got partition %d back; alerts %v", memberA, back, alerts)
}

// alertGen is TestAlertGroupsMissedGenerationRealBroker's topics, group and records: two
// partitions, record i of each at t0 + 100 ms x i (both partitions alike), keys s<p><j> in
// turn and a<p> every fifth (i % 5 == 0), temp 20 ± 1 and hum 40 ± 1 (PCG 20, 28), temp 80 for
// a<p> in the stretches of faults (900-999 and 1400-1599 unless the test sets others).
type alertGen struct {
	br                         testsupport.Broker
	in, outA, outB, dlq, group string
	t0                         time.Time
	rng                        *rand.Rand
	faults                     [][2]int // the stretches [from, to) of records far out
	queueBatches               int      // run.queue_batches
}

func newAlertGen(t *testing.T, br testsupport.Broker) *alertGen {
	ag := &alertGen{br: br, in: testsupport.UniqueName("in"), outA: testsupport.UniqueName("out-a"), outB: testsupport.UniqueName("out-b"),
		dlq: testsupport.UniqueName("dlq"), group: testsupport.UniqueName("group"), t0: time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC),
		rng: rand.New(rand.NewPCG(20, 28)), faults: [][2]int{{900, 1000}, {1400, 1600}}, queueBatches: 4}
	testsupport.CreateTopics(t, br, map[string]int{ag.in: 2, ag.outA: 1, ag.outB: 1, ag.dlq: 1})
	return ag
}

// far says whether record i of a partition is its alarm key's, far out.
func (ag *alertGen) far(i int) bool {
	for _, f := range ag.faults {
		if i%5 == 0 && i >= f[0] && i < f[1] {
			return true
		}
	}
	return false
}

// produce writes records from to to-1 of both partitions.
func (ag *alertGen) produce(t *testing.T, from, to int) {
	var recs []*kgo.Record
	for i := from; i < to; i++ {
		for p := range 2 {
			key := fmt.Sprintf("s%d%d", p, i%5)
			if i%5 == 0 {
				key = fmt.Sprintf("a%d", p)
			}
			temp, hum := 20+ag.rng.NormFloat64(), 40+ag.rng.NormFloat64()
			if ag.far(i) {
				temp = 80
			}
			recs = append(recs, &kgo.Record{Topic: ag.in, Partition: int32(p), Key: []byte(key), Timestamp: ag.t0.Add(time.Duration(i) * 100 * time.Millisecond),
				Value: fmt.Appendf(nil, `{"i":%d,"temp":%.3f,"hum":%.3f}`, i, temp, hum)})
		}
	}
	testsupport.Produce(t, ag.br, recs...)
}

// yaml writes member name's configuration (its own output topic and state_dir) and returns
// its path for A, its text for B (name "b"). Flagged by significance, window 1000 (a model
// from the first 500 records, never rebuilt), alarm rate 0.01, alert_cooldown 10m; a 6 s
// session (the broker's least, group.min.session.timeout.ms) with a heartbeat of 500 ms, so
// that the pause is past it soon and the members hear of rebalances within a heartbeat; one
// sink writer, so that an output topic holds its member's outputs in the order scored.
func (ag *alertGen) yaml(t *testing.T, name, out string) string {
	t.Helper()
	brokers := make([]string, len(ag.br.Addrs))
	for i, a := range ag.br.Addrs {
		brokers[i] = strconv.Quote(a)
	}
	dir := t.TempDir()
	y := fmt.Sprintf(`device: cpu
ingest:
  brokers: [%[1]s]
  topic: %[2]s
  group_id: %[3]s
  start_offset: earliest
  format: json
  features: [temp, hum]
  batch_size: 200
  max_wait: 20ms
  heartbeat_interval: 500ms
  session_timeout: 6s
detect:
  window: 1000
  min_records: 500
  refresh_records: 1073741824
  recalibrate_records: 1073741824
  refresh_interval: 1h
  flag_by: significance
  alarm_rate: 0.01
  alert_cooldown: 10m
  state_dir: %[4]s
  distance:
    n: 50
sink:
  brokers: [%[1]s]
  topic: %[5]s
  dead_letter_topic: %[6]s
  emit: all
run:
  queue_batches: %[7]d
  sink_writers: 1
  commit_interval: 100ms
  shutdown_timeout: 20s
http:
  listen: 127.0.0.1:0
`, strings.Join(brokers, ", "), ag.in, ag.group, strconv.Quote(dir), out, ag.dlq, ag.queueBatches)
	if name == "b" {
		return y
	}
	path := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(path, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// waitCommitted waits until the group's committed offset of both partitions is n.
func (ag *alertGen) waitCommitted(t *testing.T, n int64, limit time.Duration) {
	t.Helper()
	var got []int64
	for deadline := time.Now().Add(limit); ; time.Sleep(50 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		offs, err := testsupport.CommittedOffsets(ctx, ag.br, ag.group, ag.in, 2)
		cancel()
		if err == nil {
			if got = offs; offs[0] == n && offs[1] == n {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("committed offsets %v after %s, want %d on both partitions", got, limit, n)
		}
	}
}

// members waits until the group is stable with n members and returns their ids.
func (ag *alertGen) members(t *testing.T, cl *kafka.Client, n int, limit time.Duration) []string {
	t.Helper()
	var last string
	for deadline := time.Now().Add(limit); ; time.Sleep(50 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		res, err := cl.DescribeGroups(ctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{ag.group}})
		cancel()
		if err == nil && len(res.Groups) == 1 && res.Groups[0].Error == nil {
			g := res.Groups[0]
			last = fmt.Sprintf("%s, %d members", g.GroupState, len(g.Members))
			if g.GroupState == "Stable" && len(g.Members) == n {
				ids := make([]string, n)
				for i, m := range g.Members {
					ids[i] = m.MemberID
				}
				return ids
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s: %s after %s, want Stable with %d", ag.group, last, limit, n)
		}
	}
}

// genOutput is one output as the test reads it: the record's partition, its index i (of the
// input's "i"), key and timestamp, and its alert fields.
type genOutput struct {
	part, idx        int
	key, ts          string
	flagged, grouped bool
	alertAt          string
	foldedInto       int
}

// outputs reads a member's output topic, in the order written.
func (ag *alertGen) outputs(t *testing.T, topic string) []genOutput {
	t.Helper()
	var outs []genOutput
	for _, m := range testsupport.ReadTopic(t, ag.br, topic, 1) {
		var o struct {
			alertOutput
			Payload struct {
				I int `json:"i"`
			} `json:"payload"`
		}
		if err := json.Unmarshal(m.Value, &o); err != nil {
			t.Fatalf("output %s: %v", m.Value, err)
		}
		parts := strings.Split(o.ID, "/")
		p, err := strconv.Atoi(parts[len(parts)-2])
		if err != nil || o.Key == nil || o.Timestamp == nil || o.Scores == nil {
			t.Fatalf("output %s: want an id topic/partition/offset, a key, a timestamp and scores", m.Value)
		}
		g := genOutput{part: p, idx: o.Payload.I, key: *o.Key, ts: *o.Timestamp, flagged: o.Scores.Outlier, grouped: o.Scores.Folded,
			foldedInto: o.Scores.FoldedInto}
		if g.grouped {
			if err := json.Unmarshal(o.Scores.AlertTimestamp, &g.alertAt); err != nil {
				t.Fatalf("output %s: alert_timestamp: %v", m.Value, err)
			}
		}
		if want := ag.far(g.idx) && strings.HasPrefix(g.key, "a"); g.flagged != want && want {
			t.Fatalf("record %d of partition %d (%s): flagged %v, want %v: %s", g.idx, p, g.key, g.flagged, want, m.Value)
		}
		outs = append(outs, g)
	}
	return outs
}
