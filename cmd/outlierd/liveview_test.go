package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/segmentio/kafka-go"

	"github.com/outlierd/outlierd/internal/accel"
	"github.com/outlierd/outlierd/internal/testsupport"
)

// liveViewBrowser finds a headless Chromium: $OUTLIERD_BROWSER, else Debian's
// chromium-headless-shell (.ci/deps.sh installs it), else a Chromium or Chrome on the PATH. Without
// one the test skips, except in CI (CI=true), where it fails: CI must run it.
// headless starts browser (liveViewBrowser's) with --no-sandbox and opts; the returned stop
// closes the tab and the browser.
func headless(ctx context.Context, browser string, opts ...chromedp.ExecAllocatorOption) (context.Context, func()) {
	all := append(append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browser), chromedp.NoSandbox), opts...)
	allocCtx, stopAlloc := chromedp.NewExecAllocator(ctx, all...)
	bctx, stopBrowser := chromedp.NewContext(allocCtx)
	return bctx, func() { stopBrowser(); stopAlloc() }
}

func liveViewBrowser(t *testing.T) string {
	if p := os.Getenv("OUTLIERD_BROWSER"); p != "" {
		return p
	}
	// The binary itself before Debian's /usr/bin wrapper script, so that stopping the browser
	// stops the browser, not a shell.
	for _, p := range []string{"/usr/lib/chromium/chromium-headless-shell", "chromium-headless-shell",
		"headless-shell", "chromium", "chromium-browser", "google-chrome"} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("CI=true but no headless Chromium found: .ci/deps.sh installs Debian's chromium-headless-shell (or set OUTLIERD_BROWSER)")
	}
	t.Skip("skipping the live view's browser test: no headless Chromium (apt-get install chromium-headless-shell, as .ci/deps.sh does, or set OUTLIERD_BROWSER); in CI (CI=true) this test fails instead")
	return ""
}

// TestLiveViewInBrowser runs `outlierd demo` (its broker, producer and pipeline, in this process)
// and opens the URL it prints in a real headless Chromium: the page loads without a console
// error, exception or refused resource (the page's content security policy admits only its own
// server, so a CDN would show here), the chart draws sampled points (its canvas says how many,
// and its pixels show them), the models and the throughput show, and a spike produced to the
// demo's input topic shows as an alert, with its explanation, within a few seconds. With
// OUTLIERD_LIVEVIEW_SCREENSHOT=FILE it also saves a screenshot of the page there
// (docs/liveview.png comes from it), after OUTLIERD_LIVEVIEW_SETTLE (default 0) more of the demo.
func TestLiveViewInBrowser(t *testing.T) {
	browser := liveViewBrowser(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	demoCtx, stopDemo := context.WithCancel(ctx)
	defer stopDemo()
	var stderr testsupport.LogBuffer
	demoDone := make(chan error, 1)
	go func() {
		// 2,000 records/s: a model within about 3 s (min_records 5000), and a pipeline that keeps
		// up on a loaded 2-core CI machine, so the spike waits behind no backlog.
		demoDone <- demo(demoCtx, []string{"--duration", "2m", "--rate", "2000"}, &bytes.Buffer{}, &stderr, accel.Options{NoCompanion: "test"})
	}()
	defer func() {
		stopDemo()
		if err := <-demoDone; err != nil {
			t.Errorf("demo: %v", err)
		}
	}()

	// The demo prints its broker and the page's URL.
	var url, brokers string
	for deadline := time.Now().Add(30 * time.Second); url == "" && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		out := stderr.String()
		if m := regexp.MustCompile(`live view on (http://\S+/) `).FindStringSubmatch(out); m != nil {
			url = m[1]
		}
		if m := regexp.MustCompile(`in-process Kafka on (\S+);`).FindStringSubmatch(out); m != nil {
			brokers = m[1]
		}
	}
	if url == "" || brokers == "" {
		t.Fatalf("the demo printed no live view URL or broker in 30 s; stderr:\n%s", stderr.String())
	}

	// --no-sandbox: CI and containers run as root, where Chromium refuses its sandbox; the page
	// is this test's own.
	bctx, stopBrowser := headless(ctx, browser, chromedp.WindowSize(1440, 1000))
	defer stopBrowser()
	var mu sync.Mutex
	var problems []string
	if err := chromedp.Listen(bctx, func(ev any) {
		var p string
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert {
				var args []string
				for _, a := range ev.Args {
					args = append(args, string(a.Value)+a.Description)
				}
				p = "console." + string(ev.Type) + ": " + strings.Join(args, " ")
			}
		case *runtime.EventExceptionThrown:
			p = "exception: " + ev.ExceptionDetails.Text
			if ev.ExceptionDetails.Exception != nil {
				p += " " + ev.ExceptionDetails.Exception.Description
			}
		case *log.EventEntryAdded: // refused or failed resources, CSP violations
			if ev.Entry.Level == log.EntryLevelError {
				p = "log: " + ev.Entry.Text + " " + ev.Entry.URL
			}
		}
		if p != "" {
			mu.Lock()
			problems = append(problems, p)
			mu.Unlock()
		}
	}); err != nil {
		t.Fatalf("starting %s: %v", browser, err)
	}
	if err := chromedp.Do(bctx, chromedp.Navigate(url)); err != nil {
		t.Fatalf("opening %s: %v", url, err)
	}
	wait := func(what, predicate string, within time.Duration) {
		t.Helper()
		if _, err := chromedp.Run(bctx, chromedp.Poll[chromedp.Void](predicate,
			chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(within))); err != nil {
			state, _ := chromedp.Run(bctx, chromedp.Evaluate[string](`document.body.innerText`))
			t.Fatalf("%s: not within %s (%v); the page shows:\n%s\ndemo stderr:\n%s", what, within, err, state, stderr.String())
		}
	}
	// The first model is built once the window holds min_records (5000: 1 s of the demo's rate).
	wait("a model in the models table", `document.querySelectorAll('#models tbody tr').length > 0`, 30*time.Second)
	wait("sampled points on the chart", `Number(document.getElementById('chart').dataset.pointsDrawn) > 20`, 10*time.Second)
	wait("a throughput figure", `/^[0-9.]+k?$/.test(document.getElementById('t-rate').textContent)`, 10*time.Second)
	// The points are on the canvas, not only counted: pixels of the inlier colour (#4f8fd6,
	// drawn at 45% opacity over the dark card: blue well above red) are there.
	blue, err := chromedp.Run(bctx, chromedp.Evaluate[int](`(() => {
		const c = document.getElementById('chart');
		const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
		let n = 0;
		for (let i = 0; i < d.length; i += 4) if (d[i + 3] > 0 && d[i + 2] > 100 && d[i + 2] > d[i] + 40) n++;
		return n;
	})()`))
	if err != nil || blue < 20 {
		t.Fatalf("the chart's canvas has %d pixels of the points' colour (err %v)", blue, err)
	}

	// A spike: every feature far outside the demo's three operating modes, on a key of its own.
	spikeKey := fmt.Sprintf("spike-%d", time.Now().UnixNano())
	w := &kafka.Writer{Addr: kafka.TCP(brokers), Topic: "demo-sensors", RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond}
	defer w.Close()
	value := `{"sensor":"` + spikeKey + `","temp":900,"pressure":9000,"humidity":-400,"vibration":90,"current":800,"voltage":9000,"rpm":90000,"flow":-900}`
	sent := time.Now()
	if err := w.WriteMessages(ctx, kafka.Message{Key: []byte(spikeKey), Value: []byte(value)}); err != nil {
		t.Fatalf("producing the spike: %v", err)
	}
	// "Within a few seconds": the batch wait (50 ms), scoring, the sink's acks=all, the page's
	// event tick (250 ms) and its table refresh take well under a second here; 5 s leaves room
	// for a loaded 2-core CI machine.
	row := `document.querySelector('#alerts tbody tr[data-key="` + spikeKey + `"]')`
	wait("the spike as an alert", row+` !== null`, 5*time.Second)
	t.Logf("the spike showed as an alert %s after it was produced", time.Since(sent).Round(time.Millisecond))
	why, err := chromedp.Run(bctx, chromedp.Evaluate[string](row+`.innerText`))
	if err != nil || !strings.Contains(why, "threshold") || !strings.Contains(why, "temp 900") {
		t.Errorf("the spike's alert row says %q (err %v): want its explanation and its values", why, err)
	}
	wait("the spike drawn on the chart", `Number(document.getElementById('chart').dataset.alertsDrawn) > 0`, 2*time.Second)

	if path := os.Getenv("OUTLIERD_LIVEVIEW_SCREENSHOT"); path != "" {
		if d, err := time.ParseDuration(os.Getenv("OUTLIERD_LIVEVIEW_SETTLE")); err == nil {
			time.Sleep(d)
		}
		png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot: %v", err)
		}
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(problems) > 0 {
		t.Errorf("the page logged errors:\n%s", strings.Join(problems, "\n"))
	}
}
