// Package kafkasec configures the security of outlierd's Kafka clients: TLS (a custom CA, a
// client certificate, the server name) and SASL authentication (PLAIN, SCRAM-SHA-256,
// SCRAM-SHA-512), and builds what kafka-go v0.4.51 takes: a *kafka.Dialer for a Reader
// (stages/ingest) and a *kafka.Transport for a Writer (stages/sink).
//
// Each Kafka stage has its own `security` section (ingest.security, sink.security), beside its
// own `brokers`: the source and the sink may talk to different clusters, and even on one
// cluster least privilege asks for a consuming and a producing principal. To share one section,
// use a YAML anchor (`security: &kafka_security {...}` in ingest, `security: *kafka_security`
// in sink); configs/pipeline.yaml shows both.
//
// Secrets: the password is a Secret, read from the YAML after ${ENV} interpolation (write
// `password: ${KAFKA_SASL_PASSWORD}`), and it never reaches a log line or an error message:
// Secret formats and marshals as "[REDACTED]", Config.String summarises without it, and the
// errors of Validate and of the builders name keys, files and mechanisms, never credentials
// (the SCRAM library's own errors quote the password, so they are replaced, not wrapped).
//
// The zero Config (Default) is no security: plaintext, unauthenticated, and the stages then
// build their clients exactly as without this package.
package kafkasec

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/outlierd/outlierd/internal/core/config"
)

// SASL mechanisms accepted by SASL.Mechanism (case-insensitive).
const (
	MechanismNone        = ""              // no authentication
	MechanismPlain       = "plain"         // SASL/PLAIN: the password travels to the broker (requires TLS here)
	MechanismSCRAMSHA256 = "scram-sha-256" // SASL/SCRAM with SHA-256: a challenge-response, the password never travels
	MechanismSCRAMSHA512 = "scram-sha-512" // SASL/SCRAM with SHA-512
)

// Config is the security of one Kafka client (the source's or the sink's). Decode it from YAML
// strictly on top of Default(), then call Validate (the stages' Validate does).
type Config struct {
	// TLS encrypts the connections and authenticates the broker (and, with a client
	// certificate, this client). Default off.
	TLS TLS `yaml:"tls"`
	// SASL authenticates this client with a user name and password. Default none.
	SASL SASL `yaml:"sasl"`
}

// TLS configures the client side of TLS.
type TLS struct {
	// Enabled turns TLS on (the broker listener must be SSL or SASL_SSL). Default false. The
	// other keys are refused while it is false, so a half-written section cannot silently
	// leave the connection in plaintext.
	Enabled bool `yaml:"enabled"`
	// CAFile is a PEM file of the CA certificates that sign the brokers' certificates. They
	// replace the system's trust store for these connections (a private CA is the usual case).
	// Empty (default): the system's trust store.
	CAFile string `yaml:"ca_file"`
	// CertFile is this client's PEM certificate (chain), for brokers that require client
	// certificates (ssl.client.auth=required). Set together with KeyFile. Default none.
	CertFile string `yaml:"cert_file"`
	// KeyFile is the PEM private key of CertFile, unencrypted (restrict the file's mode
	// instead). Default none.
	KeyFile string `yaml:"key_file"`
	// ServerName is the name verified in the brokers' certificates, and sent as SNI. Empty
	// (default): the host of the address being dialled (each broker's advertised host), which
	// is right unless the certificates name the brokers differently from their addresses.
	ServerName string `yaml:"server_name"`
	// InsecureSkipVerify accepts any broker certificate: the connection is encrypted but the
	// broker is not authenticated, so a man in the middle can read everything, SASL/PLAIN
	// passwords included. Default false; for tests against throw-away brokers only. Refused
	// together with CAFile (which it would make meaningless).
	InsecureSkipVerify bool `yaml:"insecure_skip_verify"`
}

// SASL configures SASL authentication.
type SASL struct {
	// Mechanism is "" (default: none), "plain", "scram-sha-256" or "scram-sha-512"
	// (case-insensitive; the broker's sasl.enabled.mechanisms must include it). PLAIN sends the
	// password to the broker and is refused without TLS; SCRAM proves knowledge of the password
	// without sending it.
	Mechanism string `yaml:"mechanism"`
	// Username is the SASL user. Required with a mechanism.
	Username string `yaml:"username"`
	// Password is the SASL user's password. Required with a mechanism. Take it from the
	// environment (`password: ${KAFKA_SASL_PASSWORD}`) rather than writing it in the file; it
	// is never logged.
	Password Secret `yaml:"password"`
}

// Default is no security: plaintext connections, no authentication.
func Default() Config { return Config{} }

// Enabled reports whether c asks for TLS or SASL; when false the stages build their Kafka
// clients exactly as they would without this package.
func (c *Config) Enabled() bool { return c.TLS.Enabled || c.SASL.Mechanism != MechanismNone }

// mechanism is the normalised (lower-case) SASL mechanism.
func (c *Config) mechanism() string { return strings.ToLower(c.SASL.Mechanism) }

// Validate reports every problem of c at once (errors.Join), each naming its key relative to
// the section ("tls.ca_file"). It reads the CA, certificate and key files, so that `outlierd
// lint` finds a missing or broken file before a run does.
func (c *Config) Validate() error { return errors.Join(c.Problems("")...) }

// Problems returns every problem of c, each a config.FieldError whose key is prefix and the
// key ("sink.security." gives "sink.security.tls.ca_file"), for a stage's Validate to merge
// into its own list. Messages never contain the password.
func (c *Config) Problems(prefix string) []error {
	var errs []error
	add := func(key, format string, a ...any) { errs = append(errs, config.Fieldf(prefix+key, format, a...)) }

	t := &c.TLS
	if !t.Enabled {
		var set []string
		for _, f := range []struct {
			key string
			on  bool
		}{{"ca_file", t.CAFile != ""}, {"cert_file", t.CertFile != ""}, {"key_file", t.KeyFile != ""},
			{"server_name", t.ServerName != ""}, {"insecure_skip_verify", t.InsecureSkipVerify}} {
			if f.on {
				set = append(set, "tls."+f.key)
			}
		}
		if len(set) > 0 {
			add("tls.enabled", "false, but %s set: set tls.enabled: true, or remove them", strings.Join(set, ", "))
		}
	} else {
		if t.InsecureSkipVerify && t.CAFile != "" {
			add("tls.insecure_skip_verify", "with it the broker's certificate is not checked, so tls.ca_file would be ignored; remove one")
		}
		if t.CAFile != "" {
			if _, err := loadCA(t.CAFile); err != nil {
				add("tls.ca_file", "%w", err)
			}
		}
		switch {
		case (t.CertFile == "") != (t.KeyFile == ""):
			missing, given := "tls.key_file", "tls.cert_file"
			if t.CertFile == "" {
				missing, given = given, missing
			}
			add(missing, "required with %s: set both tls.cert_file and tls.key_file (a client certificate) or neither", given)
		case t.CertFile != "":
			if _, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile); err != nil {
				// crypto/tls names what is wrong (no PEM data, key does not match), never key bytes.
				add("tls.cert_file", "%q with tls.key_file %q: %w", t.CertFile, t.KeyFile, err)
			}
		}
	}

	s := &c.SASL
	switch m := c.mechanism(); m {
	case MechanismNone:
		if s.Username != "" || s.Password.IsSet() {
			add("sasl.mechanism", "empty (no authentication), but sasl.username or sasl.password set: set the mechanism (plain, scram-sha-256, scram-sha-512), or remove them")
		}
	case MechanismPlain, MechanismSCRAMSHA256, MechanismSCRAMSHA512:
		if s.Username == "" {
			add("sasl.username", "required with sasl.mechanism %s", m)
		}
		if !s.Password.IsSet() {
			add("sasl.password", "required with sasl.mechanism %s (e.g. password: ${KAFKA_SASL_PASSWORD})", m)
		}
		if m == MechanismPlain && !t.Enabled {
			add("sasl.mechanism", "plain sends the password to the broker as is: enable tls (or use scram-sha-256/scram-sha-512)")
		}
		if m != MechanismPlain {
			if s.Username != "" && !scramAccepts(m, s.Username) {
				add("sasl.username", "not valid for SCRAM (SASLprep refuses it: control or unassigned characters)")
			}
			if s.Password.IsSet() && !scramAccepts(m, s.Password.Reveal()) {
				add("sasl.password", "not valid for SCRAM (SASLprep refuses it: control or unassigned characters)")
			}
		}
	default:
		add("sasl.mechanism", "%s, want plain, scram-sha-256 or scram-sha-512 (or empty for none)", strconv.Quote(s.Mechanism))
	}
	return errs
}

// loadCA reads a PEM file of CA certificates into a pool.
func loadCA(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err // *PathError: names the file
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%q holds no PEM certificate", path)
	}
	return pool, nil
}

// String summarises c for a log line, without the password: e.g.
// `tls: on (ca_file "/etc/kafka/ca.pem", client certificate "/etc/kafka/client.pem"); sasl:
// scram-sha-256 as "outlierd" (password [REDACTED])`.
func (c Config) String() string {
	var b strings.Builder
	if !c.TLS.Enabled {
		b.WriteString("tls: off")
	} else {
		b.WriteString("tls: on")
		var parts []string
		if c.TLS.CAFile != "" {
			parts = append(parts, "ca_file "+strconv.Quote(c.TLS.CAFile))
		} else {
			parts = append(parts, "system CAs")
		}
		if c.TLS.CertFile != "" {
			parts = append(parts, "client certificate "+strconv.Quote(c.TLS.CertFile))
		}
		if c.TLS.ServerName != "" {
			parts = append(parts, "server_name "+strconv.Quote(c.TLS.ServerName))
		}
		if c.TLS.InsecureSkipVerify {
			parts = append(parts, "NOT VERIFYING the broker certificate")
		}
		b.WriteString(" (" + strings.Join(parts, ", ") + ")")
	}
	if c.SASL.Mechanism == MechanismNone {
		b.WriteString("; sasl: none")
	} else {
		pw := "password not set"
		if c.SASL.Password.IsSet() {
			pw = "password " + Redacted
		}
		fmt.Fprintf(&b, "; sasl: %s as %s (%s)", strconv.Quote(c.SASL.Mechanism), strconv.Quote(c.SASL.Username), pw)
	}
	return b.String()
}
