package deploy_test

import (
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestDashboardModelVersionUnabbreviated (reread26): the dashboard shows the serving model's
// version as the number it is. A builder's versions are its clock in ms (13 digits, e.g.
// 1795672197817: docs/OPERATIONS.md "Builder and scorers"), and Grafana's unit "short" wrote
// them "1.80 Tri": every version of a year the same tile and axis label, none comparable with
// the model_version of the outputs and logs. Each panel that plots outlierd_model_version
// itself (not a function of it, as changes()) has unit "none" and no decimals.
func TestDashboardModelVersionUnabbreviated(t *testing.T) {
	data, err := os.ReadFile("grafana/outlierd.json")
	if err != nil {
		t.Fatal(err)
	}
	type versionPanel struct {
		Title       string `json:"title"`
		FieldConfig struct {
			Defaults struct {
				Unit     string `json:"unit"`
				Decimals *int   `json:"decimals"`
			} `json:"defaults"`
		} `json:"fieldConfig"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
		Panels []versionPanel `json:"panels"`
	}
	var d struct {
		Panels []versionPanel `json:"panels"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("grafana/outlierd.json: %v", err)
	}
	seen := 0
	var walk func([]versionPanel)
	walk = func(ps []versionPanel) {
		for _, p := range ps {
			walk(p.Panels)
			plots := false
			for _, tg := range p.Targets {
				e := strings.TrimSpace(tg.Expr)
				plots = plots || strings.HasPrefix(e, "outlierd_model_version") || strings.HasPrefix(e, "max(outlierd_model_version")
			}
			if !plots {
				continue
			}
			seen++
			def := p.FieldConfig.Defaults
			if def.Unit != "none" || def.Decimals == nil || *def.Decimals != 0 {
				dec := "unset"
				if def.Decimals != nil {
					dec = strconv.Itoa(*def.Decimals)
				}
				t.Errorf("panel %q shows outlierd_model_version with unit %q, decimals %s: want unit \"none\", decimals 0 (a 13-digit version abbreviated is no version)", p.Title, def.Unit, dec)
			}
		}
	}
	walk(d.Panels)
	if seen == 0 {
		t.Fatal("no panel shows outlierd_model_version")
	}
}
