package deploy_test

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"gopkg.in/yaml.v3"

	"github.com/outlierd/outlierd/internal/datasets/synth"
	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/pipeline"
	"github.com/outlierd/outlierd/pipeline/metrics"
)

// dashboard is what the test reads of deploy/grafana/outlierd.json.
type dashboard struct {
	UID        string  `json:"uid"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string          `json:"name"`
			Query json.RawMessage `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's
}

// dashboardExprs returns every PromQL expression of the dashboard (panel targets and the
// variables' label_values selectors), by where it is.
func dashboardExprs(t *testing.T) map[string]string {
	data, err := os.ReadFile("grafana/outlierd.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("grafana/outlierd.json: %v", err)
	}
	exprs := map[string]string{}
	ids := map[int]string{}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if other, dup := ids[p.ID]; dup {
				t.Errorf("panels %q and %q share the id %d (Grafana needs them unique)", other, p.Title, p.ID)
			}
			ids[p.ID] = p.Title
			if p.Type != "row" && (p.Datasource == nil || p.Datasource.UID != "${datasource}") {
				t.Errorf("panel %q does not use the dashboard's datasource variable", p.Title)
			}
			for i, tg := range p.Targets {
				exprs[p.Title+" #"+string(rune('A'+i))] = tg.Expr
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	labelValues := regexp.MustCompile(`^label_values\((.*),\s*[A-Za-z_]+\)$`)
	for _, v := range d.Templating.List {
		var q struct {
			Query string `json:"query"`
		}
		if json.Unmarshal(v.Query, &q) != nil || q.Query == "" {
			continue // the datasource variable
		}
		m := labelValues.FindStringSubmatch(q.Query)
		if m == nil {
			t.Errorf("variable %s: query %q is not label_values(selector, label)", v.Name, q.Query)
			continue
		}
		exprs["variable "+v.Name] = m[1]
	}
	return exprs
}

// ruleExprs returns every alert rule's expression by its name.
func ruleExprs(t *testing.T) map[string]string {
	data, err := os.ReadFile("prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Expr        string            `yaml:"expr"`
				For         string            `yaml:"for"`
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	if err := dec.Decode(&rules); err != nil {
		t.Fatalf("prometheus/alerts.yml: %v", err)
	}
	exprs := map[string]string{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || r.Expr == "" || r.Annotations["summary"] == "" || r.Labels["severity"] == "" {
				t.Errorf("rule %+v: want alert, expr, labels.severity and annotations.summary", r)
			}
			if _, err := time.ParseDuration(r.For); err != nil {
				t.Errorf("rule %s: for %q: %v", r.Alert, r.For, err)
			}
			exprs["alert "+r.Alert] = r.Expr
		}
	}
	return exprs
}

// TestDashboardAndAlertSeriesExist runs the pipeline with deploy/config/outlierd.yaml on an
// in-process broker until a model serves and records are out, and checks that every series the
// dashboard's and the alert rules' expressions name is in its /metrics (a histogram's _bucket,
// _sum and _count by the histogram's name). `up` is Prometheus' own series of each scrape. The
// per-kernel GPU series exist only with a GPU: the test gives the CPU pipeline a device's
// kernel totals (metrics.SetKernelTimes, what the pipeline does with a GPU) so that their
// names are checked too.
func TestDashboardAndAlertSeriesExist(t *testing.T) {
	exprs := dashboardExprs(t)
	for k, v := range ruleExprs(t) {
		exprs[k] = v
	}
	named := map[string][]string{} // series -> where
	for where, e := range exprs {
		for _, n := range promNames(e) {
			named[n] = append(named[n], where)
		}
	}
	// The extractor found what the files are about (it cannot silently find nothing).
	for _, n := range []string{"outlierd_consumer_lag", "outlierd_records_flagged_total", "outlierd_detector_outliers_total",
		"outlierd_gpu_kernel_seconds_total", "outlierd_gpu_fallbacks_total", "outlierd_dead_letters_total", "outlierd_model_age_seconds"} {
		if named[n] == nil {
			t.Errorf("no expression names %s: the dashboard must show it", n)
		}
	}

	br := testsupport.KfakeBroker(t, kfake.SeedTopics(3, "sensors"))
	t.Setenv("KAFKA_BROKERS", br.Addrs[0])
	data, err := os.ReadFile("config/outlierd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pipeline.LoadConfigBytes("config/outlierd.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	cfg.HTTP.Listen = "127.0.0.1:0"                       // not the container's 0.0.0.0:9464
	cfg.HTTP.LagInterval = 100 * time.Millisecond         // the lag series after the first poll
	cfg.Detect.MinRecords, cfg.Detect.Window = 1000, 2000 // a model within a second here
	const n = 3000
	gen := synth.NewSensorStream(3, 0.01, 0.01)
	recs := make([]*kgo.Record, n)
	for i := range recs {
		k, v, _, _ := gen.Next()
		recs[i] = &kgo.Record{Topic: "sensors", Key: k, Value: v}
	}
	testsupport.Produce(t, br, recs...)
	p, err := pipeline.New(context.Background(), cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	p.Metrics().SetKernelTimes(func() map[string]metrics.KernelTime {
		return map[string]metrics.KernelTime{"knn_exact": {Launches: 3, Time: time.Millisecond}}
	})
	srv, err := metrics.Listen(cfg.HTTP.Listen, p.Metrics(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	runErr := make(chan error, 1)
	go func() { runErr <- p.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-runErr; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	var fams map[string]*dto.MetricFamily
	for {
		fams = testsupport.Scrape(t, "http://"+srv.Addr()+"/metrics")
		if f := fams["outlierd_consumer_lag"]; f != nil && p.Stats().ModelVersion.Load() > 0 && p.Stats().RecordsOut.Load() > 0 {
			break
		}
		select {
		case err := <-runErr:
			t.Fatalf("Run ended: %v", err)
		case <-ctx.Done():
			t.Fatalf("no model, output and lag poll within 60 s (out %d)", p.Stats().RecordsOut.Load())
		case <-time.After(50 * time.Millisecond):
		}
	}
	var missing []string
	for name, where := range named {
		if name == "up" {
			continue
		}
		base := name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if f := fams[strings.TrimSuffix(name, suffix)]; strings.HasSuffix(name, suffix) && f != nil &&
				(f.GetType() == dto.MetricType_HISTOGRAM || f.GetType() == dto.MetricType_SUMMARY) {
				base = strings.TrimSuffix(name, suffix)
			}
		}
		if fams[base] == nil {
			slices.Sort(where)
			missing = append(missing, name+" (in "+strings.Join(where, ", ")+")")
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Errorf("series named by the dashboard or the alerts but absent from /metrics:\n%s", strings.Join(missing, "\n"))
	}
}

// TestAlertsNameTheOperatorCounters fails when a counter that only an on-call person can act
// on has no alert rule: a scorer's follower that cannot read the model topic (its /readyz stays
// 200 unless run.stale_model_after is set), folded alert counts lost past the alert groups'
// bounds, and a builder's passes over stale keys' models that do not end.
// TestDashboardAndAlertSeriesExist checks that what the rules name is exported.
func TestAlertsNameTheOperatorCounters(t *testing.T) {
	alerted := map[string]string{} // series -> the rule naming it
	for where, e := range ruleExprs(t) {
		for _, n := range promNames(e) {
			alerted[n] = where
		}
	}
	for _, n := range []string{"outlierd_model_topic_read_failures_total", "outlierd_model_topic_stale_passes_total",
		"outlierd_alert_folded_lost_total", "outlierd_model_topic_refused_total", "outlierd_gpu_fallbacks_total"} {
		if alerted[n] == "" {
			t.Errorf("no alert rule in prometheus/alerts.yml names %s", n)
		}
	}
}
