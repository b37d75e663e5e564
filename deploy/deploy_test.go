// Package deploy_test checks the deployment recipes of deploy/ against each other and against
// the program, where no container runtime or cluster is at hand: every file parses, the config
// they ship loads (in each role), the probes and ports are the config's listen port, the paths
// they mount exist, and the names they share (topics, group, brokers) agree.
package deploy_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/outlierd/outlierd/pipeline"
	"github.com/outlierd/outlierd/stages/detect"
)

// shippedConfig is deploy/config/outlierd.yaml, loaded with env set (and KAFKA_BROKERS).
func shippedConfig(t *testing.T, env map[string]string) pipeline.Config {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	data, err := os.ReadFile("config/outlierd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pipeline.LoadConfigBytes("config/outlierd.yaml", data)
	if err != nil {
		t.Fatalf("config/outlierd.yaml with %v: %v", env, err)
	}
	return cfg
}

// listenPort is the port of the shipped config's http.listen.
func listenPort(t *testing.T) string {
	_, port, err := net.SplitHostPort(shippedConfig(t, nil).HTTP.Listen)
	if err != nil || port == "0" {
		t.Fatalf("config/outlierd.yaml: http.listen %q: want a fixed port", shippedConfig(t, nil).HTTP.Listen)
	}
	return port
}

// yamlDocs parses every document of a YAML file.
func yamlDocs(t *testing.T, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var docs []map[string]any
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var d map[string]any
		if err := dec.Decode(&d); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if d != nil {
			docs = append(docs, d)
		}
	}
	return docs
}

// at walks a parsed YAML value: keys of maps, indexes of lists (as ints).
func at(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func str(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int:
		return strconv.Itoa(x)
	}
	return ""
}

func TestShippedConfigLoadsInEachRole(t *testing.T) {
	if c := shippedConfig(t, nil); c.Run.Role != detect.RoleAll || c.Ingest.Topic != "sensors" {
		t.Errorf("without environment: role %q, topic %q; want all and sensors", c.Run.Role, c.Ingest.Topic)
	}
	for _, role := range []string{"builder", "scorer"} {
		c := shippedConfig(t, map[string]string{"OUTLIERD_ROLE": role, "OUTLIERD_MODEL_TOPIC": "outlierd-models"})
		if string(c.Run.Role) != role || c.Run.ModelTopic != "outlierd-models" {
			t.Errorf("role %s: got %q on %q", role, c.Run.Role, c.Run.ModelTopic)
		}
	}
}

// TestKubernetesManifests: the ConfigMap holds the shipped config verbatim; each Deployment's
// config loads in its role with the environment the manifests give it; the probes are
// /healthz (liveness) and /readyz (readiness) on the config's listen port, which the container
// and the scrape annotation name; the config is mounted where the command reads it; the
// KEDA trigger watches the config's group and topic on its brokers; the Service reaches the
// port.
func TestKubernetesManifests(t *testing.T) {
	port := listenPort(t)
	var kust struct {
		Resources []string `yaml:"resources"`
	}
	data, err := os.ReadFile("k8s/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &kust); err != nil {
		t.Fatal(err)
	}
	byKind := map[string][]map[string]any{}
	for _, r := range kust.Resources {
		for _, d := range yamlDocs(t, filepath.Join("k8s", r)) {
			kind := str(d["kind"])
			if kind == "" || str(at(d, "metadata", "name")) == "" || str(d["apiVersion"]) == "" {
				t.Errorf("k8s/%s: a document without apiVersion, kind or metadata.name", r)
			}
			byKind[kind] = append(byKind[kind], d)
		}
	}
	shipped, err := os.ReadFile("config/outlierd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	foundConfig := false
	for _, cm := range byKind["ConfigMap"] {
		switch str(at(cm, "metadata", "name")) {
		case "outlierd-config":
			foundConfig = true
			if got := str(at(cm, "data", "outlierd.yaml")); got != string(shipped) {
				t.Errorf("k8s/configmap.yaml's outlierd.yaml differs from config/outlierd.yaml: copy it over")
			}
		case "outlierd-env":
			for k, v := range at(cm, "data").(map[string]any) {
				env[k] = str(v)
			}
		}
	}
	if !foundConfig || len(env) == 0 {
		t.Fatalf("want the ConfigMaps outlierd-config and outlierd-env")
	}
	roles := map[string]bool{}
	for _, dep := range byKind["Deployment"] {
		name := str(at(dep, "metadata", "name"))
		spec := at(dep, "spec", "template", "spec")
		c := at(spec, "containers", 0)
		envOf := map[string]string{}
		for k, v := range env {
			envOf[k] = v
		}
		for _, e := range at(c, "env").([]any) {
			envOf[str(at(e, "name"))] = str(at(e, "value"))
		}
		cfg := shippedConfig(t, envOf)
		roles[string(cfg.Run.Role)] = true
		if !strings.Contains(name, string(cfg.Run.Role)) {
			t.Errorf("Deployment %s runs role %q", name, cfg.Run.Role)
		}
		portName := ""
		for _, p := range at(c, "ports").([]any) {
			if str(at(p, "containerPort")) == port {
				portName = str(at(p, "name"))
			}
		}
		if portName == "" {
			t.Errorf("Deployment %s: no containerPort %s (http.listen)", name, port)
		}
		for probe, path := range map[string]string{"livenessProbe": "/healthz", "readinessProbe": "/readyz"} {
			g := at(c, probe, "httpGet")
			if str(at(g, "path")) != path || (str(at(g, "port")) != portName && str(at(g, "port")) != port) {
				t.Errorf("Deployment %s: %s %v, want GET %s on %s", name, probe, g, path, port)
			}
		}
		if got := str(at(dep, "spec", "template", "metadata", "annotations", "prometheus.io/port")); got != port {
			t.Errorf("Deployment %s: prometheus.io/port %q, want %s", name, got, port)
		}
		// The config file the command reads is the ConfigMap's key, mounted.
		args := at(c, "args").([]any)
		i := slices.IndexFunc(args, func(a any) bool { return str(a) == "--config" })
		if i < 0 || i+1 >= len(args) {
			t.Fatalf("Deployment %s: args %v without --config FILE", name, args)
		}
		file := str(args[i+1])
		mounted := false
		for _, m := range at(c, "volumeMounts").([]any) {
			vol := str(at(m, "name"))
			for _, v := range at(spec, "volumes").([]any) {
				if str(at(v, "name")) == vol && str(at(v, "configMap", "name")) == "outlierd-config" &&
					file == filepath.Join(str(at(m, "mountPath")), "outlierd.yaml") {
					mounted = true
				}
			}
		}
		if !mounted {
			t.Errorf("Deployment %s reads %s, which is not outlierd-config's outlierd.yaml mounted", name, file)
		}
	}
	if !roles["builder"] || !roles["scorer"] {
		t.Errorf("roles deployed %v: want a builder and scorers", roles)
	}
	scorerCfg := shippedConfig(t, map[string]string{"OUTLIERD_ROLE": "scorer", "OUTLIERD_MODEL_TOPIC": env["OUTLIERD_MODEL_TOPIC"],
		"KAFKA_BROKERS": env["KAFKA_BROKERS"], "OUTLIERD_GROUP": env["OUTLIERD_GROUP"], "OUTLIERD_INPUT_TOPIC": env["OUTLIERD_INPUT_TOPIC"]})
	if len(byKind["ScaledObject"]) != 1 {
		t.Fatalf("want one ScaledObject (KEDA) for the scorers")
	}
	so := byKind["ScaledObject"][0]
	if got := str(at(so, "spec", "scaleTargetRef", "name")); got != "outlierd-scorer" {
		t.Errorf("ScaledObject scales %q", got)
	}
	trig := at(so, "spec", "triggers", 0, "metadata")
	if str(at(so, "spec", "triggers", 0, "type")) != "kafka" || str(at(trig, "consumerGroup")) != scorerCfg.Ingest.GroupID ||
		str(at(trig, "topic")) != scorerCfg.Ingest.Topic || str(at(trig, "bootstrapServers")) != scorerCfg.Ingest.Brokers[0] {
		t.Errorf("KEDA trigger %v: want kafka on group %q, topic %q, brokers %q", trig, scorerCfg.Ingest.GroupID,
			scorerCfg.Ingest.Topic, scorerCfg.Ingest.Brokers[0])
	}
	for _, svc := range byKind["Service"] {
		p := at(svc, "spec", "ports", 0)
		if str(at(p, "targetPort")) != "http" && str(at(p, "targetPort")) != port {
			t.Errorf("Service %v: targetPort %v, want http (%s)", at(svc, "metadata", "name"), at(p, "targetPort"), port)
		}
	}
	if path, err := exec.LookPath("kubectl"); err == nil { // builds the kustomization as kubectl apply -k would
		if out, err := exec.Command(path, "kustomize", "k8s").CombinedOutput(); err != nil {
			t.Errorf("kubectl kustomize k8s: %v\n%s", err, out)
		}
	}
}

// TestComposeFile: the services are there, every file they mount exists, outlierd reaches the
// broker's in-network listener and serves on the config's port, the topic service creates the
// config's input topic, Prometheus scrapes outlierd and loads the rules where they are
// mounted, Grafana finds the dashboard and the data source the dashboard expects.
func TestComposeFile(t *testing.T) {
	port := listenPort(t)
	docs := yamlDocs(t, "compose.yaml")
	if len(docs) != 1 {
		t.Fatalf("compose.yaml: %d documents", len(docs))
	}
	services, _ := docs[0]["services"].(map[string]any)
	for _, s := range []string{"kafka", "topics", "outlierd", "prometheus", "grafana"} {
		if services[s] == nil {
			t.Errorf("compose.yaml: no service %s", s)
		}
	}
	mounts := map[string]string{} // container path -> host path (deploy-relative)
	for name, s := range services {
		vols, _ := at(s, "volumes").([]any)
		for _, v := range vols {
			parts := strings.Split(str(v), ":")
			if len(parts) < 2 || !strings.HasPrefix(parts[0], ".") {
				continue // a named volume
			}
			if _, err := os.Stat(parts[0]); err != nil {
				t.Errorf("service %s mounts %s, which does not exist", name, parts[0])
			}
			mounts[parts[1]] = parts[0]
		}
	}
	if ctx, df := str(at(services, "outlierd", "build", "context")), str(at(services, "outlierd", "build", "dockerfile")); ctx != ".." {
		t.Errorf("outlierd builds from %q, want the repository root", ctx)
	} else if _, err := os.Stat(filepath.Join(ctx, df)); err != nil {
		t.Errorf("outlierd's dockerfile: %v", err)
	}
	cfg := shippedConfig(t, map[string]string{"KAFKA_BROKERS": str(at(services, "outlierd", "environment", "KAFKA_BROKERS")),
		"OUTLIERD_INPUT_TOPIC": str(at(services, "outlierd", "environment", "OUTLIERD_INPUT_TOPIC"))})
	if adv := str(at(services, "kafka", "environment", "KAFKA_ADVERTISED_LISTENERS")); !strings.Contains(adv, "PLAINTEXT://"+cfg.Ingest.Brokers[0]) {
		t.Errorf("outlierd's brokers %v are not the broker's advertised in-network listener (%s)", cfg.Ingest.Brokers, adv)
	}
	if ports := str(at(services, "outlierd", "ports", 0)); !strings.HasSuffix(ports, ":"+port) {
		t.Errorf("outlierd publishes %q, want the container's %s", ports, port)
	}
	if mounts["/etc/outlierd/outlierd.yaml"] != "./config/outlierd.yaml" {
		t.Errorf("outlierd's config is not config/outlierd.yaml: mounts %v", mounts)
	}
	topicArgs := at(services, "topics", "entrypoint").([]any)
	if i := slices.IndexFunc(topicArgs, func(a any) bool { return str(a) == "--topic" }); i < 0 || str(topicArgs[i+1]) != cfg.Ingest.Topic {
		t.Errorf("the topics service creates %v, want the input topic %q", topicArgs, cfg.Ingest.Topic)
	}

	prom := yamlDocs(t, "prometheus/prometheus.yml")[0]
	if got := str(at(prom, "scrape_configs", 0, "static_configs", 0, "targets", 0)); got != "outlierd:"+port {
		t.Errorf("Prometheus scrapes %q, want outlierd:%s", got, port)
	}
	if got := str(at(prom, "scrape_configs", 0, "job_name")); got != "outlierd" {
		t.Errorf("scrape job %q: the alerts' up{job=\"outlierd\"} names outlierd", got)
	}
	if rf := str(at(prom, "rule_files", 0)); mounts[rf] != "./prometheus/alerts.yml" {
		t.Errorf("Prometheus loads rules from %q, where alerts.yml is not mounted (%v)", rf, mounts)
	}
	ds := yamlDocs(t, "grafana/provisioning/datasources/prometheus.yaml")[0]
	if uid := str(at(ds, "datasources", 0, "uid")); uid != "prometheus" {
		t.Errorf("the data source's uid %q is not the dashboard's default (prometheus)", uid)
	}
	if url := str(at(ds, "datasources", 0, "url")); !strings.Contains(url, "prometheus:") {
		t.Errorf("the data source points at %q", url)
	}
	prov := yamlDocs(t, "grafana/provisioning/dashboards/outlierd.yaml")[0]
	dir := str(at(prov, "providers", 0, "options", "path"))
	if mounts[dir+"/outlierd.json"] != "./grafana/outlierd.json" {
		t.Errorf("Grafana reads dashboards from %q, where outlierd.json is not mounted", dir)
	}
}

// TestDockerfiles: what the images copy exists, they expose the config's port and run the
// config they copy; the CUDA image ships both binaries (the CPU build hands over to the other).
func TestDockerfiles(t *testing.T) {
	port := listenPort(t)
	for _, name := range []string{"Dockerfile", "Dockerfile.cuda"} {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		// Instructions, with continuation lines joined.
		var lines []string
		sc := bufio.NewScanner(f)
		cur := ""
		for sc.Scan() {
			l := strings.TrimSpace(sc.Text())
			if strings.HasPrefix(l, "#") {
				continue
			}
			if strings.HasSuffix(l, "\\") {
				cur += strings.TrimSuffix(l, "\\") + " "
				continue
			}
			if cur+l != "" {
				lines = append(lines, cur+l)
			}
			cur = ""
		}
		f.Close()
		var exposed, cmd string
		configCopied := false
		builds := 0
		for _, l := range lines {
			fields := strings.Fields(l)
			switch strings.ToUpper(fields[0]) {
			case "COPY":
				args := fields[1:]
				if strings.HasPrefix(args[0], "--from") {
					continue
				}
				for _, src := range args[:len(args)-1] {
					if _, err := os.Stat(filepath.Join("..", src)); err != nil && src != "." {
						t.Errorf("%s copies %s, which is not in the repository", name, src)
					}
				}
				if args[0] == "deploy/config/outlierd.yaml" && args[len(args)-1] == "/etc/outlierd/outlierd.yaml" {
					configCopied = true
				}
			case "EXPOSE":
				exposed = fields[1]
			case "CMD":
				cmd = l
			case "RUN":
				builds += strings.Count(l, "go build")
			}
		}
		if exposed != port {
			t.Errorf("%s exposes %q, want %s (http.listen)", name, exposed, port)
		}
		if !configCopied || !strings.Contains(cmd, `"--config", "/etc/outlierd/outlierd.yaml"`) {
			t.Errorf("%s: the CMD (%s) does not run the config it copies", name, cmd)
		}
		if want := map[string]int{"Dockerfile": 1, "Dockerfile.cuda": 2}[name]; builds != want {
			t.Errorf("%s builds %d binaries, want %d", name, builds, want)
		}
	}
	ignore, err := os.ReadFile("../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(ignore), "\n") {
		if l = strings.TrimSpace(l); l == "deploy" || l == "go.mod" || l == "*" {
			t.Errorf(".dockerignore leaves out %s, which the images need", l)
		}
	}
}

// TestSystemdUnit: the unit runs the shipped config's path, and systemd-analyze verify accepts
// it (where systemd is installed; the binary is this test's, as verify needs one that exists).
func TestSystemdUnit(t *testing.T) {
	data, err := os.ReadFile("systemd/outlierd.service")
	if err != nil {
		t.Fatal(err)
	}
	unit := string(data)
	const exec0 = "ExecStart=/usr/local/bin/outlierd run --config /etc/outlierd/outlierd.yaml\n"
	if !strings.Contains(unit, exec0) {
		t.Fatalf("the unit does not contain %q", exec0)
	}
	verify, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed: the unit was not verified")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "outlierd.service")
	if err := os.WriteFile(path, []byte(strings.Replace(unit, "ExecStart=/usr/local/bin/outlierd", "ExecStart="+self, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(verify, "verify", path).CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// TestSystemdUnitKeepsSnapshots: the unit said "A model snapshot directory (detect.state_dir:
// /var/lib/outlierd) survives restarts" and made /var/lib/outlierd (StateDirectory=outlierd, the
// one place its read-only system lets the service write), but the shipped config set no
// detect.state_dir: a restart held input for the first model again, as without snapshots. The
// unit now gives the directory to the config (OUTLIERD_STATE_DIR), which snapshots there; the
// other deployments, without the variable, keep none as before.
func TestSystemdUnitKeepsSnapshots(t *testing.T) {
	data, err := os.ReadFile("systemd/outlierd.service")
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	stateDirectory := ""
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "Environment="); ok {
			if k, val, ok := strings.Cut(v, "="); ok {
				env[k] = val
			}
		}
		if v, ok := strings.CutPrefix(l, "StateDirectory="); ok {
			stateDirectory = "/var/lib/" + v
		}
	}
	if stateDirectory == "" || env["OUTLIERD_STATE_DIR"] != stateDirectory {
		t.Fatalf("the unit's StateDirectory is %q and its OUTLIERD_STATE_DIR %q: want the state directory given to the config", stateDirectory, env["OUTLIERD_STATE_DIR"])
	}
	if c := shippedConfig(t, nil); c.Detect.StateDir != "" { // (first: shippedConfig's Setenv lasts the test)
		t.Errorf("without OUTLIERD_STATE_DIR: detect.state_dir %q, want none", c.Detect.StateDir)
	}
	dir := t.TempDir() // (stands in for /var/lib/outlierd, which loading the config would create)
	if c := shippedConfig(t, map[string]string{"OUTLIERD_STATE_DIR": dir}); c.Detect.StateDir != dir {
		t.Errorf("the shipped config with OUTLIERD_STATE_DIR=%s: detect.state_dir %q", dir, c.Detect.StateDir)
	}
}
