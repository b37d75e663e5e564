package pipeline

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/testsupport"
)

// TestFailureRunPaces: a reader failing every 5 s (the backoff's cap) warns at its first
// failure and then after failureLineEvery, each line with the run's failed reads, those
// since the last line and the last error; its recovery is said once; a run that fails and
// recovers within failureLineEvery of a line says nothing, its failure counted into the next
// line; a long run's lines come further apart, the gap doubling to failureLineMax (at 0, 30 s,
// 1.5, 3.5, 7.5, 12.5 min). The clock is the test's (each call takes its now).
func TestFailureRunPaces(t *testing.T) {
	var logs testsupport.LogBuffer
	log := zerolog.New(&logs)
	var f failureRun
	t0 := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	type line struct {
		Level, Error string
		FailedReads  int     `json:"failed_reads"`
		SinceLast    int     `json:"failed_since_last_line"`
		FailingFor   float64 `json:"failing_for"` // (zerolog's durations: ms)
	}
	var want []line
	step := func(s int, fail bool, said bool, w line) {
		t.Helper()
		var e *zerolog.Event
		if fail {
			f.fail(at(s))
			e = f.warning(&log, errors.New("refused "+time.Duration(s*int(time.Second)).String()), at(s))
		} else {
			e = f.answered(&log, at(s))
		}
		if (e != nil) != said {
			t.Fatalf("at %d s (failure %v): a line %v, want %v", s, fail, e != nil, said)
		}
		if e != nil {
			e.Msg("m")
			want = append(want, w)
		}
	}
	step(0, true, true, line{Level: "warn", Error: "refused 0s", FailedReads: 1, SinceLast: 1})
	for s := 5; s < 30; s += 5 {
		step(s, true, false, line{})
	}
	step(30, true, true, line{Level: "warn", Error: "refused 30s", FailedReads: 7, SinceLast: 6, FailingFor: 30000})
	step(31, false, true, line{Level: "info", FailedReads: 7, FailingFor: 31000})
	step(32, false, false, line{}) // (no run)
	step(40, true, false, line{})  // (10 s after the last line)
	step(41, false, false, line{}) // (that run unsaid)
	step(61, true, true, line{Level: "warn", Error: "refused 1m1s", FailedReads: 1, SinceLast: 2})
	step(62, false, true, line{Level: "info", FailedReads: 1, FailingFor: 1000})
	// A run of 15 min from 100 s, a failure every 5 s: lines at 0, 30 s, 1.5, 3.5, 7.5 and 12.5
	// min into it (the gaps 30 s, 60 s, 2, 4 and 5 min).
	lineAt := map[int]bool{100: true, 130: true, 190: true, 310: true, 550: true, 850: true}
	last := 100
	for s := 100; s <= 1000; s += 5 {
		w := line{}
		if lineAt[s] {
			w = line{Level: "warn", Error: "refused " + time.Duration(s*int(time.Second)).String(), FailedReads: (s-100)/5 + 1,
				SinceLast: max((s-last)/5, 1), FailingFor: float64(s-100) * 1000}
			last = s
		}
		step(s, true, lineAt[s], w)
	}
	var got []line
	for _, l := range logs.Lines() {
		var g line
		if err := json.Unmarshal([]byte(l), &g); err != nil {
			t.Fatal(err)
		}
		got = append(got, g)
	}
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(got), len(want), logs.String())
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}
