package kafkasec_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"testing"
	"time"

	"github.com/outlierd/outlierd/internal/core/kafkasec"
)

// TestTLSHandshake runs the TLS handshake of the built kafka.Dialer against an in-process TLS
// server holding a certificate of the test CA (SANs 127.0.0.1 and broker.test): the broker is
// verified against ca_file, server_name overrides the dialled host, insecure_skip_verify skips
// the check, and a server requiring client certificates accepts cert_file/key_file.
func TestTLSHandshake(t *testing.T) {
	t.Parallel()
	p := newTestPKI(t)
	pair, err := tls.LoadX509KeyPair(p.serverCert, p.serverKey)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(p.caFile)
	if err != nil {
		t.Fatal(err)
	}
	clientCAs := x509.NewCertPool()
	clientCAs.AppendCertsFromPEM(caPEM)

	cases := []struct {
		name          string
		tls           kafkasec.TLS
		requireClient bool
		clientOK      bool // the client accepts the server
		serverOK      bool // the server accepts the client
	}{
		{"custom CA", kafkasec.TLS{Enabled: true, CAFile: p.caFile}, false, true, true},
		{"system roots do not know the CA", kafkasec.TLS{Enabled: true}, false, false, false},
		{"another CA", kafkasec.TLS{Enabled: true, CAFile: p.otherCAFile}, false, false, false},
		{"server_name in the certificate", kafkasec.TLS{Enabled: true, CAFile: p.caFile, ServerName: "broker.test"}, false, true, true},
		{"server_name not in the certificate", kafkasec.TLS{Enabled: true, CAFile: p.caFile, ServerName: "other.test"}, false, false, false},
		{"insecure_skip_verify", kafkasec.TLS{Enabled: true, InsecureSkipVerify: true}, false, true, true},
		{"client certificate", kafkasec.TLS{Enabled: true, CAFile: p.caFile, CertFile: p.clientCert, KeyFile: p.clientKey}, true, true, true},
		{"client certificate missing", kafkasec.TLS{Enabled: true, CAFile: p.caFile}, true, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			srvCfg := &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
			if tc.requireClient {
				srvCfg.ClientAuth, srvCfg.ClientCAs = tls.RequireAndVerifyClientCert, clientCAs
			}
			srvErr := make(chan error, 1)
			go func() {
				c, err := ln.Accept()
				if err != nil {
					srvErr <- err
					return
				}
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				srvErr <- tls.Server(c, srvCfg).Handshake()
			}()

			sec := kafkasec.Config{TLS: tc.tls}
			d, err := sec.Dialer()
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			conn, cliErr := d.DialContext(ctx, "tcp", ln.Addr().String())
			if conn != nil {
				conn.Close()
			}
			if (cliErr == nil) != tc.clientOK {
				t.Errorf("client handshake error %v, want success: %v", cliErr, tc.clientOK)
			}
			// With TLS 1.3 the client finishes before the server has checked its certificate,
			// so the server's verdict is read on its side.
			if err := <-srvErr; (err == nil) != tc.serverOK {
				t.Errorf("server handshake error %v, want success: %v", err, tc.serverOK)
			}
		})
	}
}
