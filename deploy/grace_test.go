package deploy_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// TestStopGraceExceedsShutdownTimeout: every recipe gives the process longer than the shipped
// config's run.shutdown_timeout between SIGTERM and SIGKILL, so the graceful stop (drain,
// final commit, a builder's last publications) is not killed midway (docs/OPERATIONS.md,
// Shutdown). Compose's default is Docker's 10 s: the compose file had none.
func TestStopGraceExceedsShutdownTimeout(t *testing.T) {
	bound := shippedConfig(t, nil).Run.ShutdownTimeout
	check := func(what string, grace time.Duration) {
		if grace <= bound {
			t.Errorf("%s gives %s before SIGKILL, not more than run.shutdown_timeout %s", what, grace, bound)
		}
	}

	grace := 10 * time.Second // Docker's default
	if s := str(at(yamlDocs(t, "compose.yaml")[0], "services", "outlierd", "stop_grace_period")); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("compose.yaml: outlierd's stop_grace_period %q: %v", s, err)
		}
		grace = d
	}
	check("compose.yaml's outlierd", grace)

	for _, f := range []string{"builder.yaml", "scorer.yaml"} {
		for _, d := range yamlDocs(t, filepath.Join("k8s", f)) {
			if str(d["kind"]) != "Deployment" {
				continue
			}
			s := str(at(d, "spec", "template", "spec", "terminationGracePeriodSeconds"))
			n, err := strconv.Atoi(s)
			if err != nil {
				n = 30 // Kubernetes' default
			}
			check("k8s/"+f, time.Duration(n)*time.Second)
		}
	}

	unit, err := os.ReadFile("systemd/outlierd.service")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^TimeoutStopSec=(\d+)$`).FindSubmatch(unit)
	if m == nil {
		t.Fatal("systemd/outlierd.service: no TimeoutStopSec=N (systemd's default is 90 s, but say it)")
	}
	n, _ := strconv.Atoi(string(m[1]))
	check("systemd/outlierd.service", time.Duration(n)*time.Second)
}
