package testsupport

import (
	"io"
	"net/http"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Scrape GETs url and parses the Prometheus text format.
func Scrape(tb testing.TB, url string) map[string]*dto.MetricFamily {
	tb.Helper()
	resp, err := http.Get(url)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		tb.Fatalf("parsing %s: %v", url, err)
	}
	return fams
}

// Get returns the status and body of a GET of url.
func Get(tb testing.TB, url string) (int, string) {
	tb.Helper()
	resp, err := http.Get(url)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("reading %s: %v", url, err)
	}
	return resp.StatusCode, string(b)
}

// TryGet is a GET of url within 2 s: its status and body, or the error (a refused connection
// included), for tests that poll an endpoint that may not be listening yet.
func TryGet(url string) (int, string, error) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}
