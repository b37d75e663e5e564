package config

import (
	"fmt"
	"math"
	"math/big"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// yaml.v3 words its decoding errors in Go's terms ("cannot unmarshal !!str `50k` into int",
// "field windw not found in type detect.Config"). The messages here say the same in the terms
// of the person editing the file: what kind of value the key takes, with an example, and for
// an unknown key the key it most likely meant (edit distance) or the keys that exist there.

var durationType = reflect.TypeOf(time.Duration(0))

// reSuffixed matches a number written with a thousands suffix ("50k", "1.5M").
var reSuffixed = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)([kKmM])$`)

// valueMessage rewords yaml.v3's "cannot unmarshal KIND `VALUE` into GOTYPE". got is the value
// as written in the file ("" when it must not be echoed: interpolated, maybe a secret, or not a
// scalar), kind the YAML tag (!!str, !!seq, !!map, ...), goType yaml.v3's name of the
// destination type, t that type when known (nil otherwise), interpolated whether ${...} made
// the value.
func valueMessage(kind, got, goType string, t reflect.Type, interpolated bool) string {
	shown := ""
	switch {
	case got != "" && interpolated:
		shown = fmt.Sprintf(", got `%s` (after interpolation)", got)
	case got != "":
		shown = fmt.Sprintf(", got `%s`", got)
	case kind == "!!seq":
		shown = ", got a list"
	case kind == "!!map":
		shown = ", got a section (keys below it)"
	}
	goType = strings.TrimLeft(goType, "*")
	if t != nil {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
	}
	switch {
	case t == durationType || goType == "time.Duration":
		if !interpolated && reDuration.MatchString(got) { // well formed, too long for time.Duration
			bound := "at most " + time.Duration(math.MaxInt64).String()
			if strings.HasPrefix(got, "-") {
				bound = "at least " + time.Duration(math.MinInt64).String()
			}
			return "a duration out of range" + shown + ": " + bound
		}
		return "expected a duration" + shown + ": write a duration such as 100ms, 30s or 5m"
	case isIntType(goType) && strings.HasPrefix(goType, "uint") && strings.HasPrefix(got, "-"):
		return "expected a whole number >= 0" + shown
	case isIntType(goType) && !interpolated && intOutOfRange(goType, got) != "":
		return "a whole number out of range" + shown + ": " + intOutOfRange(goType, got)
	case isIntType(goType):
		msg := "expected a whole number" + shown
		if m := reSuffixed.FindStringSubmatch(got); m != nil && !interpolated {
			f, _ := strconv.ParseFloat(m[1], 64)
			mult := 1e3
			if strings.EqualFold(m[2], "m") {
				mult = 1e6
			}
			return msg + fmt.Sprintf(": write %s (no unit suffixes)", strconv.FormatFloat(f*mult, 'f', -1, 64))
		}
		return "expected a whole number (such as 1000)" + shown
	case goType == "float64" || goType == "float32":
		return "expected a number (such as 0.2 or 1e-3)" + shown
	case goType == "bool":
		return "expected true or false" + shown
	case goType == "string":
		return "expected a single value (text)" + shown
	case strings.HasPrefix(goType, "[]"):
		example := "[temp, pressure]"
		if got != "" && kind != "!!seq" && kind != "!!map" && !interpolated {
			example = "[" + got + "]"
		}
		return "expected a list" + shown + ": write a list such as " + example
	case strings.HasPrefix(goType, "map["):
		return "expected a section of `name: value` lines indented below the key" + shown
	case t != nil && t.Kind() == reflect.Struct || strings.Contains(goType, "."):
		return "expected a section of keys indented below it" + shown
	}
	return fmt.Sprintf("cannot read %s as %s", strings.TrimPrefix(shown, ", got "), goType)
}

// unmarshalerType is yaml.v3's Unmarshaler: a type that reads its own nodes.
var unmarshalerType = reflect.TypeOf((*yaml.Unmarshaler)(nil)).Elem()

// fractions lists the scalars written as a number with a fraction (1.5) where the key takes a
// whole number: yaml.v3 truncates them into the int without a word (detect.window: 1.5 ran as
// 1). A whole number written as a float (5e3) is converted exactly and stays accepted.
func (x *index) fractions(original map[*yaml.Node]string, broken map[*yaml.Node]bool) []Issue {
	var out []Issue
	for _, es := range x.byLine {
		for _, e := range es {
			if e.mapKey || e.kind != yaml.ScalarNode || e.tag != "!!float" || broken[e.orig] {
				continue
			}
			t := typeAt(x.root, e.segs)
			if t == nil || t == durationType || !isIntType(t.Kind().String()) || reflect.PointerTo(t).Implements(unmarshalerType) {
				continue
			}
			got, interpolated := e.orig.Value, false
			if o, ok := original[e.orig]; ok {
				got, interpolated = o, true // never the expanded value
			}
			if f, err := strconv.ParseFloat(e.value, 64); err != nil || f == math.Trunc(f) || math.IsInf(f, 0) {
				// A whole number (or an infinity): in range, decoded exactly. Out of it,
				// yaml.v3 stored a value of its own without a word where the float fell outside
				// the type but not outside its own check (window: -1e20 read as
				// -9223372036854775808, which Validate then named; seed: 2^64 as a uint64).
				if bound := intOutOfRange(t.Kind().String(), e.value); bound != "" && storedSilently(t.Kind(), f) {
					shown := ", got `" + got + "`"
					if interpolated {
						shown += " (after interpolation)"
					}
					out = append(out, Issue{Line: e.orig.Line, Column: e.orig.Column,
						Msg: e.path + ": a whole number out of range" + shown + ": " + bound})
				}
				continue
			}
			out = append(out, Issue{Line: e.orig.Line, Column: e.orig.Column,
				Msg: e.path + ": " + valueMessage("!!float", got, t.Kind().String(), t, interpolated)})
		}
	}
	return out
}

// reDuration matches what time.ParseDuration reads (a sign, then numbers with units), so
// that a duration it refuses is known to be out of range rather than malformed.
var reDuration = regexp.MustCompile(`^[-+]?([0-9]*(\.[0-9]*)?(ns|us|µs|μs|ms|s|m|h))+$`)

// intOutOfRange says, for got written as a whole number (123, -1e20, 1_000) beyond the range
// of the integer type named goType (Go's names; int and uint of 64 bits), "at most MAX" or
// "at least MIN"; "" for a value within it or not a whole number.
func intOutOfRange(goType, got string) string {
	f, ok := new(big.Float).SetPrec(256).SetString(strings.ReplaceAll(got, "_", ""))
	if !ok || !f.IsInt() {
		return ""
	}
	bits := 64
	if n, err := strconv.Atoi(strings.TrimPrefix(strings.TrimPrefix(goType, "u"), "int")); err == nil {
		bits = n
	}
	lo, hi := new(big.Int).Lsh(big.NewInt(-1), uint(bits-1)), new(big.Int).Lsh(big.NewInt(1), uint(bits-1))
	if strings.HasPrefix(goType, "u") {
		lo, hi = big.NewInt(0), new(big.Int).Lsh(big.NewInt(1), uint(bits))
	}
	hi.Sub(hi, big.NewInt(1))
	switch {
	case f.Cmp(new(big.Float).SetInt(hi)) > 0:
		return "at most " + hi.String()
	case f.Cmp(new(big.Float).SetInt(lo)) < 0:
		return "at least " + lo.String()
	}
	return ""
}

// storedSilently reports whether yaml.v3 decodes the whole float f outside the 64-bit integer
// kind k without an error (it converts where f <= MaxInt64, or MaxUint64, as floats: 2^63 and
// 2^64, and Go's conversion of a float outside the type is the platform's); elsewhere it
// reports its own error, which valueMessage words.
func storedSilently(k reflect.Kind, f float64) bool {
	switch k {
	case reflect.Int, reflect.Int64:
		return f <= math.MaxInt64 && (f < math.MinInt64 || f >= math.MaxInt64)
	case reflect.Uint, reflect.Uint64:
		return f <= math.MaxUint64 && (f < 0 || f >= math.MaxUint64)
	}
	return false
}

func isIntType(goType string) bool {
	switch goType {
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return true
	}
	return false
}

// unknownKeyMessage words an unknown key of the section parent (its type t): "unknown key
// `windw` in detect; did you mean `window`?"; for a key of one of its sections written a level
// too high, where it belongs ("`eta` is a key of detect.density: indent it under density");
// else the keys that exist there.
func unknownKeyMessage(key, parent string, t reflect.Type) string {
	where := "at the top level"
	if parent != "" {
		where = "in " + parent
	}
	msg := fmt.Sprintf("unknown key `%s` %s", key, where)
	valid := keysOf(t)
	if len(valid) == 0 {
		return msg
	}
	best, bestD := "", 1<<30
	for _, v := range valid {
		if d := editDistance(strings.ToLower(key), v); d < bestD {
			best, bestD = v, d
		}
	}
	// Close: one edit for a short key, two from four letters on, a third of a long key's
	// letters (windw -> window, mdoe -> mode; group -> group_id, 3 edits of 5, is not offered).
	limit := max(len(key)/3, 2)
	if len(key) < 4 {
		limit = 1
	}
	if bestD <= limit {
		return msg + fmt.Sprintf("; did you mean `%s`?", best)
	}
	for _, section := range valid {
		if slices.Contains(keysOf(typeAt(t, []string{section})), key) {
			return msg + fmt.Sprintf("; `%s` is a key of %s: indent it under %s", key, strings.TrimPrefix(parent+"."+section, "."), section)
		}
	}
	sorted := append([]string(nil), valid...)
	sort.Strings(sorted)
	return msg + "; the keys there are " + strings.Join(sorted, ", ")
}

// editDistance is the optimal-string-alignment distance of a and b: insertions, deletions,
// substitutions and transpositions of neighbours (mdoe -> mode is one), bytes (keys are ASCII).
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// typeAt follows path (mapping keys, "[]" for a list item) from t through the YAML names of
// struct fields, pointers, slices and maps; nil where the path leaves the type.
func typeAt(t reflect.Type, path []string) reflect.Type {
	for _, seg := range path {
		for t != nil && t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t == nil {
			return nil
		}
		switch t.Kind() {
		case reflect.Struct:
			f, ok := fieldByYAML(t, seg)
			if !ok {
				return nil
			}
			t = f.Type
		case reflect.Slice, reflect.Array:
			if seg != "[]" {
				return nil
			}
			t = t.Elem()
		case reflect.Map:
			t = t.Elem()
		default:
			return nil
		}
	}
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// yamlName is a struct field's key: its yaml tag's name, else the lowercased field name (as
// yaml.v3 does); "-" when it is not decoded, "" for an inline field.
func yamlName(f reflect.StructField) (string, bool) {
	tag := f.Tag.Get("yaml")
	name, opts, _ := strings.Cut(tag, ",")
	if name == "-" || !f.IsExported() {
		return "", false
	}
	if strings.Contains(","+opts+",", ",inline,") {
		return "", true
	}
	if name == "" {
		name = strings.ToLower(f.Name)
	}
	return name, true
}

// fieldByYAML finds the field decoded from key (through inline fields).
func fieldByYAML(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, ok := yamlName(f)
		if !ok {
			continue
		}
		if name == "" {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				if g, ok := fieldByYAML(ft, key); ok {
					return g, true
				}
			}
			continue
		}
		if name == key {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// keysOf lists the keys a struct type accepts (nil for another type).
func keysOf(t reflect.Type) []string {
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, ok := yamlName(f)
		switch {
		case !ok:
		case name == "":
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			out = append(out, keysOf(ft)...)
		default:
			out = append(out, name)
		}
	}
	return out
}

// valueNode picks the node a "cannot unmarshal KIND QUOTED into GOTYPE" message of yaml.v3 is
// about among cands, the nodes on the line it names. Of the nodes of that kind there (a flow
// list and its elements, `features: [temp, [a]]`), it prefers the one whose key takes the Go
// type named and that no earlier message took, so that each wrong element is reported at its
// own position rather than all at the first node of the line. nil when none has the kind.
func (x *index) valueNode(cands []entry, want yaml.Kind, quoted, goType string) *entry {
	goType = strings.TrimLeft(goType, "*")
	kind := func(c entry) bool { return !c.mapKey && c.kind == want }
	fits := func(c entry) bool {
		t := typeAt(x.root, c.segs)
		return kind(c) && !x.taken[c.orig] && t != nil && t.String() == goType
	}
	same := func(c entry) bool { return quoteLikeYAML(c.value) == quoted }
	for _, ok := range []func(entry) bool{
		func(c entry) bool { return fits(c) && same(c) }, fits,
		func(c entry) bool { return kind(c) && same(c) }, kind,
	} {
		for i := range cands {
			if ok(cands[i]) {
				if x.taken == nil {
					x.taken = map[*yaml.Node]bool{}
				}
				x.taken[cands[i].orig] = true
				return &cands[i]
			}
		}
	}
	return nil
}

// quoteLikeYAML reproduces how yaml.v3 quotes a scalar in "cannot unmarshal" messages, to find
// the scalar a message refers to when several share a line.
func quoteLikeYAML(v string) string {
	if len(v) > 10 {
		return " `" + v[:7] + "...`"
	}
	return " `" + v + "`"
}
