package main

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/chromedp/chromedp"

	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/internal/testsupport/testbatch"
	"github.com/outlierd/outlierd/pipeline/metrics"
)

// TestLiveViewAlertHeldBelowThreshold: the alerts table sets each alert's score against the
// threshold; a record the alarm's deadband held (detect.flag_clear: flagged below min_score)
// reads "4.2 < 5", not "4.2 > 5" against its own explanation, and a record over it "9 ≥ 5".
func TestLiveViewAlertHeldBelowThreshold(t *testing.T) {
	browser := liveViewBrowser(t)
	m := metrics.New()
	rows := []testbatch.Row{
		{Partition: 0, Offset: 1, Key: []byte("over"), Time: time.UnixMilli(1_700_000_000_000), Features: []float32{30},
			Score: batch.Score{Scored: true, Outlier: true, Score: 9, Threshold: 5}},
		{Partition: 0, Offset: 2, Key: []byte("held"), Time: time.UnixMilli(1_700_000_000_001), Features: []float32{20},
			Score: batch.Score{Scored: true, Outlier: true, Held: true, Score: 4.2, Threshold: 5}},
	}
	b := testbatch.New(t, memory.NewGoAllocator(), "in", []string{"temp"}, false, true, rows)
	m.OfferBatch(b, 2)
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	bctx, stopBrowser := headless(ctx, browser)
	defer stopBrowser()
	if err := chromedp.Do(bctx, chromedp.Navigate(srv.URL+"/")); err != nil {
		t.Fatalf("opening %s: %v", srv.URL, err)
	}
	if _, err := chromedp.Run(bctx, chromedp.Poll[chromedp.Void](`document.querySelectorAll('#alerts tbody tr').length == 2`,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatalf("the two alerts never showed: %v", err)
	}
	for key, want := range map[string]string{"held": "4.2 < 5", "over": "9 ≥ 5"} {
		cell, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.querySelector('#alerts tbody tr[data-key="`+key+`"] td:nth-child(3)').innerText`))
		if err != nil || strings.TrimSpace(cell) != want {
			t.Errorf("alert of key %s: score cell %q (err %v), want %q", key, cell, err, want)
		}
	}
}
