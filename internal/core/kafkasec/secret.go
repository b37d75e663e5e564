package kafkasec

import (
	"fmt"
	"io"
	"log/slog"
	"strconv"

	"gopkg.in/yaml.v3"
)

// Redacted is what every formatting and marshalling of a set Secret produces.
const Redacted = "[REDACTED]"

// Secret holds a credential (a SASL password). It never formats or marshals as its value: fmt
// (every verb, %+v and %#v included), encoding/json, yaml.v3 and encoding.TextMarshaler users
// (zerolog's Interface, slog) all see Redacted, or "" when the secret is empty, so that an
// empty password stays diagnosable. Only Reveal returns the value.
//
// The value sits behind a pointer so that even fmt's reflection path, which ignores methods on
// values it cannot call them on (a Secret inside an unexported struct field, such as a stage
// holding its Config), prints an address and not the text.
//
// Marshalling is deliberately not a round trip: a marshalled config holds Redacted, and there
// is no UnmarshalText, so such a dump cannot be loaded back as if it held the password. The zero
// Secret is empty.
type Secret struct {
	v *string
}

// NewSecret returns a Secret holding s.
func NewSecret(s string) Secret {
	if s == "" {
		return Secret{}
	}
	return Secret{v: &s}
}

// Reveal returns the secret's value. Call it only where the credential is handed to the client
// library; never pass its result to a logger or an error.
func (s Secret) Reveal() string {
	if s.v == nil {
		return ""
	}
	return *s.v
}

// IsSet reports whether the secret is non-empty.
func (s Secret) IsSet() bool { return s.v != nil && *s.v != "" }

// String returns Redacted, or "" when the secret is empty.
func (s Secret) String() string {
	if !s.IsSet() {
		return ""
	}
	return Redacted
}

// GoString is String, for %#v.
func (s Secret) GoString() string { return strconv.Quote(s.String()) }

// Format implements fmt.Formatter so that every verb prints String: without it a verb a string
// does not accept (%d) would print the value inside fmt's "%!d(...)" error text.
func (s Secret) Format(f fmt.State, verb rune) {
	switch verb {
	case 'q':
		io.WriteString(f, strconv.Quote(s.String()))
	case 'v':
		if f.Flag('#') {
			io.WriteString(f, s.GoString())
			return
		}
		io.WriteString(f, s.String())
	default:
		io.WriteString(f, s.String())
	}
}

// MarshalText implements encoding.TextMarshaler (used by encoding/json and yaml.v3): Redacted,
// or empty.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// LogValue implements slog.LogValuer.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// UnmarshalYAML reads the secret from a YAML scalar (after ${ENV} interpolation by
// internal/core/config). Any scalar is taken as text, so an unquoted numeric password keeps its
// digits as written; a null or absent value leaves the secret empty. Errors never quote the
// value.
func (s *Secret) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		// A TypeError with yaml.v3's "line N: " form: the loader turns it into file:line:column.
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: a secret must be a string, not a mapping or a list", n.Line)}}
	}
	if n.ShortTag() == "!!null" {
		*s = Secret{}
		return nil
	}
	*s = NewSecret(n.Value)
	return nil
}
