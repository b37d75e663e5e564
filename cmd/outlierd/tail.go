package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"

	"github.com/outlierd/outlierd/pipeline"
	"github.com/outlierd/outlierd/stages/sink"
)

// tailOutput is one output record of the pipeline as tail reads it: the fields of the JSON
// output contract (stages/sink/json.go) that tail prints.
type tailOutput struct {
	ID          string      `json:"id"`
	Key         *string     `json:"key"`
	KeyEncoding string      `json:"key_encoding"`
	Scores      *tailScores `json:"scores"`
	Explanation string      `json:"explanation"`
}

type tailScores struct {
	Outlier bool           `json:"outlier"`
	Score   sink.JSONFloat `json:"score"`
	// What the explanation says of the alarm cap and the alert groups (detect.alarm_rate,
	// detect.alert_cooldown), as fields: absent when false or 0.
	Suppressed     bool    `json:"suppressed"`
	Folded         bool    `json:"folded"`
	AlertTimestamp *string `json:"alert_timestamp"` // with Folded; nil when the alert had none
	FoldedBefore   int     `json:"folded_into_previous_alert"`
}

// seenIDs remembers the ids printed, the oldest forgotten past its bound (a copy arrives close
// to its original: a producer retry, or the span a restart re-reads).
type seenIDs struct {
	set   map[string]struct{}
	order []string
	limit int
}

func (s *seenIDs) add(id string) bool {
	if _, ok := s.set[id]; ok {
		return false
	}
	if len(s.order) == s.limit {
		delete(s.set, s.order[0])
		s.order = s.order[1:]
	}
	s.set[id] = struct{}{}
	s.order = append(s.order, id)
	return true
}

func runTail(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("tail", stdout, stderr)
	path := fs.String("config", "", "pipeline YAML file (required): sink.brokers, sink.topic and security")
	all := fs.Bool("all", false, "print every output (inliers, and records not scored yet), not only the outliers")
	asJSON := fs.Bool("json", false, "print the output objects themselves, one JSON object per line")
	fromStart := fs.Bool("from-beginning", false, "read the topic from its beginning (default: only outputs written from now on)")
	idle := fs.Duration("idle-exit", 0, "stop after this long without a new output (0: run until Ctrl-C)")
	maxN := fs.Int("max", 0, "stop after printing this many outputs (0: no limit)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *path == "" {
		return usageError{fmt.Errorf("--config is required")}
	}
	if *idle < 0 || *maxN < 0 {
		return usageError{fmt.Errorf("--idle-exit %s and --max %d: neither may be negative (0: no limit)", *idle, *maxN)}
	}
	cfg, err := pipeline.LoadConfig(*path)
	if err != nil {
		return err
	}
	if cfg.Sink.Format != sink.FormatJSON {
		return fmt.Errorf("%s: sink.format is %s; tail reads JSON outputs (sink.format: json)", *path, cfg.Sink.Format)
	}
	errw := &endingWriter{w: stderr} // (the readers' lines and tail's own, one at a time; none once it returned)
	defer errw.end()
	stderr = errw
	sig := catchStop(plainLog(stderr, "tail"), "", "no summary of what was printed (tail commits nothing: nothing else is lost)")
	defer sig.release()
	ctx := sig.ctx
	msgs, fetching, err := readTopic(ctx, cfg, *fromStart, newLogger(stderr).Level(zerolog.WarnLevel))
	if err != nil {
		return err
	}
	// --idle-exit counts from the moment every partition's reader has connected and sent its
	// first fetch (fetching): counted from before, a value shorter than the connection (a TLS
	// handshake, a remote broker) ended tail before it had read anything. Readers that cannot
	// connect end it after tailConnectWait instead, when --idle-exit is set (a script waits on it).
	var idleC, connectC <-chan time.Time
	var timer *time.Timer
	if *idle > 0 {
		connect := time.NewTimer(tailConnectWait)
		defer connect.Stop()
		connectC = connect.C
	} else {
		fetching = nil
	}
	seen := &seenIDs{set: map[string]struct{}{}, limit: 1 << 20}
	printed, dups := 0, 0
	counts := func() string { return fmt.Sprintf("%d printed, %s skipped", printed, plural(dups, "copy", "copies")) } // (however it stops)
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintf(stderr, "outlierd tail: stopped: %s\n", counts())
			return nil
		case <-fetching:
			fetching, connectC = nil, nil
			timer = time.NewTimer(*idle)
			defer timer.Stop()
			idleC = timer.C
		case <-connectC:
			return fmt.Errorf("sink.topic %q on %s: tail's readers have not all connected and fetched within %s (the reasons are logged above): %s",
				cfg.Sink.Topic, strings.Join(cfg.Sink.Brokers, ","), tailConnectWait, counts())
		case <-idleC:
			fmt.Fprintf(stderr, "outlierd tail: no new output for %s: %s\n", *idle, counts())
			return nil
		case m := <-msgs:
			if timer != nil {
				timer.Reset(*idle)
			}
			var o tailOutput
			if err := json.Unmarshal(m.Value, &o); err != nil {
				return fmt.Errorf("topic %s partition %d offset %d: not an outlierd JSON output: %v (%s)", m.Topic, m.Partition, m.Offset, err, counts())
			}
			if !*all && (o.Scores == nil || !o.Scores.Outlier) {
				continue
			}
			if !seen.add(o.ID) {
				dups++
				continue
			}
			line := formatTail
			if *asJSON {
				line = func(*tailOutput) string { return string(m.Value) }
			}
			if _, err := fmt.Fprintln(stdout, line(&o)); err != nil {
				return fmt.Errorf("writing the output: %w (%s)", err, counts()) // (a full disk: not read on for ever)
			}
			if printed++; *maxN > 0 && printed >= *maxN {
				fmt.Fprintf(stderr, "outlierd tail: --max %d reached: %s\n", *maxN, counts())
				return nil
			}
		}
	}
}

// formatTail is tail's line: id, key, score (or "unscored") with what it came to when that is
// not a plain alert (inlier, suppressed by the alarm cap, folded into an alert, an alert that
// others were folded into), and the explanation.
func formatTail(o *tailOutput) string {
	key := "-"
	if o.Key != nil {
		key = *o.Key
		if o.KeyEncoding == "base64" {
			key = "base64:" + key
		}
	}
	score := "unscored"
	if o.Scores != nil {
		v := float64(o.Scores.Score)
		switch {
		case math.IsInf(v, 1):
			score = "Infinity"
		case math.IsInf(v, -1):
			score = "-Infinity"
		default:
			score = strconv.FormatFloat(v, 'f', 2, 64)
		}
		// At most one applies: a suppressed record is not flagged, and a folded one (Grouped)
		// carries no count of its own (batch.AlertReason).
		switch sc := o.Scores; {
		case sc.Suppressed:
			score += " (suppressed: alarm cap)"
		case !sc.Outlier:
			score += " (inlier)"
		case sc.Folded && sc.AlertTimestamp != nil:
			score += " (folded into the alert of " + *sc.AlertTimestamp + ")"
		case sc.Folded:
			score += " (folded into the key's open alert)"
		case sc.FoldedBefore > 0:
			score += " (+" + strconv.Itoa(sc.FoldedBefore) + " folded into the previous alert)"
		}
	}
	return fmt.Sprintf("%s  key=%s  score=%s  %s", o.ID, key, score, o.Explanation)
}

// endingWriter is tail's stderr: its partition readers log from goroutines of their own, which
// outlive tail's return until their read ends (a warning of a failed read may be on its way as
// tail returns; kafka-go's Reader, before, logged its end after tail's last line), so the
// writes are made one at a time and none after end (tail returned: its caller has the writer
// back).
type endingWriter struct {
	mu    sync.Mutex
	w     io.Writer
	ended bool
}

func (e *endingWriter) Write(p []byte) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ended {
		return len(p), nil
	}
	return e.w.Write(p)
}

// end drops every later write.
func (e *endingWriter) end() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ended = true
}

// tailConnectWait bounds tail --idle-exit's wait for its readers' first fetches (the topic
// check's bound, pipeline's topicCheckWait).
var tailConnectWait = 30 * time.Second

// readTopic reads every partition of sink.topic (no consumer group: nothing is committed,
// nothing left on the broker), from the beginning or the end, into one channel, each through
// pipeline's TopicFollower: every exchange with a broker bounded (a lost request costs a retry;
// kafka-go's Reader, before, waited for it until tail stopped), a failed read retried with a
// backoff and warned of at a pace (a partition's first failure at once, the next line 30 s
// later, the gap doubling to 5 min). fetching is closed once every partition's reader has connected, found its offset
// and sent its first fetch.
func readTopic(ctx context.Context, cfg pipeline.Config, fromStart bool, log zerolog.Logger) (msgs <-chan kafka.Message, fetching <-chan struct{}, err error) {
	topic := pipeline.OutputTopic(cfg)
	parts, err := topic.PartitionIDs(ctx, log)
	if err != nil {
		return nil, nil, err
	}
	f, err := topic.Follower(cfg.Sink.MaxMessageBytes, log)
	if err != nil {
		return nil, nil, err
	}
	start := kafka.LastOffset
	if fromStart {
		start = kafka.FirstOffset
	}
	out := make(chan kafka.Message, 256)
	sent := make(chan struct{})
	var left atomic.Int64 // partitions yet to send their first fetch
	left.Store(int64(len(parts)))
	first := func() { // (once a partition: Follow)
		if left.Add(-1) == 0 {
			close(sent)
		}
	}
	for _, p := range parts {
		go func() {
			// (Follow ends with ctx, handle's only error: tail has returned, or returns)
			_ = f.Follow(ctx, p, start, first, func(m kafka.Message) error {
				select {
				case out <- m:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			})
		}()
	}
	return out, sent, nil
}
