package config

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// FieldError is a problem with the value of one key, as a Validate method finds it. Key is the
// key's full path from the document root: dotted names, [i] for a sequence element and ["k"]
// for an entry of a map keyed by the user ("detect.density.eta", "ingest.features[3]",
// `ingest.uncertainty.fields["temp"]`). LoadBytes reports it at the file:line:column of that key
// (or of its nearest ancestor written in the file, when the key itself is not: a required key
// left out); without a file its message is "key: message".
//
// Validate methods return FieldErrors (joined with errors.Join) rather than plain errors so that
// `outlierd lint`, the start and a reload all point at the line to fix.
type FieldError struct {
	Key string
	Err error
}

// Fieldf is a FieldError with a message formatted like fmt.Errorf (%w keeps the wrapped error).
func Fieldf(key, format string, args ...any) error {
	return &FieldError{Key: key, Err: fmt.Errorf(format, args...)}
}

// NotHostPort is the message for a broker address that is not host:port; where it holds several
// joined by commas (a ${KAFKA_BROKERS} of "a:9092,b:9092" in one list item) it says how to
// give them.
func NotHostPort(addr string) string {
	msg := fmt.Sprintf("%q is not host:port", addr)
	if strings.Contains(addr, ",") {
		msg += " (one address per list item: [a:9092, b:9092])"
	}
	return msg
}

// Error is "key: message".
func (e *FieldError) Error() string { return e.Key + ": " + e.Err.Error() }

// Unwrap returns the message's error.
func (e *FieldError) Unwrap() error { return e.Err }

// Locate places err, FieldErrors of a check made after Load (a command that completes the
// config from its flags and its input first, as replay does), at their keys' positions in the
// file at path, as Load places its own: a *ValidationError. err is returned as it is when the
// file cannot be read or parsed again.
func Locate(path string, err error) error {
	data, rerr := os.ReadFile(path)
	if rerr != nil || err == nil {
		return err
	}
	doc, issues := parseOne(data)
	if doc == nil || len(issues) > 0 {
		return err
	}
	issues = validationIssues(err, doc)
	sortIssues(issues)
	return &ValidationError{File: path, Err: err, Issues: issues}
}

// validationIssues turns a Validate error into issues: a FieldError (alone, joined, or wrapped
// once) at its key's position in doc, anything else without a position.
func validationIssues(err error, doc *yaml.Node) []Issue {
	var out []Issue
	var walk func(error)
	walk = func(err error) {
		if err == nil {
			return
		}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		is := Issue{Msg: err.Error()}
		var fe *FieldError
		if errors.As(err, &fe) {
			if n := keyNode(doc, fe.Key); n != nil {
				is.Line, is.Column = n.Line, n.Column
			}
		}
		out = append(out, is)
	}
	walk(err)
	return out
}

// keyNode finds the node that the path key names in doc: for a mapping key its key node (the
// position a reader looks for), for a sequence element the element. A path that leaves the file
// (a key left out, a default) gives its nearest ancestor that is written; nil when none is, or
// when key is not a path.
func keyNode(doc *yaml.Node, key string) *yaml.Node {
	segs, ok := splitKey(key)
	if doc == nil || !ok {
		return nil
	}
	n := doc
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	var at *yaml.Node // position of the deepest segment found
	for _, s := range segs {
		for n.Kind == yaml.AliasNode && n.Alias != nil {
			n = n.Alias
		}
		var next, pos *yaml.Node
		switch {
		case n.Kind == yaml.MappingNode && !s.index:
			for i := 0; i+1 < len(n.Content); i += 2 {
				if k := n.Content[i]; k.Kind == yaml.ScalarNode && k.Value == s.name {
					pos, next = k, n.Content[i+1]
				}
			}
		case n.Kind == yaml.SequenceNode && s.index && s.i < len(n.Content):
			pos, next = n.Content[s.i], n.Content[s.i]
		}
		if next == nil {
			break
		}
		at, n = pos, next
	}
	return at
}

// keySeg is one step of a key path: a name (or a quoted map key) or a sequence index.
type keySeg struct {
	name  string
	index bool
	i     int
}

// splitKey parses `a.b[3].c["x.y"]` into its steps.
func splitKey(key string) ([]keySeg, bool) {
	var segs []keySeg
	for len(key) > 0 {
		switch key[0] {
		case '.':
			if len(segs) == 0 {
				return nil, false
			}
			key = key[1:]
			continue
		case '[':
			end := strings.IndexByte(key, ']')
			if end < 0 {
				return nil, false
			}
			inner := key[1:end]
			if strings.HasPrefix(inner, `"`) {
				q, err := strconv.QuotedPrefix(key[1:])
				if err != nil {
					return nil, false
				}
				name, _ := strconv.Unquote(q)
				end = 1 + len(q)
				if end >= len(key) || key[end] != ']' {
					return nil, false
				}
				segs = append(segs, keySeg{name: name})
			} else {
				i, err := strconv.Atoi(inner)
				if err != nil || i < 0 {
					return nil, false
				}
				segs = append(segs, keySeg{index: true, i: i})
			}
			key = key[end+1:]
			continue
		}
		end := strings.IndexAny(key, ".[")
		if end < 0 {
			end = len(key)
		}
		segs = append(segs, keySeg{name: key[:end]})
		key = key[end:]
	}
	return segs, len(segs) > 0
}

// Flatten lists the errors err joins (errors.Join, nested), err itself when it joins none, nil
// for nil.
func Flatten(err error) []error {
	if err == nil {
		return nil
	}
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	var out []error
	for _, e := range j.Unwrap() {
		out = append(out, Flatten(e)...)
	}
	return out
}

// FieldKeys lists the keys of the FieldErrors among the errors err joins.
func FieldKeys(err error) []string {
	var keys []string
	for _, e := range Flatten(err) {
		var fe *FieldError
		if errors.As(e, &fe) {
			keys = append(keys, fe.Key)
		}
	}
	return keys
}
