package deploy_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The series names of a PromQL expression, without a PromQL parser (Prometheus' own, in
// github.com/prometheus/prometheus, would pull that whole module and upgrade a dozen of
// ours): strings, label matchers, ranges and the label lists of by/without/on/ignoring/
// group_left/group_right are cut out first; what is left that looks like an identifier is a
// series name unless it is a function or aggregation (an identifier followed by "("), a keyword
// or a number. TestPromQLNames holds it to the expressions it has to read.

var (
	promStrings   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`")
	promMatchers  = regexp.MustCompile(`\{[^{}]*\}`)
	promRanges    = regexp.MustCompile(`\[[^\[\]]*\]`)
	promLabelList = regexp.MustCompile(`(?i)\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)`)
	promIdent     = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
	promKeywords  = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true,
		"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
		"inf": true, "nan": true, "atan2": true}
)

// promNames returns the series names expr reads, sorted, each once.
func promNames(expr string) []string {
	s := promStrings.ReplaceAllString(expr, " ")
	s = promMatchers.ReplaceAllString(s, " ")
	s = promRanges.ReplaceAllString(s, " ")
	s = promLabelList.ReplaceAllString(s, " ")
	var names []string
	for _, loc := range promIdent.FindAllStringIndex(s, -1) {
		name := s[loc[0]:loc[1]]
		if loc[0] > 0 && (s[loc[0]-1] >= '0' && s[loc[0]-1] <= '9' || s[loc[0]-1] == '.' || s[loc[0]-1] == '$') {
			continue // the tail of a number (1e3, 0.5) or a Grafana variable ($job)
		}
		if promKeywords[strings.ToLower(name)] || strings.HasPrefix(strings.TrimLeft(s[loc[1]:], " \t\n"), "(") {
			continue
		}
		names = append(names, name)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

func TestPromQLNames(t *testing.T) {
	for _, c := range []struct {
		expr string
		want []string
	}{
		{`up{job="outlierd"} == 0`, []string{"up"}},
		{`sum by (group, topic) (max by (group, topic, partition) (outlierd_consumer_lag)) > 100000
		  and deriv(sum by (group, topic) (max by (group, topic, partition) (outlierd_consumer_lag))[15m:1m]) > 0`, []string{"outlierd_consumer_lag"}},
		{`histogram_quantile(0.99, sum by (le, stage) (rate(outlierd_batch_duration_seconds_bucket{stage!="fetch"}[5m]))) > 2`,
			[]string{"outlierd_batch_duration_seconds_bucket"}},
		{`rate(a_total[30m]) / rate(b_total[30m]) > 5 * (rate(a_total[1d] offset 1d) / rate(b_total[1d] offset 1d))`, []string{"a_total", "b_total"}},
		{`sum by (detector) (rate(x_total{job=~"$job", instance=~"$instance"}[$__rate_interval])) / ignoring(detector) group_left sum(rate(y_total[$__rate_interval]))`,
			[]string{"x_total", "y_total"}},
		{`outlierd_model_age_seconds > 10 * 60 and rate(outlierd_records_in_total[10m]) > 0`, []string{"outlierd_model_age_seconds", "outlierd_records_in_total"}},
		{`label_values(outlierd_records_in_total{job=~"$job"}, instance)`, []string{"instance", "outlierd_records_in_total"}},
		{`count(up{job="a"}) / 1e3 + bool 2.5`, []string{"up"}},
	} {
		if got := promNames(c.expr); !slices.Equal(got, c.want) {
			t.Errorf("promNames(%q) = %v, want %v", c.expr, got, c.want)
		}
	}
}
