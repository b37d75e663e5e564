package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outlierd/outlierd/internal/accel"
	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/pipeline"
	"github.com/outlierd/outlierd/stages/ingest"
)

// ingestJSON is an ingest section with the JSON format (produce's target).
func ingestJSON() ingest.Config {
	c := ingest.Default()
	c.Topic, c.Features = "in", []string{"t"}
	return c
}

// kafkaConfig writes a pipeline config for br with topics of their own (prefix), ingest.format
// format, and a model topic; it returns the file and the topic names (input, output, dead
// letters, models).
func kafkaConfig(t *testing.T, br testsupport.Broker, format string) (string, [4]string) {
	t.Helper()
	var n [4]string
	for i, what := range []string{"in", "out", "dlq", "models"} {
		n[i] = testsupport.UniqueName(what)
	}
	extra := ""
	if format == "csv" {
		extra = "  csv_header: [sensor, temp, pressure]\n"
	}
	cfg := fmt.Sprintf("ingest:\n  brokers: [%q]\n  topic: %s\n  format: %s\n  features: [temp, pressure]\n%s"+
		"detect:\n  window: 500\nsink:\n  topic: %s\n  dead_letter_topic: %s\nrun:\n  role: builder\n  model_topic: %s\nhttp:\n  listen: \"\"\n",
		strings.Join(br.Addrs, ","), n[0], format, extra, n[1], n[2], n[3])
	return writeFile(t, "pipeline.yaml", cfg), n
}

// TestTopicsCreate: every topic of the config is created (the input with --partitions, the
// outputs with as many, the model topic with one partition, compacted), and a second run
// reports them as existing, without an error.
func TestTopicsCreate(t *testing.T) {
	testsupport.ForEachBroker(t, func(t *testing.T, br testsupport.Broker) {
		path, names := kafkaConfig(t, br, "json")
		for run, created := range []bool{true, false} {
			out, errs, code := outlierd(t, "topics", "create", "--config", path, "--partitions", "2", "--json")
			if code != 0 {
				t.Fatalf("run %d: exit %d: %s", run, code, errs)
			}
			var res topicsOutput
			if err := json.Unmarshal([]byte(out), &res); err != nil {
				t.Fatalf("run %d: %v: %s", run, err, out)
			}
			if len(res.Topics) != 4 {
				t.Fatalf("run %d: %d topics: %+v", run, len(res.Topics), res.Topics)
			}
			want := map[string]int{names[0]: 2, names[1]: 2, names[2]: 2, names[3]: 1}
			for _, tp := range res.Topics {
				if tp.Created != created || want[tp.Topic] != tp.Partitions {
					t.Errorf("run %d: %+v, want created %v with %d partitions", run, tp, created, want[tp.Topic])
				}
			}
		}
		// The model topic is compacted (what the scorers' catch-up read relies on).
		conn, err := kafka.Dial("tcp", br.Addrs[0])
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		cl := &kafka.Client{Addr: kafka.TCP(br.Addrs...)}
		res, err := cl.DescribeConfigs(t.Context(), &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{
			{ResourceType: kafka.ResourceTypeTopic, ResourceName: names[3], ConfigNames: []string{"cleanup.policy"}}}})
		if err != nil || len(res.Resources) != 1 || len(res.Resources[0].ConfigEntries) != 1 || res.Resources[0].ConfigEntries[0].ConfigValue != "compact" {
			t.Errorf("model topic config: %+v %v", res, err)
		}
		if _, errs, code := outlierd(t, "topics", "delete", "--config", path); code != 2 || !strings.Contains(errs, "the one subcommand is create") {
			t.Errorf("topics delete: exit %d %q", code, errs)
		}
	})
}

// TestTopicsCreatePartitionsBound: --partitions past sink.create_partitions' bound (1,000,000)
// is refused before any broker is asked. The request's count is an int32: 9223372036854775807
// went as -1, the broker's default, and "created ... (9223372036854775807 partitions)" was
// printed over topics of 3; 4294967297 would have asked for 1.
func TestTopicsCreatePartitionsBound(t *testing.T) {
	cfg := writeFile(t, "p.yaml", "ingest:\n  brokers: [\"127.0.0.1:1\"]\n  topic: in\n  features: [t]\nsink:\n  topic: out\n  dead_letter_topic: dlq\n")
	for _, n := range []string{"1000001", "4294967297", "9223372036854775807"} {
		_, errs, code := outlierd(t, "topics", "create", "--config", cfg, "--partitions", n, "--timeout", "1s")
		if code != 2 || !strings.Contains(errs, "--partitions must be in [1, 1000000]") {
			t.Errorf("--partitions %s: exit %d, stderr %q: want exit 2 and the bound", n, code, errs)
		}
	}
}

// TestProduceRateBounds: --rate takes N or N/s in (0, 1e9]; a rate past the bound said it was
// "not a positive number", which 1e10 is.
func TestProduceRateBounds(t *testing.T) {
	for _, c := range []struct {
		in   string
		want float64
		err  string
	}{
		{"500", 500, ""}, {"500/s", 500, ""}, {"1e9", 1e9, ""}, {"", 0, ""},
		{"1e10", 0, "at most 1e+09"}, {"0", 0, "positive"}, {"-5/s", 0, "positive"}, {"NaN", 0, "positive"}, {"abc", 0, "not a number"},
	} {
		got, err := parseRate(c.in)
		if c.err == "" && (err != nil || got != c.want) || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("parseRate(%q) = %v, %v: want %v, an error with %q", c.in, got, err, c.want, c.err)
		}
	}
}

// TestProduceStopsAtABadLineSayingWhatWent: a line that cannot be read stops produce with
// what went: every record before it, none after (a file is sent in chunks, and before, the
// records of the chunk being filled were dropped unsaid while earlier chunks had gone: after a
// fix and a second run, those went twice, and the error said nothing of them).
func TestProduceStopsAtABadLineSayingWhatWent(t *testing.T) {
	testsupport.ForEachBroker(t, func(t *testing.T, br testsupport.Broker) {
		path, names := kafkaConfig(t, br, "json")
		createTopics(t, path, 1)
		line := `{"temp": 20.5, "pressure": 101.2}` + "\n"
		data := writeFile(t, "s.jsonl", strings.Repeat(line, 3)+"not json\n"+strings.Repeat(line, 2))
		_, errs, code := outlierd(t, "produce", "--config", path, "--input", data)
		want := fmt.Sprintf("s.jsonl:4: not a JSON object on one line: invalid character 'o' in literal null (expecting 'u') (the 3 records before it went to topic %s, none after it)", names[0])
		if code != 1 || !strings.Contains(errs, want) {
			t.Errorf("exit %d, stderr %q: want exit 1 and %q", code, errs, want)
		}
		if recs := testsupport.ReadTopic(t, br, names[0], 1); len(recs) != 3 {
			t.Errorf("%d messages in the topic, want the 3 before the bad line", len(recs))
		}
	})
}

// TestProduce: a CSV file goes to the input topic one message per row, in the topic's format
// (JSON objects with numbers as numbers and an empty field left out; CSV lines without the
// header), keyed by --key-column, and --rate paces it.
func TestProduce(t *testing.T) {
	testsupport.ForEachBroker(t, func(t *testing.T, br testsupport.Broker) {
		var b strings.Builder
		b.WriteString("sensor,temp,pressure\n")
		const rows = 300
		for i := range rows {
			temp := fmt.Sprintf("%d.5", 20+i%7)
			if i == 7 {
				temp = "" // a missing value: left out of the JSON object
			}
			fmt.Fprintf(&b, "pump-%d,%s,101.%d\n", i%3, temp, i%10)
		}
		data := writeFile(t, "sensors.csv", b.String())
		for _, format := range []string{"json", "csv"} {
			path, names := kafkaConfig(t, br, format)
			createTopics(t, path, 3)
			start := time.Now()
			out, errs, code := outlierd(t, "produce", "--config", path, "--input", data, "--key-column", "sensor", "--rate", "1500/s", "--json")
			took := time.Since(start)
			if code != 0 {
				t.Fatalf("%s: exit %d: %s", format, code, errs)
			}
			var res produceOutput
			if err := json.Unmarshal([]byte(out), &res); err != nil || res.Records != rows || res.MessageFormat != format || res.Format != "csv" {
				t.Fatalf("%s: %s (%v)", format, out, err)
			}
			// 300 records at 1500/s: at least 0.2 s less one write's worth (1/20 s), so the
			// pacing is measured, not the broker.
			if took < 150*time.Millisecond {
				t.Errorf("%s: 300 records at --rate 1500/s took %v", format, took)
			}
			recs := testsupport.ReadTopic(t, br, names[0], 3)
			if len(recs) != rows {
				t.Fatalf("%s: %d messages in the topic, want %d", format, len(recs), rows)
			}
			byKey := map[string][]*kgo.Record{}
			for _, r := range recs {
				byKey[string(r.Key)] = append(byKey[string(r.Key)], r)
			}
			for k, rs := range byKey {
				if !strings.HasPrefix(k, "pump-") || len(rs) != rows/3 || slices.ContainsFunc(rs, func(r *kgo.Record) bool { return r.Partition != rs[0].Partition }) {
					t.Errorf("%s: key %q: %d messages, not all on one partition", format, k, len(rs))
				}
			}
			var first, seventh string
			for _, r := range recs {
				if r.Partition == byKey["pump-0"][0].Partition && strings.Contains(string(r.Value), "101.0") && first == "" {
					first = string(r.Value)
				}
				if strings.Contains(string(r.Value), "101.7") && strings.Contains(string(r.Value), "pump-1") && seventh == "" {
					seventh = string(r.Value)
				}
			}
			switch format {
			case "json":
				if first != `{"sensor":"pump-0","temp":20.5,"pressure":101.0}` || seventh != `{"sensor":"pump-1","pressure":101.7}` {
					t.Errorf("json messages %q, %q", first, seventh)
				}
			case "csv":
				if first != "pump-0,20.5,101.0" || seventh != "pump-1,,101.7" {
					t.Errorf("csv messages %q, %q", first, seventh)
				}
			}
		}
		// A header the topic's csv_header does not have is refused, naming both.
		path, _ := kafkaConfig(t, br, "csv")
		bad := writeFile(t, "other.csv", "id,temp,pressure\nx,1,2\n")
		if _, errs, code := outlierd(t, "produce", "--config", path, "--input", bad); code != 1 || !strings.Contains(errs, `differs from ingest.csv_header, 3 columns ["sensor" "temp" "pressure"]`) {
			t.Errorf("mismatched header: exit %d %q", code, errs)
		}
	})
}

// TestTail: tail prints each outlier once (copies share the id), with key, score and
// explanation, reads "Infinity" scores, leaves inliers and unscored records out unless --all,
// and --json prints the outputs themselves.
func TestTail(t *testing.T) {
	testsupport.ForEachBroker(t, func(t *testing.T, br testsupport.Broker) {
		path, names := kafkaConfig(t, br, "json")
		createTopics(t, path, 2)
		output := func(id, key, scores, why string) *kgo.Record {
			k := "null"
			if key != "" {
				k = fmt.Sprintf(`%q,"key_encoding":"utf8"`, key)
			}
			v := fmt.Sprintf(`{"id":%q,"topic":"in","partition":0,"offset":1,"key":%s,"timestamp":null,"payload":{},"payload_encoding":"json","scores":%s,"explanation":%q,"subspace":[],"model_version":1}`,
				id, k, scores, why)
			return &kgo.Record{Topic: names[1], Partition: 0, Value: []byte(v)}
		}
		const out = `{"outlier":true,"density_outlier":false,"eta_probability":1,"distance_outlier":true,"weight":%s,"w_star":2,"score":%s}`
		const in = `{"outlier":false,"density_outlier":false,"eta_probability":1,"distance_outlier":false,"weight":1,"w_star":2,"score":0.5}`
		testsupport.Produce(t, br,
			output("in/0/1", "pump-1", fmt.Sprintf(out, "9.5", "4.25"), "outlier score 4.25 > threshold 3"),
			output("in/0/2", "pump-2", in, "inlier"),
			output("in/0/1", "pump-1", fmt.Sprintf(out, "9.5", "4.25"), "outlier score 4.25 > threshold 3"), // a copy
			output("in/0/3", "", fmt.Sprintf(out, `"Infinity"`, `"Infinity"`), "far out"),
			output("in/0/4", "pump-4", "null", "not scored: no model yet"),
		)
		stdout, errs, code := outlierd(t, "tail", "--config", path, "--from-beginning", "--idle-exit", "2s")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		want := "in/0/1  key=pump-1  score=4.25  outlier score 4.25 > threshold 3\nin/0/3  key=-  score=Infinity  far out\n"
		if stdout != want {
			t.Errorf("tail printed\n%s\nwant\n%s", stdout, want)
		}
		if !strings.Contains(errs, "2 printed, 1 copy skipped") {
			t.Errorf("stderr %q", errs)
		}
		stdout, _, _ = outlierd(t, "tail", "--config", path, "--from-beginning", "--all", "--max", "4")
		if n := strings.Count(stdout, "\n"); n != 4 || !strings.Contains(stdout, "key=pump-2  score=0.50 (inlier)  inlier") ||
			!strings.Contains(stdout, "key=pump-4  score=unscored  not scored") {
			t.Errorf("tail --all printed\n%s", stdout)
		}
		stdout, _, _ = outlierd(t, "tail", "--config", path, "--from-beginning", "--json", "--max", "2")
		lines := strings.Split(strings.TrimSpace(stdout), "\n")
		var o map[string]any
		if len(lines) != 2 || json.Unmarshal([]byte(lines[1]), &o) != nil || o["id"] != "in/0/3" {
			t.Errorf("tail --json printed\n%s", stdout)
		}
	})
}

// TestReadmeQuickstartParses: every outlierd command of the README's quickstart (and of its
// other shell blocks) is a command this binary has, with flags it accepts: each is run with
// its arguments up to the flag parse only (a stand-in config and input where they name files
// a clone has not made yet).
func TestReadmeQuickstartParses(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	cmds := readmeCommands(string(readme))
	if len(cmds) < 10 || !slices.ContainsFunc(cmds, func(c []string) bool { return c[0] == "tail" }) {
		t.Fatalf("found %d outlierd commands in README.md (want the quickstart's): %v", len(cmds), cmds)
	}
	table := commands(accel.Options{})
	stopAfterParse = true
	defer func() { stopAfterParse = false }()
	// The check can fail: a flag tail does not have is refused at the parse.
	bad := readmeCommands("```sh\nX=1 bin/outlierd tail --config c.yaml --follow 2> e &  # x\n```\n")
	if len(bad) != 1 || strings.Join(bad[0], " ") != "tail --config c.yaml --follow" {
		t.Fatalf("readmeCommands: %q", bad)
	}
	if err := table["tail"].run(bad[0][1:], io.Discard, io.Discard); errors.Is(err, errParsedOnly) {
		t.Fatal("tail --follow parsed")
	}
	for _, c := range cmds {
		if c[0] == "help" { // runWith's: help CMD is CMD -h
			if _, ok := table[c[1]]; !ok || len(c) != 2 {
				t.Errorf("README: outlierd %s: no such command", strings.Join(c, " "))
			}
			continue
		}
		cmd, ok := table[c[0]]
		if !ok {
			t.Errorf("README: outlierd %s: no such command", strings.Join(c, " "))
			continue
		}
		var errb strings.Builder
		if err := cmd.run(c[1:], io.Discard, &errb); !errors.Is(err, errParsedOnly) {
			t.Errorf("README: outlierd %s: %v %s", strings.Join(c, " "), err, errb.String())
		}
	}
}

// readmeCommands returns the argument lists of every outlierd invocation in the shell blocks
// of a Markdown text (continuation lines joined, comments and redirections left out).
func readmeCommands(md string) [][]string {
	var out [][]string
	inBlock := false
	var script []string
	for _, l := range strings.Split(md, "\n") {
		switch {
		case strings.HasPrefix(l, "```sh"):
			inBlock = true
		case strings.HasPrefix(l, "```"):
			inBlock = false
		case inBlock:
			script = append(script, l)
		}
	}
	joined := strings.ReplaceAll(strings.Join(script, "\n"), "\\\n", " ")
	for _, line := range strings.Split(joined, "\n") {
		toks := shellWords(line)
		for i := 0; i < len(toks); i++ {
			if !strings.HasSuffix(toks[i], "outlierd") || i+1 >= len(toks) {
				continue
			}
			if i > 0 && !isCommandStart(toks[i-1]) {
				continue // an argument that names the binary (a path in a comment-free prose line)
			}
			var args []string
			for _, a := range toks[i+1:] {
				if strings.ContainsAny(a, "<>|&;") {
					break
				}
				args = append(args, a)
			}
			if len(args) > 0 {
				out = append(out, args)
			}
		}
	}
	return out
}

// isCommandStart: the token before a command name (a shell operator or an environment
// assignment).
func isCommandStart(prev string) bool {
	return strings.ContainsAny(prev, "|&;(") || strings.Contains(prev, "=")
}

// shellWords splits a shell line into words: whitespace-separated, "..." and '...' kept whole
// (quotes removed), a # at the start of a word ending the line.
func shellWords(line string) []string {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	for _, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '"' || r == '\'':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case r == '#' && !inWord:
			return words
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// TestProduceRecordReader: JSON lines and logfmt lines go as they are, keyed by a field (a JSON
// string or number's text, a logfmt value bare or quoted); a line that is not a JSON object,
// or lacks the key, is refused naming the file and line.
func TestProduceRecordReader(t *testing.T) {
	read := func(format, text, key string) ([][2]string, error) {
		r, err := newRecordReader(strings.NewReader(text), "f", format, ingestJSON(), ',', key)
		if err != nil {
			return nil, err
		}
		var out [][2]string
		for {
			k, v, err := r.next()
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			if err != nil {
				return out, err
			}
			out = append(out, [2]string{string(k), string(v)})
		}
	}
	got, err := read("json", "{\"id\":\"a\",\"t\":1}\n\n{\"id\":7,\"t\":2}\n", "id")
	if err != nil || len(got) != 2 || got[0] != [2]string{"a", `{"id":"a","t":1}`} || got[1][0] != "7" {
		t.Errorf("json lines: %q %v", got, err)
	}
	if _, err := read("json", "{\"id\":\"a\"}\n[1,2]\n", "id"); err == nil || !strings.HasPrefix(err.Error(), "f:2: not a JSON object") {
		t.Errorf("a JSON array: %v", err)
	}
	if _, err := read("json", "{\"t\":1}\n", "id"); err == nil || err.Error() != `f:1: no field "id" (--key-column)` {
		t.Errorf("no key field: %v", err)
	}
	got, err = read("logfmt", "dev=\"pump 1\" temp=3\ntemp=4 dev=p2\n", "dev")
	if err != nil || len(got) != 2 || got[0] != [2]string{"pump 1", `dev="pump 1" temp=3`} || got[1][0] != "p2" {
		t.Errorf("logfmt lines: %q %v", got, err)
	}
	got, err = read("csv", "dev,temp\n\"a b\",1\n", "")
	if err != nil || len(got) != 1 || got[0] != [2]string{"", `{"dev":"a b","temp":1}`} {
		t.Errorf("csv to json: %q %v", got, err)
	}
}

// TestProduceTailSecured: topics create, produce and tail reach a SASL_SSL listener through the
// config's security sections (pipeline.TopicRef: the pipeline's one way to make a client for a
// topic), as the pipeline does; a plaintext client there fails the TLS handshake. Skips without
// the secured listeners of `KAFKA_SECURITY=1 .ci/kafka.sh start`.
func TestProduceTailSecured(t *testing.T) {
	bootstrap := os.Getenv("KAFKA_SASL_SSL_BOOTSTRAP")
	ca, user := os.Getenv("KAFKA_TLS_CA"), os.Getenv("KAFKA_SASL_USERNAME")
	if bootstrap == "" || ca == "" || user == "" || os.Getenv("KAFKA_SASL_PASSWORD") == "" {
		t.Skip("no secured broker: KAFKA_SECURITY=1 .ci/kafka.sh start, and export what it prints")
	}
	in, out := testsupport.UniqueName("sec-in"), testsupport.UniqueName("sec-out")
	sec := fmt.Sprintf("  security:\n    tls: {enabled: true, ca_file: %q}\n"+
		"    sasl: {mechanism: scram-sha-512, username: %q, password: \"${KAFKA_SASL_PASSWORD}\"}\n", ca, user)
	path := writeFile(t, "pipeline.yaml", fmt.Sprintf("ingest:\n  brokers: [%q]\n  topic: %s\n  features: [temp]\n%s"+
		"sink:\n  topic: %s\n  dead_letter_topic: %s-dlq\n%shttp:\n  listen: \"\"\n", bootstrap, in, sec, out, out, sec))
	createTopics(t, path, 2)
	data := writeFile(t, "r.csv", "temp\n1.5\n2.5\n3.5\n")
	res, errs, code := outlierd(t, "produce", "--config", path, "--input", data, "--json")
	var po produceOutput
	if code != 0 || json.Unmarshal([]byte(res), &po) != nil || po.Records != 3 {
		t.Fatalf("produce: exit %d: %s %s", code, res, errs)
	}
	// The output topic is empty: tail must connect (metadata, then a reader per partition) and
	// stop idle, without an error.
	if res, errs, code := outlierd(t, "tail", "--config", path, "--from-beginning", "--idle-exit", "1s"); code != 0 || res != "" ||
		!strings.Contains(errs, "0 printed") {
		t.Fatalf("tail: exit %d: %q %s", code, res, errs)
	}
}

// TestProduceWarnsOfFieldsTheHeaderLacks: a CSV file without a column the pipeline needs (a
// feature with no fill, key_field, event_time_field) makes every message it sends a dead
// letter ("field "temp": missing"); produce sent them without a word (gen --kind sensors --keys
// names its columns value1...), and the pipeline's log said nothing either. It says so on stderr
// before it sends, naming the fields, and still sends (a dead-letter test may mean it).
func TestProduceWarnsOfFieldsTheHeaderLacks(t *testing.T) {
	br := testsupport.KfakeBroker(t)
	path, _ := kafkaConfig(t, br, "json")
	if _, errs, code := outlierd(t, "topics", "create", "--config", path); code != 0 {
		t.Fatalf("topics create: %s", errs)
	}
	bad := writeFile(t, "fleet.csv", "key,value1,label\npump-1,3.5,0\npump-2,4.5,0\n")
	out, errs, code := outlierd(t, "produce", "--config", path, "--input", bad)
	if code != 0 || !strings.Contains(out, "2 records") {
		t.Fatalf("exit %d: %s %s", code, out, errs)
	}
	if !strings.Contains(errs, `no column "temp", "pressure"`) || !strings.Contains(errs, "dead-letter") {
		t.Errorf("stderr %q: want a warning naming temp and pressure and the dead letters", errs)
	}
	good := writeFile(t, "sensors.csv", "sensor,temp,pressure\npump-1,3.5,1\n")
	if _, errs, code := outlierd(t, "produce", "--config", path, "--input", good); code != 0 || errs != "" {
		t.Errorf("every column there: exit %d, stderr %q (want none)", code, errs)
	}
	// A feature with a fill value under missing: fill is not needed; the key field is.
	cfg, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	filled := strings.Replace(string(cfg), "  features: [temp, pressure]\n",
		"  features: [temp, pressure]\n  missing: fill\n  fill: {temp: 20}\n  key_field: sensor\n", 1)
	path2 := writeFile(t, "filled.yaml", filled)
	if _, errs, code := outlierd(t, "produce", "--config", path2, "--input", bad); code != 0 || !strings.Contains(errs, `no column "pressure", "sensor"`) {
		t.Errorf("fill and key_field: exit %d, stderr %q (want pressure and sensor named, not temp)", code, errs)
	}
}

// TestProduceDottedPaths: a CSV column named by a dotted path the config reads (ingest.features'
// sensor.temp) goes as the nested object that path reaches, {"sensor":{"temp":3}}, and the
// pipeline's decoder reads it; written flat ({"sensor.temp":3}, as before) every record was a
// dead letter ("missing") and produce said nothing. A column that would be both a value and such
// an object is refused. JSON lines with the dotted key flat are sent as they are, warned of.
func TestProduceDottedPaths(t *testing.T) {
	br := testsupport.KfakeBroker(t)
	path, names := kafkaConfig(t, br, "json")
	cfg, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	path = writeFile(t, "dotted.yaml", strings.Replace(string(cfg), "features: [temp, pressure]", "features: [sensor.temp, pressure]", 1))
	createTopics(t, path, 1)
	data := writeFile(t, "s.csv", "sensor.temp,pressure,site.name\n3,1,a\n,2,b\n")
	if _, errs, code := outlierd(t, "produce", "--config", path, "--input", data); code != 0 || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	want := []string{`{"sensor":{"temp":3},"pressure":1,"site.name":"a"}`, `{"pressure":2,"site.name":"b"}`}
	ic := ingestJSON()
	ic.Features = []string{"sensor.temp", "pressure"}
	checked, err := ic.Check()
	if err != nil {
		t.Fatal(err)
	}
	dec, d := checked.NewDecoder(), ic.NewDecoded()
	for i, r := range testsupport.ReadTopic(t, br, names[0], 1) {
		if i >= len(want) || string(r.Value) != want[i] {
			t.Errorf("message %d: %s, want %s", i, r.Value, want[min(i, len(want)-1)])
			continue
		}
		if i == 0 { // the pipeline's decoder reads it
			if err := dec.Decode(r.Value, d); err != nil || d.Values[0] != 3 {
				t.Errorf("decoding %s: %v, values %v", r.Value, err, d.Values)
			}
		}
	}
	clash := writeFile(t, "c.csv", "sensor,sensor.temp,pressure\nx,3,1\n")
	if _, errs, code := outlierd(t, "produce", "--config", path, "--input", clash); code != 1 || !strings.Contains(errs, `column "sensor.temp" and the path sensor`) {
		t.Errorf("sensor and sensor.temp: exit %d, stderr %q", code, errs)
	}
	flat := writeFile(t, "f.jsonl", `{"sensor.temp": 3, "pressure": 1}`+"\n")
	if _, errs, code := outlierd(t, "produce", "--config", path, "--input", flat); code != 0 || !strings.Contains(errs, `"sensor.temp" as one key`) {
		t.Errorf("JSON lines with the key flat: exit %d, stderr %q: want the warning", code, errs)
	}
}

// TestProduceWarnsOfUncertaintyFieldsTheHeaderLacks: a feature's uncertainty field (fields, or
// the suffix's) without ingest.uncertainty.default is needed in every record as the feature is
// (a record without it is a dead letter, "missing"), and a CSV header without it is warned of;
// with a default it is not needed. The warning left them out: every record went to the
// dead-letter topic without a word.
func TestProduceWarnsOfUncertaintyFieldsTheHeaderLacks(t *testing.T) {
	zero := 0.0
	header := []string{"temp", "pressure", "pressure_err"}
	for _, c := range []struct {
		u    *ingest.Uncertainty
		want []string
	}{
		{&ingest.Uncertainty{Suffix: "_sd"}, []string{"temp_sd", "pressure_sd"}},
		{&ingest.Uncertainty{Suffix: "_sd", Fields: map[string]string{"pressure": "pressure_err"}}, []string{"temp_sd"}},
		{&ingest.Uncertainty{Fields: map[string]string{"temp": "temp_err", "pressure": "pressure_err"}}, []string{"temp_err"}},
		{&ingest.Uncertainty{Suffix: "_sd", Default: &zero}, nil},
		{nil, nil},
	} {
		in := ingestJSON()
		in.Features, in.Uncertainty = []string{"temp", "pressure"}, c.u
		if got := requiredLacking(in, func(name string) bool { return slices.Contains(header, name) }); !slices.Equal(got, c.want) {
			t.Errorf("uncertainty %+v: lacks %q, want %q", c.u, got, c.want)
		}
	}
}

// TestProduceLacksInDecoderOrder: the warning's example of a dead letter's reason, "(field X:
// missing)" for the first field the header lacks, is the reason the decoder gives: it checks
// each feature and then its uncertainty field, where the list put the features first (a
// header with temp alone: "pressure", the dead letters `field "temp_sd": missing`).
func TestProduceLacksInDecoderOrder(t *testing.T) {
	in := ingestJSON()
	in.Features, in.Uncertainty = []string{"temp", "pressure"}, &ingest.Uncertainty{Suffix: "_sd"}
	k, err := in.Check()
	if err != nil {
		t.Fatal(err)
	}
	dec := k.NewDecoder()
	lacks := requiredLacking(in, func(name string) bool { return name == "temp" })
	err = dec.Decode([]byte(`{"temp": 1}`), in.NewDecoded())
	if len(lacks) == 0 || err == nil || err.Error() != fmt.Sprintf("field %q: missing", lacks[0]) {
		t.Errorf("lacks %q, the decoder: %v", lacks, err)
	}
}

// TestProduceHeaderMismatchShowsColumns: a CSV file read with another delimiter than its own
// (--delimiter ';' on a comma file) has one column holding the whole header line, and the
// refusal printed it joined with commas: "the header ts,temp differs from ingest.csv_header
// ts,temp", two equal-looking lists. It shows the columns as read, and how many.
func TestProduceHeaderMismatchShowsColumns(t *testing.T) {
	in := ingestJSON()
	in.Format, in.CSVHeader, in.Features = ingest.FormatCSV, []string{"ts", "temp"}, []string{"temp"}
	_, err := newRecordReader(strings.NewReader("ts,temp\n1,2\n"), "f.csv", "csv", in, ';', "")
	if err == nil || !strings.Contains(err.Error(), `1 column ["ts,temp"]`) || !strings.Contains(err.Error(), `2 columns ["ts" "temp"]`) {
		t.Fatalf("header read with ';': %v", err)
	}
}

// TestProduceWarnsOfFieldsRecordsLack: as a CSV header (above), JSON lines and logfmt lines
// whose first records all lack a field every record needs were sent without a word, every one
// a dead letter. The first records are looked at as they are read (the file once), and the
// messages are the same: a malformed line among them still stops produce after the records
// before it, naming its line.
func TestProduceWarnsOfFieldsRecordsLack(t *testing.T) {
	in := ingestJSON()
	in.Features, in.KeyField = []string{"sensor.temp", "pressure"}, "dev"
	read := func(format, text string, in ingest.Config) ([]string, []string, error) {
		r, err := newRecordReader(strings.NewReader(text), "f", format, in, ',', "")
		if err != nil {
			t.Fatal(err)
		}
		var vals []string
		for {
			_, v, err := r.next()
			if errors.Is(err, io.EOF) {
				return vals, r.lacks, nil
			}
			if err != nil {
				return vals, r.lacks, err
			}
			vals = append(vals, string(v))
		}
	}
	var lines []string
	for i := range 150 {
		lines = append(lines, fmt.Sprintf(`{"sensor":{"temp":%d},"dev":"p%d"}`, i, i%3))
	}
	text := strings.Join(lines, "\n") + "\n"
	vals, lacks, err := read("json", text, in)
	if err != nil || !slices.Equal(vals, lines) || !slices.Equal(lacks, []string{"pressure"}) {
		t.Errorf("json: %d records (want the 150 lines as they are), lacks %q, %v", len(vals), lacks, err)
	}
	// A field one of the first records has is not warned of.
	lines[70] = `{"sensor":{"temp":1},"pressure":2,"dev":"p"}`
	if _, lacks, _ := read("json", strings.Join(lines, "\n"), in); len(lacks) != 0 {
		t.Errorf("pressure in record 71: lacks %q", lacks)
	}
	// A malformed line among the first records: the records before it, then its error.
	if vals, _, err := read("json", lines[0]+"\n"+lines[1]+"\n[1]\n"+lines[2]+"\n", in); len(vals) != 2 || err == nil || !strings.HasPrefix(err.Error(), "f:3:") {
		t.Errorf("malformed third line: %d records, %v", len(vals), err)
	}
	in.Format = ingest.FormatLogfmt
	in.Features = []string{"temp", "pressure"}
	vals, lacks, err = read("logfmt", "dev=\"p 1\" temp=3\n\ntemp=4 dev=p2\n", in)
	if err != nil || len(vals) != 2 || !slices.Equal(lacks, []string{"pressure"}) {
		t.Errorf("logfmt: %q, lacks %q, %v", vals, lacks, err)
	}

	// End to end: the warning names the field and the dead-letter topic, and every record goes.
	br := testsupport.KfakeBroker(t)
	for _, format := range []string{"json", "logfmt"} {
		path, topics := kafkaConfig(t, br, format)
		if _, errs, code := outlierd(t, "topics", "create", "--config", path); code != 0 {
			t.Fatalf("topics create: %s", errs)
		}
		line := `{"temp":1.5,"sensor":"a"}`
		if format == "logfmt" {
			line = "temp=1.5 sensor=a"
		}
		data := writeFile(t, "r."+format, line+"\n"+line+"\n")
		out, errs, code := outlierd(t, "produce", "--config", path, "--input", data)
		if code != 0 || !strings.Contains(out, "2 records") {
			t.Fatalf("%s: exit %d: %s %s", format, code, out, errs)
		}
		if !strings.Contains(errs, `"pressure"`) || !strings.Contains(errs, topics[2]) || strings.Contains(errs, `"temp"`) {
			t.Errorf("%s: stderr %q: want a warning naming pressure (not temp) and the dead-letter topic %s", format, errs, topics[2])
		}
		good := writeFile(t, "g."+format, strings.Replace(line, "1.5", "1.5 pressure=2", 1)+"\n")
		if format == "json" {
			good = writeFile(t, "g.json", `{"temp":1.5,"pressure":2}`+"\n")
		}
		if _, errs, code := outlierd(t, "produce", "--config", path, "--input", good); code != 0 || errs != "" {
			t.Errorf("%s, every field there: exit %d, stderr %q (want none)", format, code, errs)
		}
	}
}

// TestTopicLine: one partition is "(1 partition)"; it printed "(1 partitions)" (a model topic,
// a one-partition input).
func TestTopicLine(t *testing.T) {
	for _, c := range []struct {
		r    pipeline.TopicResult
		want string
	}{
		{pipeline.TopicResult{Key: "run.model_topic", Topic: "models", Partitions: 1, Created: true}, "created  models                     run.model_topic (1 partition)"},
		{pipeline.TopicResult{Key: "ingest.topic", Topic: "in", Partitions: 3}, "exists   in                         ingest.topic (3 partitions)"},
	} {
		if got := topicLine(c.r); got != c.want {
			t.Errorf("topicLine(%+v) = %q, want %q", c.r, got, c.want)
		}
	}
}
