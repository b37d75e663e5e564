package main

import (
	"strings"
	"testing"
)

// TestLintWarnsOfPlainPasswordsToUnverifiedBrokers: tls.insecure_skip_verify with
// sasl.mechanism plain sends the SASL password to whichever server answers (the broker's
// certificate is not checked, so a man in the middle reads it): lint warns at the key's line,
// exit 0, for the input's and the sink's sections alike (it was accepted without a word; the
// key's comment says it is for throw-away brokers only). SCRAM, or a verified certificate, is
// no warning.
func TestLintWarnsOfPlainPasswordsToUnverifiedBrokers(t *testing.T) {
	sec := func(mech string, insecure bool) string {
		s := "  security:\n    tls:\n      enabled: true\n"
		if insecure {
			s += "      insecure_skip_verify: true\n"
		}
		return s + "    sasl:\n      mechanism: " + mech + "\n      username: u\n      password: p\n"
	}
	for _, c := range []struct {
		name, ingest, sink, want string
	}{
		{"ingest plain", sec("plain", true), "", ":7:7: ingest.security.tls.insecure_skip_verify: warning: true with sasl.mechanism plain"},
		{"sink plain", "", sec("PLAIN", true), ":10:7: sink.security.tls.insecure_skip_verify: warning: true with sasl.mechanism plain"},
		{"scram", sec("scram-sha-256", true), "", ""},
		{"verified", sec("plain", false), "", ""},
	} {
		path := writeFile(t, "s.yaml", "ingest:\n  topic: in\n  features: [v]\n"+c.ingest+"sink:\n  topic: out\n  dead_letter_topic: dl\n"+c.sink)
		out, errs, code := outlierd(t, "lint", "--config", path)
		// (one line: the sink's section left out takes the input's, warned once, at the input's)
		warned := c.want == "" && errs == "" || c.want != "" && strings.HasPrefix(errs, path+c.want) && strings.Count(errs, "\n") == 1
		if code != 0 || !strings.Contains(out, "ok") || !warned {
			t.Errorf("%s: exit %d, stdout %q, stderr %q: want exit 0, ok and %q", c.name, code, out, errs, c.want)
		}
	}
}
