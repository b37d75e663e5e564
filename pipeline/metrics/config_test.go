package metrics

import (
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cfg     Config
		wantErr []string // substrings; none: valid
	}{
		{"default", DefaultConfig(), nil},
		{"off", Config{Listen: "", LagInterval: time.Second}, nil},
		{"any interface", Config{Listen: ":9464", LagInterval: time.Second}, nil},
		{"free port", Config{Listen: "127.0.0.1:0", LagInterval: time.Second}, nil},
		{"ipv6", Config{Listen: "[::1]:9464", LagInterval: time.Second}, nil},
		{"host name", Config{Listen: "metrics.local:9464", LagInterval: time.Second}, nil},
		{"no port", Config{Listen: "127.0.0.1", LagInterval: time.Second}, []string{"http.listen", "host:port"}},
		{"port not a number", Config{Listen: "127.0.0.1:http", LagInterval: time.Second}, []string{"http.listen", "0..65535"}},
		{"port too large", Config{Listen: "127.0.0.1:70000", LagInterval: time.Second}, []string{"0..65535"}},
		{"bad host", Config{Listen: "a b:9464", LagInterval: time.Second}, []string{"neither an IP"}},
		{"interval too short", Config{Listen: DefaultListen, LagInterval: 10 * time.Millisecond}, []string{"http.lag_interval"}},
		{"both", Config{Listen: "x", LagInterval: 0}, []string{"http.listen", "http.lag_interval"}},
	}
	for _, tc := range tests {
		err := tc.cfg.Validate()
		if len(tc.wantErr) == 0 {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		for _, sub := range tc.wantErr {
			if !strings.Contains(err.Error(), sub) {
				t.Errorf("%s: error %q lacks %q", tc.name, err, sub)
			}
		}
	}
	if c := (Config{}); c.Enabled() {
		t.Error("empty listen is enabled")
	}
	if c := DefaultConfig(); !c.Enabled() || c.Listen != "127.0.0.1:9464" {
		t.Errorf("default %+v", c)
	}
}
