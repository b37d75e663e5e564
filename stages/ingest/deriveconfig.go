package ingest

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/internal/core/config"
)

// The ingest.derive section (Config.Derive): its types, defaults and validation, called by
// Config.Validate (kept beside config.go, which holds the rest of the ingest keys, so that
// neither file nears the 600-line limit).

// DeriveKind is what a derived feature computes (ingest.derive.features[i].kind).
type DeriveKind string

// Kinds of derived features.
const (
	// DeriveDiff is the first difference: the feature minus its previous value of the same key.
	DeriveDiff DeriveKind = "diff"
	// DeriveRobustZ is the rolling robust z: (x - median) / (1.4826 MAD) of the key's previous
	// `last` values of the feature, the current one excluded.
	DeriveRobustZ DeriveKind = "robust_z"
	// DeriveMean is the rolling mean of the key's last `last` values of the feature, the
	// current one included (with `trim: 2`, less the two farthest from their mean, std's two,
	// so that a spike, or two, does not lift it for `last` records: derive_mean.go): a slow
	// fault's sustained shift, small against each reading's noise, is sqrt(last) times larger
	// against the mean's.
	DeriveMean DeriveKind = "mean"
	// DeriveStd is the rolling spread: the sample standard deviation of the key's last `last`
	// values of the feature, the current one included, less the two farthest from their mean
	// (so that a spike, or two, does not move it for `last` records): a sensor stuck at an ordinary value
	// (spread 0 where it is never 0) and a burst of oscillation around an ordinary level
	// (vibration, tremor) change it where no single reading is rare.
	DeriveStd DeriveKind = "std"
	// DeriveTimeOfDay is the time of day of the record's timestamp as (sin, cos).
	DeriveTimeOfDay DeriveKind = "time_of_day"
	// DeriveDayOfWeek is the time in the week (Monday 00:00 = angle 0) as (sin, cos).
	DeriveDayOfWeek DeriveKind = "day_of_week"
)

// UnmarshalYAML decodes the word (Validate checks it).
func (k *DeriveKind) UnmarshalYAML(n *yaml.Node) error { return config.DecodeEnum(n, k) }

// Derive is ingest.derive: features computed from a record, its key's earlier records and its
// timestamp, identically in the pipeline and in `outlierd replay` (one code: derive.go). The
// name says what the section does (derive columns), beside `features` (read columns).
type Derive struct {
	// MaxKeys bounds the per-key state (the previous values that diff, robust_z, mean and std need): a
	// series is the records of one (partition, key); beyond MaxKeys series the least recently
	// seen one is forgotten, and its key starts afresh when it comes back (its first diff is
	// 0, its robust z 0 until min_values values). Records without a key are one series per
	// partition. Memory: about MaxKeys x (8 bytes per diff + 8 x last per robust_z + 4 x last
	// per mean or std (8 with uncertainty) + 48 per mean (+ 72 with uncertainty; + last + 32 with
	// trim) + last + 145 per std (+ 330 with uncertainty): their exact sums and extremes) + 350 + the key's length) bytes
	// (Deriver.StateBound, logged at the start). Default 100000.
	MaxKeys int `yaml:"max_keys"`
	// Timezone is the IANA zone (e.g. "Europe/Berlin") whose wall clock time_of_day and
	// day_of_week read. Default "UTC"; "Local" (the host's zone) is refused.
	Timezone string `yaml:"timezone"`
	// Features are the derived features, computed in this order (so `of` may name an earlier
	// derived feature: the robust z of a difference).
	Features []DerivedFeature `yaml:"features"`
}

// DerivedFeature is one derived feature (diff, robust_z, mean, std) or cyclic pair (time_of_day,
// day_of_week).
type DerivedFeature struct {
	// Kind is diff | robust_z | mean | std | time_of_day | day_of_week. Required.
	Kind DeriveKind `yaml:"kind"`
	// Of is the feature it is derived from (diff, robust_z, mean, std): one of ingest.features or an
	// earlier derived feature's column.
	Of string `yaml:"of"`
	// Last is robust_z's N (the key's previous values it takes the median and MAD of), mean's
	// (the key's last values it averages, the current one included) or std's (the key's last
	// values whose spread it takes, the current one included; its cost per record does not
	// grow with last: docs/BENCHMARKS.md §12.59.3), in [2, 100000] ([4, 100000] for std).
	// Required for the three.
	Last int `yaml:"last"`
	// MinValues is robust_z's least number of previous values: with fewer the z is 0 (not yet
	// known, never a flag by itself). Default min(last, 10); in [2, last].
	MinValues int `yaml:"min_values"`
	// ScaleFloor is robust_z's least scale, in the feature's unit (a sensor's resolution): the
	// scale is 1.4826 MAD, or 1.2533 x the mean absolute deviation when MAD is 0 (more than half
	// the values equal), and at least ScaleFloor. A history without any spread and no floor
	// gives 0 for the same value and +-1e6 for another. Default 0.
	ScaleFloor float64 `yaml:"scale_floor"`
	// Trim is mean's count of its full window's values left out, those farthest from the
	// window's mean (std's, derive_mean.go): 0 (the plain mean, the default) or 2 (last >= 4).
	// 2 for a channel that spikes: one or two spikes in the window do not lift the mean, where
	// the plain mean carries each spike for `last` records and cost up to half the spikes on
	// generated streams; 0 for small slow shifts: the trimmed mean of noise varies 8-17 % more,
	// and shifts of 1-2 sd were found markedly less well (docs/BENCHMARKS.md §12.66).
	Trim int `yaml:"trim"`
	// Name is the column's name (time_of_day, day_of_week: the pair's prefix, <name>.sin and
	// <name>.cos). Default <of>.diff, <of>.rz<last>, <of>.mean<last>, <of>.std<last>, tod, dow.
	Name string `yaml:"name"`
}

// Derived-feature bounds.
const (
	defaultMaxKeys   = 100000
	maxDeriveKeys    = 100_000_000
	maxRobustZLast   = 100000
	defaultMinValues = 10
)

// Columns are the derived feature's column names, in order.
func (f *DerivedFeature) Columns() []string {
	switch f.Kind {
	case DeriveDiff:
		return []string{cmpOr(f.Name, f.Of+".diff")}
	case DeriveRobustZ:
		return []string{cmpOr(f.Name, f.Of+".rz"+strconv.Itoa(f.Last))}
	case DeriveMean:
		return []string{cmpOr(f.Name, f.Of+".mean"+strconv.Itoa(f.Last))}
	case DeriveStd:
		return []string{cmpOr(f.Name, f.Of+".std"+strconv.Itoa(f.Last))}
	case DeriveTimeOfDay:
		p := cmpOr(f.Name, "tod")
		return []string{p + ".sin", p + ".cos"}
	case DeriveDayOfWeek:
		p := cmpOr(f.Name, "dow")
		return []string{p + ".sin", p + ".cos"}
	}
	return nil
}

// Period is the cycle a time_of_day (a day) or day_of_week (a week) pair places its record on
// (its Columns: sine, cosine); 0 for the other kinds.
func (f *DerivedFeature) Period() time.Duration {
	switch f.Kind {
	case DeriveTimeOfDay:
		return 24 * time.Hour
	case DeriveDayOfWeek:
		return 7 * 24 * time.Hour
	}
	return 0
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Columns are the batch's feature columns: Features, then the derived features' columns.
func (c *Config) Columns() []string {
	out := slices.Clone(c.Features)
	if c.Derive != nil {
		for i := range c.Derive.Features {
			out = append(out, c.Derive.Features[i].Columns()...)
		}
	}
	return out
}

// withDefaults fills MaxKeys, Timezone and each robust_z's MinValues when left out.
func (d *Derive) withDefaults() {
	if d.MaxKeys == 0 {
		d.MaxKeys = defaultMaxKeys
	}
	if d.Timezone == "" {
		d.Timezone = "UTC"
	}
	for i := range d.Features {
		if f := &d.Features[i]; f.Kind == DeriveRobustZ && f.MinValues == 0 {
			f.MinValues = min(f.Last, defaultMinValues)
		}
	}
}

// validate checks ingest.derive; bad reports under ingest., claim takes a column name. It
// returns the timezone it loaded, for the Deriver (nil where it is bad).
func (d *Derive) validate(features []string, withSD bool, bad func(key, format string, args ...any), claim func(key, col, what string)) *time.Location {
	d.withDefaults()
	if d.MaxKeys < 1 || d.MaxKeys > maxDeriveKeys {
		bad("derive.max_keys", "%d is not in [1, %d]", d.MaxKeys, maxDeriveKeys)
	}
	loc, err := loadZone(d.Timezone)
	if err != nil {
		bad("derive.timezone", "%w", err)
	}
	if len(d.Features) == 0 {
		bad("derive.features", "at least one derived feature (or leave derive out)")
	}
	known := slices.Clone(features) // what `of` may name: features and earlier derived columns
	for i := range d.Features {
		f := &d.Features[i]
		key := fmt.Sprintf("derive.features[%d]", i)
		per := f.Kind == DeriveDiff || f.Kind == DeriveRobustZ || f.Kind == DeriveMean || f.Kind == DeriveStd
		switch f.Kind {
		case DeriveDiff, DeriveRobustZ, DeriveMean, DeriveStd, DeriveTimeOfDay, DeriveDayOfWeek:
		default:
			bad(key+".kind", "%q is not one of %q, %q, %q, %q, %q, %q", f.Kind, DeriveDiff, DeriveRobustZ, DeriveMean, DeriveStd, DeriveTimeOfDay, DeriveDayOfWeek)
			continue
		}
		switch {
		case per && f.Of == "":
			bad(key+".of", "required for %s: the feature to derive from", f.Kind)
		case per && !slices.Contains(known, f.Of):
			bad(key+".of", "%q is not a feature or an earlier derived feature", f.Of)
		case !per && f.Of != "":
			bad(key+".of", "not for %s (it reads the record's timestamp)", f.Kind)
		}
		if f.Kind == DeriveMean || f.Kind == DeriveStd {
			// std leaves two values of its window out: over 3 it would always be 0.
			if least := map[DeriveKind]int{DeriveMean: 2, DeriveStd: stdLeftOut + 2}[f.Kind]; f.Last < least || f.Last > maxRobustZLast {
				bad(key+".last", "%d is not in [%d, %d]", f.Last, least, maxRobustZLast)
			}
		} else if f.Last != 0 && f.Kind != DeriveRobustZ {
			bad(key+".last", "only for %s, %s and %s", DeriveRobustZ, DeriveMean, DeriveStd)
		}
		switch {
		case f.Trim != 0 && f.Kind != DeriveMean:
			bad(key+".trim", "only for %s (std always leaves its 2 farthest out)", DeriveMean)
		case f.Trim != 0 && f.Trim != stdLeftOut:
			bad(key+".trim", "%d is not 0 or %d", f.Trim, stdLeftOut)
		case f.Trim != 0 && f.Last >= 2 && f.Last < meanTrimFrom:
			bad(key+".trim", "%d needs last >= %d (last %d would keep fewer than 2 values)", f.Trim, meanTrimFrom, f.Last)
		}
		if f.Kind == DeriveRobustZ {
			if f.Last < 2 || f.Last > maxRobustZLast {
				bad(key+".last", "%d is not in [2, %d]", f.Last, maxRobustZLast)
			} else if f.MinValues < 2 || f.MinValues > f.Last {
				bad(key+".min_values", "%d is not in [2, last = %d]", f.MinValues, f.Last)
			}
			if math.IsNaN(f.ScaleFloor) || math.IsInf(f.ScaleFloor, 0) || f.ScaleFloor < 0 {
				bad(key+".scale_floor", "%v must be finite and >= 0", f.ScaleFloor)
			}
		} else {
			if f.MinValues != 0 {
				bad(key+".min_values", "only for %s", DeriveRobustZ)
			}
			if f.ScaleFloor != 0 {
				bad(key+".scale_floor", "only for %s", DeriveRobustZ)
			}
		}
		if f.Name != "" && strings.HasPrefix(f.Name, "_") {
			bad(key+".name", "%q starts with \"_\", reserved for the coordinate columns", f.Name)
			continue
		}
		for _, col := range f.Columns() {
			claim(key, col, "")
			if withSD {
				claim(key, col+batch.UncertaintySuffix, "(its uncertainty column) ")
			}
			known = append(known, col)
		}
	}
	return loc
}
