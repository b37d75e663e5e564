package detect

import (
	"strings"
	"testing"
)

// TestConfigBoundsWorkPerBuild: detect.density.iterations and density.samples had no upper
// bound, so a typo or an overflow-sized value (iterations: 9223372036854775807) made every
// model build run for ever: the first model never came, replay never ended, a builder spun a
// core. Each is bounded now, far above any use (1,000 passes; 1,000,000 samples an object and
// subspace, 1,250 times the default).
func TestConfigBoundsWorkPerBuild(t *testing.T) {
	for _, c := range []struct {
		set  func(*Config)
		want string
	}{
		{func(c *Config) { c.Density.Iterations = 1001 }, "density.iterations: must be in [1, 1000], got 1001"},
		{func(c *Config) { c.Density.Samples = 1_000_001 }, "density.samples: must be in [1, 1000000], got 1000001"},
	} {
		cfg := Default()
		c.set(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate: %v, want %q", err, c.want)
		}
	}
	cfg := Default()
	cfg.Density.Iterations, cfg.Density.Samples = 1000, 1_000_000
	if err := cfg.Validate(); err != nil {
		t.Errorf("the bounds themselves: %v", err)
	}
}
