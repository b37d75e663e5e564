package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gopkg.in/yaml.v3"

	"github.com/outlierd/outlierd/internal/accel"
	"github.com/outlierd/outlierd/pipeline"
	"github.com/outlierd/outlierd/pipeline/metrics"
)

// The manual an operator copies from: its YAML examples, its command lines, its metric names
// and its config keys are checked against the code by the tests below (no broker, seconds).
var manualFiles = []string{"README.md", "docs/OPERATIONS.md", "docs/DESIGN.md", "docs/bench/README.md",
	"configs/pipeline.yaml", "configs/demo.yaml", "configs/skab.yaml"}

// manualText returns each manual file's text by its path from the repository root.
func manualText(t *testing.T) map[string]string {
	t.Helper()
	texts := map[string]string{}
	for _, f := range manualFiles {
		data, err := os.ReadFile(filepath.Join("..", "..", f))
		if err != nil {
			t.Fatal(err)
		}
		texts[f] = string(data)
	}
	return texts
}

// lineOf is the 1-based line of byte offset off in text.
func lineOf(text string, off int) int { return strings.Count(text[:off], "\n") + 1 }

// yamlExample is one fenced ```yaml block of a Markdown file.
type yamlExample struct {
	where string // file:line of the fence
	text  string // the block, its fence's indentation removed
}

// numbered is the example with the manual's line numbers, for a failure's message.
func (ex yamlExample) numbered() string {
	file, l, _ := strings.Cut(ex.where, ":")
	first := 0
	fmt.Sscan(l, &first)
	var b strings.Builder
	for i, line := range strings.Split(strings.TrimSuffix(ex.text, "\n"), "\n") {
		fmt.Fprintf(&b, "%s:%d: %s\n", file, first+1+i, line)
	}
	return b.String()
}

var yamlFence = regexp.MustCompile("(?m)^( *)```yaml\n")

// yamlExamples returns the fenced YAML blocks of a Markdown text.
func yamlExamples(t *testing.T, name, md string) []yamlExample {
	t.Helper()
	var out []yamlExample
	for _, m := range yamlFence.FindAllStringSubmatchIndex(md, -1) {
		indent := md[m[2]:m[3]]
		body := md[m[1]:]
		end := strings.Index(body, "\n"+indent+"```")
		if end < 0 {
			t.Fatalf("%s:%d: a ```yaml block without its closing fence", name, lineOf(md, m[0]))
		}
		var lines []string
		for _, l := range strings.Split(body[:end+1], "\n") {
			lines = append(lines, strings.TrimPrefix(l, indent))
		}
		out = append(out, yamlExample{where: fmt.Sprintf("%s:%d", name, lineOf(md, m[0])), text: strings.Join(lines, "\n")})
	}
	return out
}

// A YAML example of the manual is a piece of a pipeline config: its top-level keys are sections
// of the config (ingest, detect, ...), or its first line is a comment "# under SECTION:" (the
// example shows a part of that section, ingest's derive for one), and it is linted merged into
// configs/pipeline.yaml. A block that is not a config at all says so on its first line, "# not
// a config: why", and is skipped. Any other block fails the test: no example is left out
// silently.
var (
	underMarker     = regexp.MustCompile(`^# under ([a-z_.]+):`)
	notConfigMarker = regexp.MustCompile(`^# not a config: \S`)
)

// mergeYAML lays the mapping over onto base (a mapping too), key by key: a mapping into a
// mapping recursively, anything else replacing base's value or added after base's keys.
func mergeYAML(base, over *yaml.Node) error {
	if base.Kind != yaml.MappingNode || over.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: not a mapping", over.Line)
	}
	for i := 0; i < len(over.Content); i += 2 {
		k, v := over.Content[i], over.Content[i+1]
		found := false
		for j := 0; j < len(base.Content); j += 2 {
			if base.Content[j].Value != k.Value {
				continue
			}
			found = true
			if bv := base.Content[j+1]; bv.Kind == yaml.MappingNode && v.Kind == yaml.MappingNode {
				if err := mergeYAML(bv, v); err != nil {
					return err
				}
			} else {
				base.Content[j+1] = v
			}
		}
		if !found {
			base.Content = append(base.Content, k, v)
		}
	}
	return nil
}

// configSections are the top-level keys of a pipeline config (pipeline.Config's yaml tags).
func configSections() map[string]bool {
	s := map[string]bool{}
	ty := reflect.TypeOf(pipeline.Config{})
	for i := 0; i < ty.NumField(); i++ {
		if tag := strings.Split(ty.Field(i).Tag.Get("yaml"), ",")[0]; tag != "" && tag != "-" {
			s[tag] = true
		}
	}
	return s
}

// lintMerged lays the example over configs/pipeline.yaml (under the dotted section path when
// given) and runs `outlierd lint` on the result; it returns lint's stderr and whether it passed.
func lintMerged(t *testing.T, ex yamlExample, under string) (string, bool) {
	t.Helper()
	ref, err := os.ReadFile(filepath.Join("..", "..", "configs", "pipeline.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var base, frag yaml.Node
	if err := yaml.Unmarshal(ref, &base); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(ex.text), &frag); err != nil {
		return fmt.Sprintf("%s: not YAML: %v", ex.where, err), false
	}
	over := frag.Content[0]
	if under != "" {
		parts := strings.Split(under, ".")
		for i := len(parts) - 1; i >= 0; i-- {
			over = &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{{Kind: yaml.ScalarNode, Value: parts[i]}, over}}
		}
	}
	if err := mergeYAML(base.Content[0], over); err != nil {
		return fmt.Sprintf("%s: %v", ex.where, err), false
	}
	merged, err := yaml.Marshal(&base)
	if err != nil {
		t.Fatal(err)
	}
	path := writeFile(t, "example.yaml", string(merged))
	out, errs, code := outlierd(t, "lint", "--config", path)
	if code != 0 || !strings.HasSuffix(out, ": ok\n") {
		return fmt.Sprintf("%s: lint of the example merged into configs/pipeline.yaml (lines of the merged file): exit %d\n%s%s%s",
			ex.where, code, out, errs, ex.numbered()), false
	}
	if errs != "" {
		return fmt.Sprintf("%s: lint warns of the example merged into configs/pipeline.yaml (lines of the merged file):\n%s%s",
			ex.where, errs, ex.numbered()), false
	}
	return "", true
}

// checkYAMLExample lints one example by its marks (above): what is wrong with it, "" when
// nothing, and whether it was linted (false for one marked "# not a config").
func checkYAMLExample(t *testing.T, ex yamlExample) (string, bool) {
	t.Helper()
	first, _, _ := strings.Cut(ex.text, "\n")
	var under string
	switch {
	case notConfigMarker.MatchString(first):
		return "", false
	case underMarker.MatchString(first):
		under = underMarker.FindStringSubmatch(first)[1]
	default:
		var top map[string]any
		if err := yaml.Unmarshal([]byte(ex.text), &top); err != nil {
			return fmt.Sprintf("%s: not YAML: %v", ex.where, err), true
		}
		sections := configSections()
		var bad []string
		for k := range top {
			if !sections[k] {
				bad = append(bad, strconv.Quote(k))
			}
		}
		if len(bad) > 0 {
			slices.Sort(bad)
			return fmt.Sprintf("%s: a YAML example whose key %s is not a config section: mark its first line "+
				"\"# under SECTION:\" (merged there and linted) or \"# not a config: why\" (skipped)", ex.where, strings.Join(bad, ", ")), true
		}
	}
	problem, _ := lintMerged(t, ex, under)
	return problem, true
}

// TestManualYAMLExampleMarks: the marks do what the comment above says, and a rotten example
// fails: a synthetic manual's blocks, fenced at the margin and indented in a list.
func TestManualYAMLExampleMarks(t *testing.T) {
	md := "x\n```yaml\ndetect:\n  min_score: 4\n```\n" + // a config: lints
		"- y\n  ```yaml\n  # under ingest:\n  derive:\n    features:\n      - {kind: diff, of: temp}\n  ```\n" + // merged under ingest
		"```yaml\n# not a config: a Kubernetes object\nkind: Pod\n```\n" + // skipped
		"```yaml\nkeys:\n  window: 100\n```\n" + // a fragment without its mark
		"```yaml\ndetect:\n  keys:\n    windw: 100\n```\n" + // a key rotted
		"```yaml\n# under detect:\nflag_clear: 7\n```\n" // a value the config refuses
	exs := yamlExamples(t, "M.md", md)
	if len(exs) != 6 {
		t.Fatalf("%d examples found, want 6", len(exs))
	}
	for i, want := range []struct {
		problem string
		linted  bool
	}{{"", true}, {"", true}, {"", false}, {`M.md:17: a YAML example whose key "keys" is not a config section`, true},
		{"unknown key `windw` in detect.keys", true}, {"detect.flag_clear", true}} {
		problem, linted := checkYAMLExample(t, exs[i])
		if linted != want.linted || (want.problem == "") != (problem == "") || !strings.Contains(problem, want.problem) {
			t.Errorf("example %d (%s): %q, linted %v; want %q, linted %v", i, exs[i].where, problem, linted, want.problem, want.linted)
		}
	}
}

// TestManualYAMLExamplesLint: every fenced YAML example of the manual passes `outlierd lint`
// merged into the reference config, and so does configs/pipeline.yaml with its commented-out
// examples (key_field, event_time_field, derive) uncommented.
func TestManualYAMLExamplesLint(t *testing.T) {
	texts := manualText(t)
	linted := 0
	for _, name := range manualFiles {
		if !strings.HasSuffix(name, ".md") {
			continue
		}
		for _, ex := range yamlExamples(t, name, texts[name]) {
			problem, checked := checkYAMLExample(t, ex)
			if problem != "" {
				t.Error(problem)
			}
			if checked {
				linted++
			}
		}
	}
	if linted < 3 {
		t.Errorf("%d YAML examples linted: the extractor lost the manual's examples", linted)
	}

	// The reference's commented-out examples, uncommented: a line "  # key: ..." of these keys
	// and the derive block's lines below it ("#   ..."), less the comments among them.
	ref := texts["configs/pipeline.yaml"]
	var lines []string
	inDerive := false
	uncommented := 0
	for _, l := range strings.Split(ref, "\n") {
		body, isComment := strings.CutPrefix(l, "  # ")
		switch {
		case isComment && (strings.HasPrefix(body, "key_field:") || strings.HasPrefix(body, "event_time_field:")):
			lines = append(lines, "  "+body)
			uncommented++
			continue
		case isComment && strings.HasPrefix(body, "derive:"):
			lines = append(lines, "  "+body)
			inDerive = true
			uncommented++
			continue
		case inDerive && isComment && strings.HasPrefix(body, "  "):
			if s := strings.TrimSpace(body); !strings.HasPrefix(s, "#") {
				lines = append(lines, "  "+body)
				uncommented++
			}
			continue
		}
		inDerive = false
		lines = append(lines, l)
	}
	if uncommented < 8 {
		t.Fatalf("configs/pipeline.yaml: %d commented-out example lines found; the test looks for key_field, event_time_field and the derive block", uncommented)
	}
	path := writeFile(t, "pipeline.yaml", strings.Join(lines, "\n"))
	if out, errs, code := outlierd(t, "lint", "--config", path); code != 0 || errs != "" {
		t.Errorf("configs/pipeline.yaml with its commented-out examples uncommented: exit %d\n%s%s", code, out, errs)
	}
}

// manualCommand is one `outlierd CMD ...` the manual shows.
type manualCommand struct {
	where string
	cmd   string
	args  []string
}

var (
	// inlineCode is a Markdown code span (it may wrap onto the next line).
	inlineCode = regexp.MustCompile("`([^`\n]+(?:\n[^`\n]+)?)`")
	// commandStart is an invocation: the binary's name (bin/outlierd, outlierd-cuda, a path)
	// and a word.
	commandStart = regexp.MustCompile(`(?:^|[\s/(])outlierd(?:-cuda)? +([a-z]+)\b`)
	// indentedShell is a line of an indented code block that runs outlierd (docs/bench's
	// blocks are indented, not fenced): four spaces or more, variables, nice, the binary.
	indentedShell = regexp.MustCompile(`^ {4,}(?:[A-Z_]+=\S+ +)*(?:nice(?: -n \d+)? +)?(?:\S*/)?outlierd(?:-cuda)? +[a-z]`)
)

// commandsIn returns the invocations of outlierd's commands in one piece of text (a code span, a
// shell line or a comment's text) that starts at line line of file name.
func commandsIn(name string, line int, text string, cmds map[string]command, bare bool) []manualCommand {
	var out []manualCommand
	add := func(cmd, rest string, line int) {
		rest, _, _ = strings.Cut(rest, "|") // a pipe ends the command
		rest, _, _ = strings.Cut(rest, ">")
		rest, _, _ = strings.Cut(rest, ";")
		rest, _, _ = strings.Cut(rest, "&&")
		rest, _, _ = strings.Cut(rest, "`")
		out = append(out, manualCommand{where: fmt.Sprintf("%s:%d", name, line), cmd: cmd, args: strings.Fields(rest)})
	}
	locs := commandStart.FindAllStringSubmatchIndex(text, -1)
	for i, m := range locs {
		cmd := text[m[2]:m[3]]
		if _, ok := cmds[cmd]; !ok && cmd != "help" {
			continue
		}
		end := len(text)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		add(cmd, text[m[1]:end], line+strings.Count(text[:m[0]], "\n"))
	}
	// A code span that starts with a command's name and a flag (`gen --kind sensors ...`,
	// `replay --window 5000`): the prose's shorthand for outlierd CMD.
	if bare && len(locs) == 0 {
		if f := strings.Fields(text); len(f) > 1 && strings.HasPrefix(f[1], "-") {
			if _, ok := cmds[f[0]]; ok {
				add(f[0], strings.Join(f[1:], " "), line)
			}
		}
	}
	return out
}

// manualCommands returns every invocation of outlierd the manual shows: in its shell blocks
// (a line and its continuations, less the comment; the comment's own invocations too), in
// its code spans, and in the configs' comments.
func manualCommands(t *testing.T, texts map[string]string, cmds map[string]command) []manualCommand {
	var out []manualCommand
	for _, name := range manualFiles {
		text := texts[name]
		if !strings.HasSuffix(name, ".md") {
			for i, l := range strings.Split(text, "\n") {
				if _, c, ok := strings.Cut(l, "#"); ok {
					for _, span := range inlineCode.FindAllStringSubmatch(c, -1) {
						out = append(out, commandsIn(name, i+1, span[1], cmds, true)...)
					}
					if !strings.Contains(c, "`") {
						out = append(out, commandsIn(name, i+1, c, cmds, false)...)
					}
				}
			}
			continue
		}
		inFence, shell := false, false
		lines := strings.Split(text, "\n")
		var prose strings.Builder
		proseLine := 1
		flushProse := func() {
			p := prose.String()
			for _, m := range inlineCode.FindAllStringSubmatchIndex(p, -1) {
				out = append(out, commandsIn(name, proseLine+strings.Count(p[:m[2]], "\n"), p[m[2]:m[3]], cmds, true)...)
			}
			prose.Reset()
		}
		for i := 0; i < len(lines); i++ {
			l := lines[i]
			if s := strings.TrimSpace(l); strings.HasPrefix(s, "```") {
				if !inFence {
					flushProse()
					lang := strings.TrimPrefix(s, "```")
					shell = lang == "sh" || lang == "bash" || lang == "console" || lang == ""
				}
				inFence = !inFence
				proseLine = i + 2
				continue
			}
			if !inFence && !indentedShell.MatchString(l) {
				prose.WriteString(l + "\n")
				continue
			}
			if !inFence {
				prose.WriteString("\n") // (the prose's spans keep their line numbers)
			} else if !shell {
				continue
			}
			start := i
			for strings.HasSuffix(l, "\\") && i+1 < len(lines) {
				i++
				l = strings.TrimSuffix(l, "\\") + " " + lines[i]
			}
			code, comment, _ := strings.Cut(l, "#")
			out = append(out, commandsIn(name, start+1, code, cmds, false)...)
			for _, span := range inlineCode.FindAllStringSubmatch(comment, -1) {
				out = append(out, commandsIn(name, start+1, span[1], cmds, true)...)
			}
		}
		flushProse()
	}
	return out
}

// commandFlags returns the flags of a command as its help lists them.
func commandFlags(t *testing.T, cmd string) map[string]bool {
	t.Helper()
	out, errs, code := outlierd(t, "help", cmd)
	if code != 0 {
		t.Fatalf("help %s: exit %d: %s", cmd, code, errs)
	}
	flags := map[string]bool{}
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 && strings.HasPrefix(l, "  -") {
			flags[strings.TrimLeft(f[0], "-")] = true
		}
	}
	return flags
}

// TestManualCommandFlags: every flag of every `outlierd CMD --flag` the manual shows (shell
// blocks, code spans, the configs' comments; a span `gen --kind ...` is outlierd gen's) is a
// flag of that command.
func TestManualCommandFlags(t *testing.T) {
	found := manualCommands(t, manualText(t), commands(accel.Options{}))
	problems, checked := checkCommandFlags(t, found)
	for _, p := range problems {
		t.Error(p)
	}
	if checked < 100 {
		t.Errorf("%d flags checked in %d invocations: the extractor lost the manual's command lines", checked, len(found))
	}
}

// checkCommandFlags returns what is wrong with the invocations (a command or a flag that does
// not exist) and how many flags it checked.
func checkCommandFlags(t *testing.T, found []manualCommand) (problems []string, checked int) {
	t.Helper()
	cmds := commands(accel.Options{})
	flags := map[string]map[string]bool{}
	flagName := regexp.MustCompile(`^[a-z][a-z0-9-]*$`)
	for _, c := range found {
		if c.cmd == "help" {
			if len(c.args) > 0 && c.args[0] != "CMD" {
				if _, ok := cmds[c.args[0]]; !ok {
					problems = append(problems, fmt.Sprintf("%s: outlierd help %s: no such command", c.where, c.args[0]))
				}
			}
			continue
		}
		if flags[c.cmd] == nil {
			flags[c.cmd] = commandFlags(t, c.cmd)
		}
		for _, a := range c.args {
			if !strings.HasPrefix(a, "-") || a == "-" || a == "--" || a == "-h" || a == "--help" {
				continue
			}
			name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
			name = strings.TrimRight(name, ".,;:)'\"")
			if !flagName.MatchString(name) {
				continue
			}
			checked++
			if !flags[c.cmd][name] {
				problems = append(problems, fmt.Sprintf("%s: outlierd %s %s: %s has no flag --%s", c.where, c.cmd, strings.Join(c.args, " "), c.cmd, name))
			}
		}
	}
	return problems, checked
}

// TestManualCommandFlagsFindsRot: in a synthetic manual, a flag that does not exist is found in
// each place a command line stands: a shell block (a continued line, a comment's code span), a
// code span of the prose (wrapped onto the next line, or the short `gen --...`), an indented
// code block, a config's comment; a flag that exists is not reported.
func TestManualCommandFlagsFindsRot(t *testing.T) {
	texts := map[string]string{}
	for _, f := range manualFiles {
		texts[f] = ""
	}
	texts["README.md"] = "```sh\nbin/outlierd gen --kind g2d \\\n    --rowz 10 > x.csv   # then `outlierd topn --nn 3`\n```\n" +
		"Run `outlierd replay --input F\n--windoww 5` or `gen --kind sensors --spikes 3`; `outlierd help nosuch`.\n\n" +
		"    nice -n 5 bin/outlierd proclus --input x.csv --kk 3   # an indented block\nthen `outlierd tail --follow`.\n"
	texts["configs/pipeline.yaml"] = "#   outlierd lint --config x.yaml --strict\n"
	problems, checked := checkCommandFlags(t, manualCommands(t, texts, commands(accel.Options{})))
	want := []string{"README.md:2: outlierd gen", "has no flag --rowz", "README.md:2: outlierd topn --nn 3: topn has no flag --nn",
		"README.md:5: outlierd replay", "has no flag --windoww", "README.md:6: outlierd gen --kind sensors --spikes 3: gen has no flag --spikes",
		"README.md:6: outlierd help nosuch: no such command", "README.md:8: outlierd proclus --input x.csv --kk 3: proclus has no flag --kk",
		"README.md:9: outlierd tail --follow: tail has no flag --follow", "configs/pipeline.yaml:1: outlierd lint --config x.yaml --strict: lint has no flag --strict"}
	all := strings.Join(problems, "\n")
	for _, w := range want {
		if !strings.Contains(all, w) {
			t.Errorf("not reported: %q; reported:\n%s", w, all)
		}
	}
	if len(problems) != 8 || checked != 12 {
		t.Errorf("%d problems in %d flags checked, want 8 in 12 (--kind twice, --input twice and --config exist):\n%s", len(problems), checked, all)
	}
}

// TestManualMetricsRegistered: every outlierd_* series the manual names is registered by the
// pipeline's metrics (a histogram's _bucket, _sum and _count by its name). A name is registered
// when the registry refuses another collector of that name: a vector without children yet (no
// GPU kernel has run) is found too, which a scrape would miss.
func TestManualMetricsRegistered(t *testing.T) {
	texts := manualText(t)
	reg := metrics.New().Registry()
	registered := func(name string) bool {
		g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: "probe"})
		err := reg.Register(g)
		if err == nil {
			reg.Unregister(g)
			return false
		}
		var are prometheus.AlreadyRegisteredError
		return errors.As(err, &are) || strings.Contains(err.Error(), "previously registered")
	}
	name := regexp.MustCompile(`\boutlierd_[a-z0-9_]*[a-z0-9]`)
	seen := map[string]bool{}
	for _, f := range manualFiles {
		text := texts[f]
		for _, m := range name.FindAllStringIndex(text, -1) {
			n := text[m[0]:m[1]]
			if seen[f+n] {
				continue
			}
			seen[f+n] = true
			ok := registered(n)
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if base, cut := strings.CutSuffix(n, suffix); cut && registered(base) {
					ok = true
				}
			}
			if !ok {
				t.Errorf("%s:%d: %s is not a registered series", f, lineOf(text, m[0]), n)
			}
		}
	}
	if len(seen) < 30 {
		t.Errorf("%d series names found in the manual: the extractor lost them", len(seen))
	}
	if registered("outlierd_no_such_series") {
		t.Error("the registry probe finds a series that does not exist")
	}
}

// configKeys returns every dotted key of a pipeline config (its yaml tags), a map's or a
// list's own key included (its entries are data, not keys).
func configKeys() map[string]bool {
	keys := map[string]bool{}
	var walk func(prefix string, ty reflect.Type)
	walk = func(prefix string, ty reflect.Type) {
		for ty.Kind() == reflect.Pointer {
			ty = ty.Elem()
		}
		if ty.Kind() != reflect.Struct {
			return
		}
		for i := 0; i < ty.NumField(); i++ {
			f := ty.Field(i)
			tag, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if tag == "-" || !f.IsExported() {
				continue
			}
			if slices.Contains(strings.Split(opts, ","), "inline") {
				walk(prefix, f.Type)
				continue
			}
			if tag == "" {
				tag = strings.ToLower(f.Name)
			}
			keys[prefix+tag] = true
			ft := f.Type
			for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice {
				ft = ft.Elem()
			}
			walk(prefix+tag+".", ft)
		}
	}
	walk("", reflect.TypeOf(pipeline.Config{}))
	return keys
}

// TestManualConfigKeysExist: every config key the manual names in a code span by its full path
// (`detect.keys.min_records`, `sink.emit: all`), or from a section's section on
// (`keys.min_records`, `derive.max_keys`), is a key of the pipeline config.
func TestManualConfigKeysExist(t *testing.T) {
	texts := manualText(t)
	keys := configKeys()
	sections := configSections()
	path := regexp.MustCompile(`^([a-z_]+(?:\.[a-z_0-9]+)+)(?::|$| )`)
	// The sections' own sections (detect.keys, ingest.derive, ...), which the prose names
	// without their section.
	subsections := map[string]bool{}
	for k := range keys {
		if parts := strings.Split(k, "."); len(parts) == 3 {
			subsections[parts[1]] = true
		}
	}
	checked := 0
	for _, f := range manualFiles {
		if !strings.HasSuffix(f, ".md") {
			continue
		}
		text := texts[f]
		for _, m := range inlineCode.FindAllStringSubmatchIndex(text, -1) {
			span := text[m[2]:m[3]]
			p := path.FindStringSubmatch(span)
			if p == nil {
				continue
			}
			top, _, _ := strings.Cut(p[1], ".")
			if regexp.MustCompile(`\.(go|md|yaml|csv|json)$`).MatchString(p[1]) {
				continue // a file's name (run.go), not a key
			}
			switch {
			case sections[top]:
				checked++
				if !keys[p[1]] {
					t.Errorf("%s:%d: `%s`: the config has no key %s", f, lineOf(text, m[0]), span, p[1])
				}
			case subsections[top]: // keys.min_records: detect.keys.min_records, said short
				checked++
				found := false
				for k := range keys {
					found = found || strings.HasSuffix(k, "."+p[1])
				}
				if !found {
					t.Errorf("%s:%d: `%s`: the config has no key ending in %s", f, lineOf(text, m[0]), span, p[1])
				}
			}
		}
	}
	if checked < 50 {
		t.Errorf("%d config keys checked: the extractor lost the manual's keys", checked)
	}
}

// referenceDefaults returns configs/pipeline.yaml's scalar values by dotted key: every default,
// as configs' TestReferenceListsEveryDefault holds it to detect.Default() and the other
// sections' defaults.
func referenceDefaults(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "configs", "pipeline.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	var walk func(prefix string, n *yaml.Node)
	walk = func(prefix string, n *yaml.Node) {
		if n.Kind == yaml.AliasNode {
			n = n.Alias
		}
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i < len(n.Content); i += 2 {
				walk(prefix+n.Content[i].Value+".", n.Content[i+1])
			}
		case yaml.ScalarNode:
			out[strings.TrimSuffix(prefix, ".")] = n.Value
		}
	}
	walk("", root.Content[0])
	return out
}

// sameDefault says whether the manual's value (a number, with a duration's unit or not)
// is the reference's.
func sameDefault(said, unit, ref string) bool {
	said = strings.ReplaceAll(said, ",", "")
	if unit != "" {
		d, err1 := time.ParseDuration(said + unit)
		r, err2 := time.ParseDuration(ref)
		return err1 == nil && err2 == nil && d == r
	}
	a, err1 := strconv.ParseFloat(said, 64)
	b, err2 := strconv.ParseFloat(ref, 64)
	if r, err := time.ParseDuration(ref); err2 != nil && err == nil {
		return err1 == nil && a == 0 && r == 0 // a duration's 0 needs no unit
	}
	return err1 == nil && err2 == nil && a == b
}

// TestManualDefaults: where the manual gives a key's default as a number beside it
// (`detect.min_score` (5), `http.lag_interval` (5 s), `detect.alert_cooldown`, default 0), it is
// the reference's (configs/pipeline.yaml, every default). A key said short (`keys.window`)
// counts where it ends exactly one key. A number in parentheses right after a key is read as its
// default: a value of an example's own is written otherwise ("`detect.window` of 5,000").
func TestManualDefaults(t *testing.T) {
	texts := manualText(t)
	defaults := referenceDefaults(t)
	said := regexp.MustCompile("`([a-z_]+(?:\\.[a-z_0-9]+)*)`(?:,\\s+default\\s+|\\s+\\((?:default:?\\s+)?)" +
		`([0-9][0-9,]*(?:\.[0-9]+)?)(?:\s?(ms|s|min|h)\b)?[);,:]`)
	checked := 0
	for _, f := range manualFiles {
		if !strings.HasSuffix(f, ".md") {
			continue
		}
		text := texts[f]
		for _, m := range said.FindAllStringSubmatchIndex(text, -1) {
			key, value, unit := text[m[2]:m[3]], text[m[4]:m[5]], ""
			if m[6] >= 0 {
				unit = strings.Replace(text[m[6]:m[7]], "min", "m", 1)
			}
			var found []string
			for k := range defaults {
				if k == key || strings.HasSuffix(k, "."+key) {
					found = append(found, k)
				}
			}
			if len(found) != 1 {
				continue // not a key, or a short name of several (min_records)
			}
			checked++
			if ref := defaults[found[0]]; !sameDefault(value, unit, ref) {
				t.Errorf("%s:%d: %q gives %s's default as %s%s; configs/pipeline.yaml has %s", f, lineOf(text, m[0]),
					text[m[0]:m[1]], found[0], value, unit, ref)
			}
		}
	}
	if checked < 15 {
		t.Errorf("%d defaults checked: the extractor lost the manual's defaults", checked)
	}
}
