package config

import (
	"strings"
	"testing"
)

// FuzzLoad checks that no input makes LoadBytes panic (yaml.v3 panics are turned into errors by
// yamlSafe, and this target fails on those too, so a library bug surfaces here), that every
// error names the file, and that a successful load is deterministic.
func FuzzLoad(f *testing.F) {
	f.Setenv("OUTLIERD_FUZZ", "42")
	for _, s := range []string{
		"",
		"name: x\nport: 1\n",
		"port: ${OUTLIERD_FUZZ}\n",
		"port: ${OUTLIERD_FUZZ_UNSET:-7}\nname: $${X}\n",
		"inner: {ratio: 0.1, mood: x}\n",
		"tags: [a, ${OUTLIERD_FUZZ}]\ninner:\n  enabled: ${OUTLIERD_FUZZ:-true}\n",
		"a: &x ${OUTLIERD_FUZZ}\nb: *x\n",
		"name: ${\n",
		"- [\n",
		"name: |\n  ${OUTLIERD_FUZZ}\n  line\n",
		"port: 1\nport: 2\n",
		"---\n---\n",
		"<<: {port: 3}\n",
		"timeout: ${OUTLIERD_FUZZ}ms\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c1 := defaultTestConfig()
		err1 := LoadBytes("fuzz.yaml", data, &c1)
		if err1 != nil {
			if !strings.HasPrefix(err1.Error(), "fuzz.yaml") {
				t.Fatalf("error does not name the file: %v", err1)
			}
			if strings.Contains(err1.Error(), errYAMLPanic.Error()) {
				t.Fatalf("yaml.v3 panicked: %v", err1)
			}
			return
		}
		c2 := defaultTestConfig()
		if err2 := LoadBytes("fuzz.yaml", data, &c2); err2 != nil {
			t.Fatalf("second load failed: %v", err2)
		}
	})
}
