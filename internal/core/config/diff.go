package config

import (
	"reflect"
	"strings"
	"time"
)

// Diff returns the YAML keys whose values differ between old and new, two values of the same
// struct type, as dotted paths under prefix ("detect.density.eta"), in declaration order.
// Nested structs are compared field by field; any other value (a slice, a map, a pointer, a
// time.Time) is one key compared whole; a nil and an empty slice or map are equal (a file
// that says `[]` and one that omits the key mean the same). The keys are the fields' yaml names, so a message
// about a change names what the file says.
func Diff(prefix string, old, new any) []string {
	a, b := reflect.ValueOf(old), reflect.ValueOf(new)
	if a.Type() != b.Type() {
		return []string{prefix} // not comparable field by field: the whole value changed
	}
	var out []string
	diffValue(prefix, a, b, &out)
	return out
}

var timeType = reflect.TypeOf(time.Time{})

// hasExported reports whether struct type t has an exported field.
func hasExported(t reflect.Type) bool {
	for i := range t.NumField() {
		if t.Field(i).IsExported() {
			return true
		}
	}
	return false
}

func diffValue(key string, a, b reflect.Value, out *[]string) {
	if k := a.Kind(); (k == reflect.Slice || k == reflect.Map) && a.Len() == 0 && b.Len() == 0 {
		return
	}
	// A struct without exported fields (time.Time, a secret such as kafkasec.Secret) is one
	// opaque value: walking it would skip all of it and miss a change.
	if a.Kind() != reflect.Struct || a.Type() == timeType || !hasExported(a.Type()) {
		if !reflect.DeepEqual(a.Interface(), b.Interface()) {
			*out = append(*out, key)
		}
		return
	}
	t := a.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		sub := key
		if !strings.Contains(opts, "inline") {
			if name == "" {
				name = strings.ToLower(f.Name) // yaml.v3's default key
			}
			if sub != "" {
				sub += "."
			}
			sub += name
		}
		diffValue(sub, a.Field(i), b.Field(i), out)
	}
}
