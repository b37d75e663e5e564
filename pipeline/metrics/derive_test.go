package metrics

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// TestSetDerive: ingest.derive's series held and loaded at the start as gauges, its evictions
// as a counter of the running total's growth (a total that does not grow adds nothing); all 0
// before the first figures (without ingest.derive).
func TestSetDerive(t *testing.T) {
	m := New()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	names := []string{"outlierd_derive_series", "outlierd_derive_evictions_total", "outlierd_derive_state_restored_series"}
	want := func(series, evictions, restored string) string {
		return `
# HELP outlierd_derive_series Series of ingest.derive held, one per (partition, key) (at most derive.max_keys).
# TYPE outlierd_derive_series gauge
outlierd_derive_series ` + series + `
# HELP outlierd_derive_evictions_total Series of ingest.derive evicted past derive.max_keys, least recently seen first: the key's rolling columns warm again when it returns.
# TYPE outlierd_derive_evictions_total counter
outlierd_derive_evictions_total ` + evictions + `
# HELP outlierd_derive_state_restored_series Series of ingest.derive loaded from detect.state_dir at the start (0: none loaded).
# TYPE outlierd_derive_state_restored_series gauge
outlierd_derive_state_restored_series ` + restored + `
`
	}
	if err := scrapeAndCompare(t, srv.URL+"/metrics", strings.NewReader(want("0", "0", "0")), names...); err != nil {
		t.Fatal("before any figures:", err)
	}
	m.SetDerive(2, 1, 5)
	m.SetDerive(2, 4, 5)
	m.SetDerive(1, 4, 5)
	if err := scrapeAndCompare(t, srv.URL+"/metrics", strings.NewReader(want("1", "4", "5")), names...); err != nil {
		t.Fatal(err)
	}
}
