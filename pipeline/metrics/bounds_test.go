package metrics

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// TestBoundMetrics: the records whose fold count was lost, as a counter of the running total's
// growth (a total that does not grow adds nothing), and the builder's passes past the bound on
// the stale keys held, one each.
func TestBoundMetrics(t *testing.T) {
	m := New()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	m.SetAlertFoldedLost(10)
	m.SetAlertFoldedLost(25)
	m.SetAlertFoldedLost(25)
	m.AddStalePass()
	m.AddStalePass()
	if err := scrapeAndCompare(t, srv.URL+"/metrics", strings.NewReader(`
# HELP outlierd_alert_folded_lost_total Flagged records folded into an alert (detect.alert_cooldown) whose count no later alert tells (folded_into_previous_alert): their alert groups pruned past 65,536 keys, then their counts past 4,096 keys waiting for their next alert, oldest first.
# TYPE outlierd_alert_folded_lost_total counter
outlierd_alert_folded_lost_total 25
# HELP outlierd_model_topic_stale_passes_total A builder's reads of the model topic again for keys' models of another configuration, past detect.keys.max_keys of them held at once: each reads on from the first key not held, once those held are tombstoned.
# TYPE outlierd_model_topic_stale_passes_total counter
outlierd_model_topic_stale_passes_total 2
`), "outlierd_alert_folded_lost_total", "outlierd_model_topic_stale_passes_total"); err != nil {
		t.Fatal(err)
	}
}
