package kafkasec

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"
)

// Timeouts of the built clients: kafka-go's own defaults (kafka.DefaultDialer,
// kafka.DefaultTransport), so that turning security on changes nothing else.
const (
	dialerTimeout    = 10 * time.Second // kafka.DefaultDialer.Timeout
	transportTimeout = 3 * time.Second  // kafka.DefaultTransport's net.Dialer timeout
)

// TLSConfig returns the client TLS configuration, or nil when TLS is off. The CA and key pair
// are read now (a rotated certificate takes effect when the stage is rebuilt, i.e. at restart).
func (c *Config) TLSConfig() (*tls.Config, error) {
	if !c.TLS.Enabled {
		return nil, nil
	}
	t := &c.TLS
	cfg := &tls.Config{
		// TLS 1.2 is what every supported Kafka (Java 8+) offers; older versions are broken.
		MinVersion:         tls.VersionTLS12,
		ServerName:         t.ServerName, // empty: kafka-go fills in each broker's host
		InsecureSkipVerify: t.InsecureSkipVerify,
	}
	if t.CAFile != "" {
		pool, err := loadCA(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("kafkasec: tls.ca_file: %w", err)
		}
		cfg.RootCAs = pool
	}
	if t.CertFile != "" || t.KeyFile != "" {
		pair, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("kafkasec: tls.cert_file %q, tls.key_file %q: %w", t.CertFile, t.KeyFile, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// Mechanism returns the SASL mechanism, or nil when SASL is off. Its error never contains the
// credentials.
func (c *Config) Mechanism() (sasl.Mechanism, error) {
	s := &c.SASL
	switch m := c.mechanism(); m {
	case MechanismNone:
		return nil, nil
	case MechanismPlain:
		return plain.Mechanism{Username: s.Username, Password: s.Password.Reveal()}, nil
	case MechanismSCRAMSHA256, MechanismSCRAMSHA512:
		mech, err := scram.Mechanism(scramAlgorithm(m), s.Username, s.Password.Reveal())
		if err != nil {
			// Not wrapped: xdg-go/scram quotes the rejected username or password in its message.
			return nil, fmt.Errorf("kafkasec: sasl %s: SASLprep refused the username or the password (control or unassigned characters)", m)
		}
		return mech, nil
	default:
		return nil, fmt.Errorf("kafkasec: sasl.mechanism: %q is not plain, scram-sha-256 or scram-sha-512", s.Mechanism)
	}
}

// scramAlgorithm maps a SCRAM mechanism to kafka-go's algorithm.
func scramAlgorithm(m string) scram.Algorithm {
	if m == MechanismSCRAMSHA512 {
		return scram.SHA512
	}
	return scram.SHA256
}

// scramAccepts reports whether SCRAM's SASLprep accepts s as a username or password (the
// SCRAM client prepares both the same way).
func scramAccepts(m, s string) bool {
	_, err := scram.Mechanism(scramAlgorithm(m), s, "p")
	return err == nil
}

// parts validates c and builds its TLS configuration and SASL mechanism.
func (c *Config) parts() (*tls.Config, sasl.Mechanism, error) {
	if errs := c.Problems(""); len(errs) > 0 {
		return nil, nil, fmt.Errorf("kafkasec: invalid security config: %w", errors.Join(errs...))
	}
	tc, err := c.TLSConfig()
	if err != nil {
		return nil, nil, err
	}
	mech, err := c.Mechanism()
	if err != nil {
		return nil, nil, err
	}
	return tc, mech, nil
}

// Dialer returns the dialer for a kafka.ReaderConfig (its Dialer field): kafka.DefaultDialer's
// settings plus c's TLS and SASL. The Reader uses it for every connection it opens (group
// coordinator, partition leaders). c is validated first.
func (c *Config) Dialer() (*kafka.Dialer, error) {
	tc, mech, err := c.parts()
	if err != nil {
		return nil, err
	}
	return &kafka.Dialer{
		Timeout:       dialerTimeout,
		DualStack:     true,
		TLS:           tc,
		SASLMechanism: mech,
	}, nil
}

// Transport returns the transport for a kafka.Writer (its Transport field): the dial timeout of
// kafka.DefaultTransport plus c's TLS and SASL. A Writer closes only the idle connections of a
// transport it made itself, so the owner of a Writer using this one calls CloseIdleConnections
// after Writer.Close. c is validated first.
func (c *Config) Transport() (*kafka.Transport, error) {
	tc, mech, err := c.parts()
	if err != nil {
		return nil, err
	}
	return &kafka.Transport{
		Dial: (&net.Dialer{Timeout: transportTimeout}).DialContext,
		TLS:  tc,
		SASL: mech,
	}, nil
}
