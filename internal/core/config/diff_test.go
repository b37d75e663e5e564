package config

import (
	"slices"
	"testing"
	"time"
)

func TestDiff(t *testing.T) {
	type inner struct {
		Eta   float64 `yaml:"eta"`
		Names []string
	}
	type outer struct {
		Topic    string        `yaml:"topic,omitempty"`
		Wait     time.Duration `yaml:"max_wait"`
		In       inner         `yaml:"density"`
		Flat     inner         `yaml:",inline"`
		Ptr      *int          `yaml:"ptr"`
		Skip     int           `yaml:"-"`
		unexport int
	}
	one, two := 1, 1
	base := outer{Topic: "a", Wait: time.Second, In: inner{Eta: 0.5, Names: []string{"x"}}, Ptr: &one}
	cases := []struct {
		name string
		edit func(*outer)
		want []string
	}{
		{"same", func(*outer) {}, nil},
		{"equal pointee", func(o *outer) { o.Ptr = &two }, nil},
		{"nil and empty slice", func(o *outer) { o.In.Names = nil; o.Flat.Names = []string{} }, []string{"p.density.names"}},
		{"ignored fields", func(o *outer) { o.Skip, o.unexport = 7, 7 }, nil},
		{"scalar", func(o *outer) { o.Topic = "b" }, []string{"p.topic"}},
		{"duration", func(o *outer) { o.Wait = time.Minute }, []string{"p.max_wait"}},
		{"nested", func(o *outer) { o.In.Eta = 0.7 }, []string{"p.density.eta"}},
		{"slice, default key", func(o *outer) { o.In.Names = []string{"y"} }, []string{"p.density.names"}},
		{"inline", func(o *outer) { o.Flat.Eta = 1 }, []string{"p.eta"}},
		{"nil pointer", func(o *outer) { o.Ptr = nil }, []string{"p.ptr"}},
		{"several, in order", func(o *outer) { o.In.Eta, o.Topic = 0.1, "c" }, []string{"p.topic", "p.density.eta"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := base
			n.In.Names = slices.Clone(base.In.Names)
			c.edit(&n)
			if got := Diff("p", base, n); !slices.Equal(got, c.want) {
				t.Errorf("Diff = %q, want %q", got, c.want)
			}
		})
	}
	if got := Diff("", 1, "x"); !slices.Equal(got, []string{""}) {
		t.Errorf("Diff of different types = %q, want the prefix", got)
	}
}
