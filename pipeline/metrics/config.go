package metrics

import (
	"errors"
	"net"
	"strconv"
	"time"

	"github.com/outlierd/outlierd/internal/core/config"
)

// Config is the pipeline's `http` section: the listener serving the live view (/), /metrics,
// /healthz and /readyz, and the consumer-lag polling that feeds it.
type Config struct {
	// Listen is the host:port to serve on; port 0 picks a free one. Empty turns the
	// listener, the live view's feed and the lag polling off. Default 127.0.0.1:9464 (loopback only: to be scraped
	// from elsewhere, say so, e.g. 0.0.0.0:9464 in a container).
	Listen string `yaml:"listen"`
	// LagInterval is the time between consumer-lag polls (four small broker requests each).
	// It also bounds how long /readyz takes to notice that the brokers are gone (about two
	// intervals). Default 5s; at least 100ms.
	LagInterval time.Duration `yaml:"lag_interval"`
}

// DefaultListen is the default listen address: 9464, the OpenTelemetry Prometheus
// exporter's default port, on loopback so that nothing is exposed unless configured.
const DefaultListen = "127.0.0.1:9464"

// DefaultConfig is the section with its defaults.
func DefaultConfig() Config {
	return Config{Listen: DefaultListen, LagInterval: 5 * time.Second}
}

// Enabled reports whether the listener (and the lag polling) run.
func (c *Config) Enabled() bool { return c.Listen != "" }

// Validate reports every problem at once, each a config.FieldError named by its key (http.*).
func (c *Config) Validate() error {
	var errs []error
	if c.Listen != "" {
		host, port, err := net.SplitHostPort(c.Listen)
		if err != nil {
			errs = append(errs, config.Fieldf("http.listen", "%q: want host:port (empty: off): %w", c.Listen, err))
		} else if n, perr := strconv.Atoi(port); perr != nil || n < 0 || n > 65535 {
			errs = append(errs, config.Fieldf("http.listen", "%q: port %q is not a number in 0..65535", c.Listen, port))
		} else if host != "" && net.ParseIP(host) == nil && !validHostname(host) {
			errs = append(errs, config.Fieldf("http.listen", "%q: host %q is neither an IP address nor a host name", c.Listen, host))
		}
	}
	if c.LagInterval < 100*time.Millisecond {
		errs = append(errs, config.Fieldf("http.lag_interval", "must be >= 100ms (shorter only loads the brokers), got %s", c.LagInterval))
	}
	return errors.Join(errs...)
}

// validHostname accepts DNS names: dot-separated labels of letters, digits and hyphens.
func validHostname(h string) bool {
	if len(h) > 253 {
		return false
	}
	label := 0
	for i := 0; i < len(h); i++ {
		switch ch := h[i]; {
		case ch == '.':
			if label == 0 {
				return false
			}
			label = 0
		case ch == '-' || ch >= '0' && ch <= '9' || ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z':
			label++
			if label > 63 {
				return false
			}
		default:
			return false
		}
	}
	return label > 0
}
