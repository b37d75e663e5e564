package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// jsonKey is produce --key-column's message key of a JSON line's object: the value at path
// keyCol (jsonPath), a string's text or another value as written.
func jsonKey(obj map[string]json.RawMessage, keyCol string) ([]byte, error) {
	raw, ok := jsonPath(obj, keyCol)
	if _, flat := obj[keyCol]; !ok && flat && strings.Contains(keyCol, ".") {
		dot := strings.LastIndex(keyCol, ".")
		return nil, fmt.Errorf("no field %q (--key-column): the line has a key %q with the dot in it, which is no path (ingest.key_field reads %q as %q in the object %q, as this does)",
			keyCol, keyCol, keyCol, keyCol[dot+1:], keyCol[:dot])
	}
	if !ok {
		return nil, fmt.Errorf("no field %q (--key-column)", keyCol)
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []byte(s), nil
	}
	return bytes.Clone(raw), nil
}

// jsonPath is the value at path key of a JSON object, each dot a step into an object
// (sensor.id reaches {"sensor": {"id": ...}}), as ingest's key_field and features read a
// message (stages/ingest/jsonfields.go): a field named with a dot in it ("sensor.id") is reached
// by no path, there or here.
func jsonPath(obj map[string]json.RawMessage, key string) (json.RawMessage, bool) {
	segs := strings.Split(key, ".")
	for _, seg := range segs[:len(segs)-1] {
		raw, ok := obj[seg]
		if !ok {
			return nil, false
		}
		var inner map[string]json.RawMessage
		if json.Unmarshal(raw, &inner) != nil || inner == nil {
			return nil, false
		}
		obj = inner
	}
	raw, ok := obj[segs[len(segs)-1]]
	return raw, ok
}
