package kafkasec_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/outlierd/outlierd/configs"
	"github.com/outlierd/outlierd/internal/core/config"
	"github.com/outlierd/outlierd/internal/core/kafkasec"
	"github.com/outlierd/outlierd/pipeline"
	"github.com/outlierd/outlierd/stages/ingest"
	"github.com/outlierd/outlierd/stages/sink"
)

func TestValidate(t *testing.T) {
	t.Parallel()
	p := newTestPKI(t)
	notPEM := p.file(t, "not.pem", "this is not PEM\n")
	pw := kafkasec.NewSecret("pw")
	tlsOn := kafkasec.TLS{Enabled: true, CAFile: p.caFile}
	cases := []struct {
		name string
		cfg  kafkasec.Config
		want []string // one substring per expected problem; none: valid
	}{
		{name: "default", cfg: kafkasec.Default()},
		{name: "tls system roots", cfg: kafkasec.Config{TLS: kafkasec.TLS{Enabled: true}}},
		{name: "tls custom CA", cfg: kafkasec.Config{TLS: tlsOn}},
		{name: "tls client certificate", cfg: kafkasec.Config{TLS: kafkasec.TLS{Enabled: true, CAFile: p.caFile, CertFile: p.clientCert, KeyFile: p.clientKey, ServerName: "broker.test"}}},
		{name: "tls insecure", cfg: kafkasec.Config{TLS: kafkasec.TLS{Enabled: true, InsecureSkipVerify: true}}},
		{name: "tls keys while off", cfg: kafkasec.Config{TLS: kafkasec.TLS{CAFile: p.caFile, InsecureSkipVerify: true, ServerName: "x"}},
			want: []string{"tls.enabled: false, but tls.ca_file, tls.server_name, tls.insecure_skip_verify set"}},
		{name: "cert without key", cfg: kafkasec.Config{TLS: kafkasec.TLS{Enabled: true, CertFile: p.clientCert}},
			want: []string{"tls.key_file: required with tls.cert_file: set both"}},
		{name: "key without cert", cfg: kafkasec.Config{TLS: kafkasec.TLS{Enabled: true, KeyFile: p.clientKey}},
			want: []string{"tls.cert_file: required with tls.key_file: set both"}},
		{name: "missing CA file", cfg: kafkasec.Config{TLS: kafkasec.TLS{Enabled: true, CAFile: p.dir + "/nope.pem"}},
			want: []string{"tls.ca_file: open " + p.dir + "/nope.pem"}},
		{name: "CA file without PEM", cfg: kafkasec.Config{TLS: kafkasec.TLS{Enabled: true, CAFile: notPEM}},
			want: []string{"holds no PEM certificate"}},
		{name: "key of another certificate", cfg: kafkasec.Config{TLS: kafkasec.TLS{Enabled: true, CertFile: p.clientCert, KeyFile: p.serverKey}},
			want: []string{"private key does not match public key"}},
		{name: "insecure with CA", cfg: kafkasec.Config{TLS: kafkasec.TLS{Enabled: true, CAFile: p.caFile, InsecureSkipVerify: true}},
			want: []string{"tls.insecure_skip_verify: "}},
		{name: "plain over TLS", cfg: kafkasec.Config{TLS: tlsOn, SASL: kafkasec.SASL{Mechanism: "plain", Username: "u", Password: pw}}},
		{name: "plain without TLS", cfg: kafkasec.Config{SASL: kafkasec.SASL{Mechanism: "plain", Username: "u", Password: pw}},
			want: []string{"sasl.mechanism: plain sends the password"}},
		{name: "scram without TLS", cfg: kafkasec.Config{SASL: kafkasec.SASL{Mechanism: "scram-sha-256", Username: "u", Password: pw}}},
		{name: "mechanism case-insensitive", cfg: kafkasec.Config{TLS: tlsOn, SASL: kafkasec.SASL{Mechanism: "SCRAM-SHA-512", Username: "u", Password: pw}}},
		{name: "unknown mechanism", cfg: kafkasec.Config{SASL: kafkasec.SASL{Mechanism: "gssapi", Username: "u", Password: pw}},
			want: []string{`sasl.mechanism: "gssapi", want plain`}},
		{name: "mechanism without credentials", cfg: kafkasec.Config{SASL: kafkasec.SASL{Mechanism: "scram-sha-256"}},
			want: []string{"sasl.username: required with sasl.mechanism scram-sha-256", "sasl.password: required"}},
		{name: "credentials without mechanism", cfg: kafkasec.Config{SASL: kafkasec.SASL{Username: "u"}},
			want: []string{"sasl.mechanism: empty (no authentication), but sasl.username or sasl.password set"}},
		{name: "SASLprep refuses the password", cfg: kafkasec.Config{SASL: kafkasec.SASL{Mechanism: "scram-sha-256", Username: "u", Password: kafkasec.NewSecret("bell\a")}},
			want: []string{"sasl.password: not valid for SCRAM"}},
		{name: "SASLprep refuses the username", cfg: kafkasec.Config{SASL: kafkasec.SASL{Mechanism: "scram-sha-512", Username: "u\x00", Password: pw}},
			want: []string{"sasl.username: not valid for SCRAM"}},
		{name: "every problem at once", cfg: kafkasec.Config{
			TLS:  kafkasec.TLS{Enabled: true, CAFile: notPEM, CertFile: p.clientCert},
			SASL: kafkasec.SASL{Mechanism: "plain"}},
			want: []string{"holds no PEM", "set both", "sasl.username: required", "sasl.password: required"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			probs := tc.cfg.Problems("x.security.")
			if len(probs) != len(tc.want) {
				t.Fatalf("got %d problems %q, want %d matching %q", len(probs), probs, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(probs[i].Error(), "x.security.") || !strings.Contains(probs[i].Error(), w) {
					t.Errorf("problem %d = %q, want the prefix x.security. and %q", i, probs[i], w)
				}
			}
			err := tc.cfg.Validate()
			if (err == nil) != (len(tc.want) == 0) {
				t.Fatalf("Validate() = %v, want an error: %v", err, len(tc.want) > 0)
			}
			// The builders validate first and refuse what Validate refuses.
			d, derr := tc.cfg.Dialer()
			tr, terr := tc.cfg.Transport()
			if err != nil {
				if derr == nil || terr == nil || d != nil || tr != nil {
					t.Fatalf("Dialer, Transport of an invalid config = (%v, %v), (%v, %v): want errors", d, derr, tr, terr)
				}
				return
			}
			if derr != nil || terr != nil {
				t.Fatalf("Dialer, Transport of a valid config: %v, %v", derr, terr)
			}
			if (d.TLS != nil) != tc.cfg.TLS.Enabled || (tr.TLS != nil) != tc.cfg.TLS.Enabled {
				t.Errorf("TLS set on the dialer %v / transport %v, want %v", d.TLS != nil, tr.TLS != nil, tc.cfg.TLS.Enabled)
			}
			wantMech := tc.cfg.SASL.Mechanism != ""
			if (d.SASLMechanism != nil) != wantMech || (tr.SASL != nil) != wantMech {
				t.Errorf("SASL set on the dialer %v / transport %v, want %v", d.SASLMechanism != nil, tr.SASL != nil, wantMech)
			}
		})
	}
}

// TestStageConfigs checks the wiring into the stages' configs: the section's problems are
// reported by their Validate under the stage's key, and the default has no security.
func TestStageConfigs(t *testing.T) {
	t.Parallel()
	in := ingest.Default()
	in.Topic, in.GroupID, in.Features = "t", "g", []string{"a"}
	out := sink.Default()
	out.Brokers, out.Topic, out.DeadLetterTopic = []string{"localhost:9092"}, "o", "d"
	if in.Security.Enabled() || out.Security.Enabled() {
		t.Fatal("stage defaults enable security")
	}
	if err := in.Validate(); err != nil {
		t.Fatalf("ingest default: %v", err)
	}
	if err := out.Validate(); err != nil {
		t.Fatalf("sink default: %v", err)
	}
	in.Security.SASL.Mechanism = "plain"
	out.Security.SASL.Mechanism = "plain"
	for _, c := range []struct {
		err  error
		want string
	}{{in.Validate(), "security.sasl.username: required"}, {out.Validate(), "sink.security.sasl.username: required"}} {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("Validate() = %v, want %q", c.err, c.want)
		}
	}
}

// TestMechanism checks what each mechanism hands kafka-go: its name, and for PLAIN the
// credentials in the initial response (RFC 4616: authzid NUL authcid NUL passwd).
func TestMechanism(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ mech, name string }{
		{"plain", "PLAIN"}, {"scram-sha-256", "SCRAM-SHA-256"}, {"Scram-Sha-512", "SCRAM-SHA-512"}, {"", ""},
	} {
		c := kafkasec.Config{SASL: kafkasec.SASL{Mechanism: tc.mech, Username: "alice", Password: kafkasec.NewSecret("wonder")}}
		m, err := c.Mechanism()
		if err != nil {
			t.Fatalf("%s: %v", tc.mech, err)
		}
		if tc.name == "" {
			if m != nil {
				t.Errorf("no mechanism: got %s", m.Name())
			}
			continue
		}
		if m.Name() != tc.name {
			t.Errorf("%s: Name() = %q, want %q", tc.mech, m.Name(), tc.name)
		}
		_, first, err := m.Start(context.Background())
		if err != nil {
			t.Fatalf("%s: Start: %v", tc.mech, err)
		}
		switch tc.name {
		case "PLAIN":
			if string(first) != "\x00alice\x00wonder" {
				t.Errorf("PLAIN initial response %q", first)
			}
		default: // SCRAM client-first message: gs2 header, n=user, r=nonce; never the password
			if !strings.HasPrefix(string(first), "n,,n=alice,r=") || strings.Contains(string(first), "wonder") {
				t.Errorf("%s client-first message %q", tc.name, first)
			}
		}
	}
}

// section is a config with a security section, for the loader tests.
type section struct {
	Security kafkasec.Config `yaml:"security"`
}

func (s *section) Validate() error { return s.Security.Validate() }

// pair is two stages' sections, for the anchor test.
type pair struct {
	Ingest section `yaml:"ingest"`
	Sink   section `yaml:"sink"`
}

func (p *pair) Validate() error { return errors.Join(p.Ingest.Validate(), p.Sink.Validate()) }

// TestLoadYAML decodes security sections through internal/core/config: ${ENV} interpolation of the
// password, scalar forms, the strict key check, and sharing one section with a YAML anchor.
func TestLoadYAML(t *testing.T) {
	p := newTestPKI(t)
	t.Setenv("OUTLIERD_TEST_SASL_PASSWORD", "from-env: #not a comment")
	t.Setenv("OUTLIERD_TEST_CA", p.caFile)

	var s section
	err := config.LoadBytes("env.yaml", []byte(`
security:
  tls: {enabled: true, ca_file: "${OUTLIERD_TEST_CA}", server_name: broker.test}
  sasl:
    mechanism: scram-sha-512
    username: outlierd
    password: ${OUTLIERD_TEST_SASL_PASSWORD}
`), &s)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Security.SASL.Password.Reveal(); got != "from-env: #not a comment" {
		t.Errorf("password from the environment = %q", got)
	}
	if s.Security.TLS.CAFile != p.caFile || s.Security.TLS.ServerName != "broker.test" || !s.Security.TLS.Enabled {
		t.Errorf("tls = %+v", s.Security.TLS)
	}

	for _, tc := range []struct{ yaml, want string }{
		{"password: 12345", "12345"}, // an unquoted number keeps its digits as written
		{"password: 0x1F", "0x1F"},
		{"password: ~", ""},
		{"password:", ""},
		{`password: "quoted"`, "quoted"},
	} {
		var s section
		err := config.LoadBytes("scalar.yaml", []byte("security:\n  sasl:\n    mechanism: scram-sha-256\n    username: u\n    "+tc.yaml+"\n"), &s)
		if tc.want == "" {
			if err == nil || !strings.Contains(err.Error(), "sasl.password: required") {
				t.Errorf("%s: err = %v, want sasl.password: required", tc.yaml, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.yaml, err)
		} else if got := s.Security.SASL.Password.Reveal(); got != tc.want {
			t.Errorf("%s: password %q, want %q", tc.yaml, got, tc.want)
		}
	}

	for _, tc := range []struct{ yaml, want string }{
		{"security:\n  sasl:\n    mechanism: plain\n    passwrd: x\n", "passwrd"},
		{"security:\n  sasl:\n    password: {a: b}\n", "bad.yaml:3:5: a secret must be a string"},
		{"security:\n  tls:\n    enabled: yes please\n", "expected true or false"},
	} {
		var s section
		err := config.LoadBytes("bad.yaml", []byte(tc.yaml), &s)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want %q", tc.yaml, err, tc.want)
		}
	}

	var two pair
	err = config.LoadBytes("anchor.yaml", []byte(`
ingest:
  security: &kafka_security
    tls: {enabled: true, ca_file: "${OUTLIERD_TEST_CA}"}
    sasl: {mechanism: scram-sha-256, username: outlierd, password: "${OUTLIERD_TEST_SASL_PASSWORD}"}
sink:
  security: *kafka_security
`), &two)
	if err != nil {
		t.Fatal(err)
	}
	if two.Sink.Security.SASL.Password.Reveal() != "from-env: #not a comment" || two.Sink.Security.TLS.CAFile != p.caFile {
		t.Errorf("sink section through the anchor: %+v", two.Sink.Security)
	}
}

// TestShippedConfig loads configs/pipeline.yaml, the reference, as shipped (no security in
// either stage) and with its security section filled in the way its comments say: the
// password from the environment, and the sink sharing the section through the anchor.
func TestShippedConfig(t *testing.T) {
	ref, err := configs.FS.ReadFile("pipeline.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pipeline.LoadConfigBytes("pipeline.yaml", ref)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Ingest.Security.Enabled() || cfg.Sink.Security.Enabled() {
		t.Fatalf("the reference enables security: %v / %v", cfg.Ingest.Security, cfg.Sink.Security)
	}

	p := newTestPKI(t)
	t.Setenv("OUTLIERD_TEST_PW", "shipped-secret")
	text := string(ref)
	for _, r := range []struct{ old, new string }{
		{"      enabled: false ", "      enabled: true "},
		{`      ca_file: ""`, `      ca_file: "` + p.caFile + `"`},
		{`      mechanism: ""`, `      mechanism: scram-sha-512`},
		{`      username: ""`, `      username: outlierd`},
		{`      password: ""`, `      password: ${OUTLIERD_TEST_PW}`},
	} {
		if strings.Count(text, r.old) != 1 {
			t.Fatalf("the reference's security section changed: %q appears %d times", r.old, strings.Count(text, r.old))
		}
		text = strings.Replace(text, r.old, r.new, 1)
	}
	cfg, err = pipeline.LoadConfigBytes("secured.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]kafkasec.Config{"ingest": cfg.Ingest.Security, "sink": cfg.Sink.Security} {
		if !s.TLS.Enabled || s.TLS.CAFile != p.caFile || s.SASL.Mechanism != "scram-sha-512" || s.SASL.Password.Reveal() != "shipped-secret" {
			t.Errorf("%s.security = %v", name, s)
		}
	}
}

// TestDiff checks that a config reload sees a changed password (internal/core/config.Diff walks
// structs by exported fields, and a Secret has none) and only a changed one, and names the
// key, not the value.
func TestDiff(t *testing.T) {
	t.Parallel()
	mk := func(pw string) section {
		return section{Security: kafkasec.Config{SASL: kafkasec.SASL{Mechanism: "scram-sha-256", Username: "u", Password: kafkasec.NewSecret(pw)}}}
	}
	if d := config.Diff("ingest", mk("one"), mk("one")); len(d) != 0 {
		t.Errorf("equal passwords (separate values) differ: %v", d)
	}
	if d := config.Diff("ingest", mk("one"), mk("two")); len(d) != 1 || d[0] != "ingest.security.sasl.password" {
		t.Errorf("changed password: diff %v, want [ingest.security.sasl.password]", d)
	}
	zero := mk("x")
	zero.Security.SASL.Password = kafkasec.Secret{}
	if d := config.Diff("ingest", mk(""), zero); len(d) != 0 {
		t.Errorf("an empty and a zero secret differ: %v", d)
	}
}
