package kafkasec_test

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"gopkg.in/yaml.v3"

	"github.com/outlierd/outlierd/internal/core/config"
	"github.com/outlierd/outlierd/internal/core/kafkasec"
	"github.com/outlierd/outlierd/stages/ingest"
	"github.com/outlierd/outlierd/stages/sink"
)

// leaks reports whether out contains pw as text, or in hex or base64 (what %x or a []byte
// marshalling would produce).
func leaks(out, pw string) bool {
	for _, enc := range []string{pw, hex.EncodeToString([]byte(pw)), strings.ToUpper(hex.EncodeToString([]byte(pw))),
		base64.StdEncoding.EncodeToString([]byte(pw))} {
		if strings.Contains(out, enc) {
			return true
		}
	}
	return false
}

// holder keeps a Config in an unexported field, as a stage does: fmt cannot call methods
// there, so only the Secret's layout keeps the value out.
type holder struct {
	cfg  kafkasec.Config
	sasl kafkasec.SASL
	pw   kafkasec.Secret
}

// TestRedaction formats and marshals configs that hold a password every way a log line or an
// error might, and asserts the password is absent (and that the sanity paths do reveal it, so
// the check itself can fail).
func TestRedaction(t *testing.T) {
	const pw = "Hunter2-e9b1c0d7a4" // distinctive: cannot appear by accident
	p := newTestPKI(t)
	sec := kafkasec.Config{
		TLS:  kafkasec.TLS{Enabled: true, CAFile: p.caFile, CertFile: p.clientCert, KeyFile: p.clientKey},
		SASL: kafkasec.SASL{Mechanism: "scram-sha-512", Username: "outlierd", Password: kafkasec.NewSecret(pw)},
	}
	if err := sec.Validate(); err != nil {
		t.Fatal(err)
	}
	in := ingest.Default()
	in.Topic, in.GroupID, in.Features, in.Security = "t", "g", []string{"a"}, sec
	out := sink.Default()
	out.Brokers, out.Topic, out.DeadLetterTopic, out.Security = []string{"localhost:9092"}, "o", "d", sec

	values := map[string]any{
		"Config": sec, "*Config": &sec, "SASL": sec.SASL, "*SASL": &sec.SASL, "Secret": sec.SASL.Password,
		"*Secret": &sec.SASL.Password, "unexported fields": holder{sec, sec.SASL, sec.SASL.Password},
		"*unexported fields": &holder{sec, sec.SASL, sec.SASL.Password}, "ingest.Config": in, "sink.Config": out,
		"slice": []kafkasec.Secret{sec.SASL.Password}, "map": map[string]kafkasec.SASL{"k": sec.SASL},
	}
	var outputs []string
	for name, v := range values {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%10.3s", "%T"} {
			outputs = append(outputs, name+" "+verb+": "+fmt.Sprintf(verb, v))
		}
		for _, marshal := range []func(any) ([]byte, error){json.Marshal, yaml.Marshal} {
			b, err := marshal(v)
			if err != nil {
				t.Fatalf("marshal %s: %v", name, err)
			}
			outputs = append(outputs, name+" marshalled: "+string(b))
		}
	}
	outputs = append(outputs, fmt.Sprint(sec), fmt.Sprintln(sec.SASL), sec.String())
	if got := fmt.Sprintf("%v|%q|%#v", sec.SASL.Password, sec.SASL.Password, sec.SASL.Password); got != `[REDACTED]|"[REDACTED]"|"[REDACTED]"` {
		t.Errorf("a set secret formats as %s", got)
	}
	if got := fmt.Sprintf("%v|%q", kafkasec.Secret{}, kafkasec.Secret{}); got != `|""` {
		t.Errorf("an empty secret formats as %s", got)
	}

	// Loggers: zerolog (the project's) and log/slog, every way a field can be added.
	var zbuf bytes.Buffer
	zl := zerolog.New(&zbuf)
	zl.Info().Interface("cfg", in).Stringer("security", sec).Msgf("%+v", out)
	zl.Info().Interface("secret", sec.SASL.Password).Any("sasl", sec.SASL).Msg("x")
	outputs = append(outputs, zbuf.String())
	var sbuf bytes.Buffer
	for _, h := range []slog.Handler{slog.NewJSONHandler(&sbuf, nil), slog.NewTextHandler(&sbuf, nil)} {
		slog.New(h).Info("x", "cfg", sec, "sasl", sec.SASL, "pw", sec.SASL.Password, "in", in)
	}
	outputs = append(outputs, sbuf.String())

	// Errors: validation and builder failures of configs holding the password, including one the
	// SCRAM library would quote (a control character), and the loader's.
	bad := sec
	bad.SASL.Password = kafkasec.NewSecret(pw + "\a")
	bad.TLS.CAFile = p.dir + "/missing.pem"
	_, dErr := bad.Dialer()
	_, tErr := bad.Transport()
	_, mErr := bad.Mechanism()
	badIn := in
	badIn.Security = bad
	outputs = append(outputs, fmt.Sprint(bad.Validate()), fmt.Sprint(dErr), fmt.Sprint(tErr), fmt.Sprint(mErr),
		fmt.Sprint(badIn.Validate()))
	if dErr == nil || tErr == nil || mErr == nil {
		t.Fatalf("a refused password built a client: %v, %v, %v", dErr, tErr, mErr)
	}
	t.Setenv("OUTLIERD_TEST_PW", pw)
	var s section
	lerr := config.LoadBytes("bad.yaml", []byte("security:\n  tls: {ca_file: x}\n  sasl: {mechanism: plain, username: u, password: ${OUTLIERD_TEST_PW}}\n  extra: 1\n"), &s)
	if lerr == nil {
		t.Fatal("a bad section loaded")
	}
	outputs = append(outputs, lerr.Error())

	for _, o := range outputs {
		if leaks(o, pw) {
			t.Errorf("password leaked: %s", o)
		}
	}
	// The check can fail: the value is there for whoever asks for it explicitly.
	if sec.SASL.Password.Reveal() != pw || !leaks(fmt.Sprintf("%x", sec.SASL.Password.Reveal()), pw) {
		t.Fatal("Reveal or the leak check is broken")
	}
	for _, want := range []string{"[REDACTED]", "scram-sha-512", "outlierd", p.caFile} {
		if !strings.Contains(sec.String(), want) {
			t.Errorf("String() = %q, want it to mention %q", sec.String(), want)
		}
	}
}
