package config

import "gopkg.in/yaml.v3"

// DecodeEnum decodes a YAML scalar into an enum type whose values are words (type T string):
// the enum types' UnmarshalYAML methods call it so that a value of the wrong kind (a list, a
// map) is reported as for a plain string ("cannot unmarshal !!seq into string", at the value's
// line). Whether the word is one of the enum's is the Validate methods' check: there the
// message names the key and the accepted words (FieldError).
func DecodeEnum[T ~string](n *yaml.Node, dst *T) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return err
	}
	*dst = T(s)
	return nil
}
