// Package config loads outlierd's YAML configuration files, for `outlierd lint` and `outlierd run`.
//
// Loading a file is four steps, each reporting every problem it finds rather than the first:
//
//  1. parse the YAML (a syntax error names file:line:column of the line that breaks the
//     document, e.g. a key indented wrongly, not the line where its block starts);
//  2. expand ${ENV} / ${ENV:-default} in scalar values (see the rules in interpolate.go; an unset
//     variable without a default is an error naming the variable and its file:line:column);
//  3. decode strictly (yaml.v3 Decoder.KnownFields): a misspelt or unknown key, or a value of the
//     wrong type, is an error "file:line:column: key: message", the key with its full path;
//  4. call Validate() error when the destination type has it: each FieldError it returns (see
//     field.go) becomes "file:line:column: key: message" at that key's position.
//
// The package knows nothing about outlierd's own sections: the pipeline package defines the
// top-level struct and calls Load with it.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Issue is one problem found in a config file. Line and Column are 1-based positions in the file
// as written; 0 means unknown (yaml.v3 gives no column for syntax errors).
type Issue struct {
	Line   int
	Column int
	Msg    string
}

// Error lists every problem found while parsing, interpolating or decoding one file, in file
// order. Its message has one line per issue, each "file:line:column: message".
type Error struct {
	File   string
	Issues []Issue
}

// Error implements error.
func (e *Error) Error() string { return renderIssues(e.File, e.Issues) }

// renderIssues writes one "file:line:column: message" line per issue (":column" and ":line"
// left out where unknown).
func renderIssues(file string, issues []Issue) string {
	var b strings.Builder
	for i, is := range issues {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(file)
		if is.Line > 0 {
			b.WriteString(":" + strconv.Itoa(is.Line))
			if is.Column > 0 {
				b.WriteString(":" + strconv.Itoa(is.Column))
			}
		}
		b.WriteString(": ")
		b.WriteString(is.Msg)
	}
	return b.String()
}

// sortIssues puts issues in file order; those without a line keep their order, last.
func sortIssues(issues []Issue) {
	sort.SliceStable(issues, func(i, j int) bool {
		a, b := issues[i], issues[j]
		if (a.Line == 0) != (b.Line == 0) {
			return b.Line == 0
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
}

// ValidationError is returned when the decoded value's Validate method fails. Issues has one
// entry per problem, in file order: a FieldError is placed at its key's line and column (or its
// nearest ancestor's in the file, when the key is not written there), any other error has no
// position. Unwrap gives the Validate error.
type ValidationError struct {
	File   string
	Err    error
	Issues []Issue
}

// Error implements error: one "file:line:column: key: message" line per issue.
func (e *ValidationError) Error() string {
	if len(e.Issues) == 0 {
		return renderIssues(e.File, []Issue{{Msg: e.Err.Error()}})
	}
	return renderIssues(e.File, e.Issues)
}

// Unwrap returns the error from Validate.
func (e *ValidationError) Unwrap() error { return e.Err }

// validator is implemented by config structs that check their own values.
type validator interface{ Validate() error }

// Deriver is implemented by a config whose defaults follow other keys (detect.min_records
// follows detect.window when the file leaves it out): LoadBytes calls Derive after decoding and
// before Validate, with written reporting whether the file sets a key (its path as FieldErrors
// name it: "detect.min_records"; a section written as an alias counts as written, its keys
// not).
type Deriver interface {
	Derive(written func(path string) bool)
}

// writtenKeys lists the key paths a document sets.
func writtenKeys(doc *yaml.Node) map[string]bool {
	keys := map[string]bool{}
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, path)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				p := joinKey(path, n.Content[i].Value)
				keys[p] = true
				walk(n.Content[i+1], p)
			}
		}
	}
	if doc != nil {
		walk(doc, "")
	}
	return keys
}

// Load reads the YAML file at path and decodes it into *into; see LoadBytes.
func Load[T any](path string, into *T) error {
	_, err := LoadWritten(path, into)
	return err
}

// LoadWritten is Load that also returns which keys the file sets, as Derive's written reports
// them ("detect.min_records"), for a caller whose own defaults must not override a value the
// user wrote (replay's batch case). written is nil on error.
func LoadWritten[T any](path string, into *T) (written func(path string) bool, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		var pe *os.PathError // (its reason alone: the path comes first)
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("%s: cannot read the config: %w", path, err)
	}
	keys, err := loadBytes(path, data, into)
	if err != nil {
		return nil, err
	}
	return func(path string) bool { return keys[path] }, nil
}

// LoadBytes decodes the YAML document data (name is the file name used in messages) into *into.
//
// *into must already hold the defaults (e.g. `cfg := sink.Default(); config.LoadBytes(name, data,
// &cfg)`): decoding starts from a copy of it, so keys absent from the document keep their values
// and nested structs are filled key by key. Slices given in the document replace the default
// slice. *into is assigned only when every step succeeds, so on error it still holds the defaults.
// (The copy is shallow: a map in the defaults may have entries added by the document.)
//
// An empty document (only comments or nothing) is valid and leaves the defaults. A file with more
// than one YAML document is an error. Errors are *Error (parse, interpolation, decoding: every
// issue found) or *ValidationError (from the type's Validate method). Expanded environment values
// never appear in the messages.
func LoadBytes[T any](name string, data []byte, into *T) error {
	_, err := loadBytes(name, data, into)
	return err
}

// loadBytes is LoadBytes returning the keys the document sets (writtenKeys).
func loadBytes[T any](name string, data []byte, into *T) (map[string]bool, error) {
	if into == nil {
		return nil, fmt.Errorf("config: %s: nil destination", name)
	}
	tmp := *into
	doc, issues := decodeInto(data, &tmp, os.LookupEnv)
	if len(issues) > 0 {
		sortIssues(issues)
		return nil, &Error{File: name, Issues: issues}
	}
	keys := writtenKeys(doc)
	if d, ok := any(&tmp).(Deriver); ok {
		d.Derive(func(path string) bool { return keys[path] })
	}
	if v, ok := any(&tmp).(validator); ok {
		if err := v.Validate(); err != nil {
			issues := validationIssues(err, doc)
			sortIssues(issues)
			return nil, &ValidationError{File: name, Err: err, Issues: issues}
		}
	}
	*into = tmp
	return keys, nil
}

// decodeInto runs parse, interpolation and strict decoding of data into out (a pointer) and
// returns the parsed document (file positions; nil when empty) and every issue found.
func decodeInto(data []byte, out any, lookup lookupFunc) (*yaml.Node, []Issue) {
	doc, issues := parseOne(data)
	if doc == nil || len(issues) > 0 {
		return doc, issues
	}
	return doc, decodeDoc(doc, data, out, lookup)
}

// decodeDoc is decodeInto's interpolation and decoding of the parsed doc.
func decodeDoc(doc *yaml.Node, data []byte, out any, lookup lookupFunc) []Issue {
	var issues []Issue

	it := interpolator{lookup: lookup}
	it.walk(doc)
	issues = append(issues, it.issues...)
	nameless := map[*yaml.Node]bool{}
	issues = append(issues, namelessKeys(doc, "", nameless)...)

	// Without interpolation the original bytes are decoded, so yaml.v3's line numbers are the
	// file's. With it, the expanded tree is re-encoded and decoded (Node.Decode cannot check
	// unknown keys), and positions are mapped back to the file through a parallel walk of the two
	// trees.
	src := data
	idx := &index{root: reflect.TypeOf(out).Elem()}
	if len(it.original) == 0 {
		idx.addSame(doc)
	} else {
		var enc []byte
		err := yamlSafe(func() (err error) { enc, err = yaml.Marshal(doc); return err })
		if err != nil {
			return append(issues, Issue{Msg: fmt.Sprintf("re-encoding the interpolated document: %v", err)})
		}
		var doc2 yaml.Node
		if err := yamlSafe(func() error { return yaml.Unmarshal(enc, &doc2) }); err != nil {
			return append(issues, Issue{Msg: fmt.Sprintf("re-parsing the interpolated document: %v", err)})
		}
		idx.addPair(doc, &doc2, false, "", nil, "")
		src = enc
	}

	issues = append(issues, idx.fractions(it.original, it.broken)...)
	dec := yaml.NewDecoder(bytes.NewReader(src))
	dec.KnownFields(true)
	err := yamlSafe(func() error { return dec.Decode(out) })
	if err == nil || errors.Is(err, io.EOF) {
		return issues
	}
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		is, _ := idx.issue(err.Error(), it.original)
		return append(issues, is)
	}
	for _, msg := range te.Errors {
		is, n := idx.issue(msg, it.original)
		if n != nil && (it.broken[n] || nameless[n]) {
			continue // already reported (an interpolation problem, a key without a name)
		}
		issues = append(issues, is)
	}
	return issues
}

// namelessKeys reports the keys of n's mappings (n's key path path) that name nothing: `~`,
// `null` or "" (marked in seen). yaml.v3 skips a null key without a word, even when decoding
// strictly, and words an empty one in Go's terms ("field  not found in type pipeline.Config").
func namelessKeys(n *yaml.Node, path string, seen map[*yaml.Node]bool) []Issue {
	var issues []Issue
	for i, c := range n.Content {
		p := path
		switch n.Kind {
		case yaml.MappingNode:
			k := n.Content[i-i%2]
			if i%2 == 0 && (k.ShortTag() == "!!null" || (k.Kind == yaml.ScalarNode && k.Value == "")) {
				written, where := k.Value, "at the top level"
				if k.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 || written == "" {
					written = strconv.Quote(k.Value)
				}
				if path != "" {
					where = "in " + path
				}
				seen[k] = true
				issues = append(issues, Issue{Line: k.Line, Column: k.Column,
					Msg: fmt.Sprintf("a key without a name (`%s`) %s", written, where)})
				continue
			}
			p = joinKey(path, k.Value)
		case yaml.SequenceNode:
			p = path + "[" + strconv.Itoa(i) + "]"
		}
		issues = append(issues, namelessKeys(c, p, seen)...)
	}
	return issues
}

// parseOne parses data into a single document node. A nil node with no issues is an empty
// document.
func parseOne(data []byte) (*yaml.Node, []Issue) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := yamlSafe(func() error { return dec.Decode(&doc) }); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, []Issue{syntaxIssue(err, data)}
	}
	var extra yaml.Node
	switch err := yamlSafe(func() error { return dec.Decode(&extra) }); {
	case err == nil:
		return nil, []Issue{{Line: extra.Line, Column: extra.Column,
			Msg: "a second YAML document (after ---); a config file holds exactly one"}}
	case !errors.Is(err, io.EOF):
		return nil, []Issue{syntaxIssue(err, data)}
	}
	return &doc, nil
}

// errYAMLPanic marks a panic inside yaml.v3, turned into an error by yamlSafe.
var errYAMLPanic = errors.New("internal error in the YAML library")

// yamlSafe runs one yaml.v3 call. yaml.v3 converts its own failures to errors; a panic escaping
// it is a bug in the library, and `outlierd lint` must report it as a bad file rather than crash.
func yamlSafe(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", errYAMLPanic, r)
		}
	}()
	return f()
}

var (
	reLine     = regexp.MustCompile(`^(?:yaml: )?line (\d+): `)
	reAtLine   = regexp.MustCompile(`at line (\d+)`)
	reField    = regexp.MustCompile(`^field (.*) not found in type (\S+)$`)
	reDupKey   = regexp.MustCompile(`^mapping key "(.*)" already defined`)
	reFieldSet = regexp.MustCompile(`^field (.+) already set in type`)
	reValue    = regexp.MustCompile("^cannot unmarshal (\\S+)( `.*`)? into (.+)$")
)

// syntaxIssue turns a yaml.v3 parse error ("yaml: line 3: did not find expected key") into an
// Issue at the line that breaks the document (see problemLine).
func syntaxIssue(err error, data []byte) Issue {
	msg := err.Error()
	if m := reLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		rest := msg[len(m[0]):]
		is := Issue{Line: line, Msg: "YAML syntax: " + rest}
		if l, c := problemLine(data, line, rest); l > 0 {
			is.Line, is.Column = l, c
		}
		if lines := bytes.Split(data, []byte("\n")); is.Line > 0 && is.Line <= len(lines) && strings.Contains(rest, "cannot start any token") {
			l := lines[is.Line-1]
			if bytes.ContainsRune(l[:len(l)-len(bytes.TrimLeft(l, " \t"))], '\t') {
				is.Msg += " (a tab: YAML indents with spaces only)" // yaml.v3's words for an indenting tab
			}
		}
		return is
	}
	return Issue{Msg: "YAML syntax: " + strings.TrimPrefix(msg, "yaml: ")}
}

// problemLine's search costs one parse of a prefix per line: it is bounded to files of config
// size (the reference config is a few KiB); a larger file keeps yaml.v3's line.
const (
	maxProblemLines = 2000
	maxProblemBytes = 64 << 10
)

// problemLine finds the line a syntax error is on, with the column of its first token. yaml.v3
// names the line where the enclosing block started (its context mark), so a key indented wrongly
// under a section is reported at the section's line, or at line 1 for an item of a list. The
// document cut after the offending line fails with the same message, and cut before it does not
// (a file cut at a line end is valid YAML up to there), so the first cut from yaml.v3's line on
// that fails with msg is that line. 0 when none does (the error needs the whole file: an
// unclosed quote or bracket).
func problemLine(data []byte, from int, msg string) (line, col int) {
	lines := bytes.SplitAfter(data, []byte("\n"))
	if len(lines) > maxProblemLines || len(data) > maxProblemBytes {
		return 0, 0
	}
	n := 0
	for i, l := range lines {
		n += len(l)
		if i+1 < from-1 { // yaml.v3 may give the 0-based line of its mark
			continue
		}
		err := yamlSafe(func() error {
			dec := yaml.NewDecoder(bytes.NewReader(data[:n]))
			for {
				var doc yaml.Node
				if err := dec.Decode(&doc); err != nil {
					return err
				}
			}
		})
		if err == nil || errors.Is(err, io.EOF) {
			continue
		}
		if m := reLine.FindStringSubmatch(err.Error()); m != nil && err.Error()[len(m[0]):] == msg {
			text := strings.TrimRight(string(l), "\r\n")
			return i + 1, len(text) - len(strings.TrimLeft(text, " \t")) + 1
		}
	}
	return 0, 0
}

// entry is one node of the decoded tree with the file position it came from.
type entry struct {
	line   int        // line of the node in the decoded text
	orig   *yaml.Node // the node as parsed from the file (position, pre-expansion identity)
	kind   yaml.Kind
	tag    string // the decoded node's resolved tag (!!int, !!float, ...)
	value  string // value in the decoded text
	mapKey bool
	path   string // the node's key path from the root ("detect.density.eta", "ingest.features[2]")
	// segs is path as the keys to follow from the root type ("[]" for a list item), parent
	// the path of the mapping holding a key (for an unknown key's message).
	segs   []string
	parent string
}

// index finds the file position of a node that a yaml.v3 decode message refers to by line.
type index struct {
	// root is the type decoded into (the keys an unknown key could have meant).
	root   reflect.Type
	byLine map[int][]entry
	// lineMap maps a decoded-text line to the file line of the first node on it.
	lineMap map[int]int
	// taken marks the nodes a "cannot unmarshal" message was placed at already.
	taken map[*yaml.Node]bool
}

func (x *index) add(e entry) {
	if x.byLine == nil {
		x.byLine = make(map[int][]entry)
		x.lineMap = make(map[int]int)
	}
	x.byLine[e.line] = append(x.byLine[e.line], e)
	if _, ok := x.lineMap[e.line]; !ok {
		x.lineMap[e.line] = e.orig.Line
	}
}

// addSame indexes a tree decoded from the file's own bytes.
func (x *index) addSame(n *yaml.Node) { x.addPair(n, n, false, "", nil, "") }

// addPair indexes b (decoded text) against a (file), whose key path is path. The trees have the
// same shape by construction; where they do not, the walk stops and positions there stay
// unknown.
func (x *index) addPair(a, b *yaml.Node, mapKey bool, path string, segs []string, parent string) {
	x.add(entry{line: b.Line, orig: a, kind: b.Kind, tag: b.ShortTag(), value: b.Value, mapKey: mapKey, path: path, segs: segs, parent: parent})
	if a.Kind != b.Kind || len(a.Content) != len(b.Content) || a.Kind == yaml.AliasNode {
		return
	}
	for i := range a.Content {
		p, s := path, segs
		switch a.Kind {
		case yaml.MappingNode:
			p = joinKey(path, a.Content[i-i%2].Value)
			s = append(slices.Clip(segs), a.Content[i-i%2].Value)
		case yaml.SequenceNode:
			p = path + "[" + strconv.Itoa(i) + "]"
			s = append(slices.Clip(segs), "[]")
		}
		x.addPair(a.Content[i], b.Content[i], a.Kind == yaml.MappingNode && i%2 == 0, p, s, path)
	}
}

// reBareKey matches the keys written as is in a key path; others are quoted, ["a.b"].
var reBareKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// joinKey appends key to path in the syntax of FieldError keys.
func joinKey(path, key string) string {
	if !reBareKey.MatchString(key) {
		return path + "[" + strconv.Quote(key) + "]"
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

// fileLine maps a decoded-text line to a file line (0 if unknown).
func (x *index) fileLine(line int) int { return x.lineMap[line] }

// issue converts one yaml.v3 decode message to an Issue at the file position of the node it
// refers to, and returns that node (nil if not found). original holds the pre-expansion text of interpolated scalars, which replaces the
// expanded value yaml.v3 quotes (it may be a secret).
func (x *index) issue(msg string, original map[*yaml.Node]string) (Issue, *yaml.Node) {
	m := reLine.FindStringSubmatch(msg)
	if m == nil {
		return Issue{Msg: strings.TrimPrefix(msg, "yaml: ")}, nil
	}
	line, _ := strconv.Atoi(m[1])
	rest := msg[len(m[0]):]
	rest = reAtLine.ReplaceAllStringFunc(rest, func(s string) string {
		n, _ := strconv.Atoi(s[len("at line "):])
		if fl := x.fileLine(n); fl > 0 {
			return "at line " + strconv.Itoa(fl)
		}
		return s
	})
	cands := x.byLine[line]

	// pick returns the first candidate satisfying ok.
	pick := func(ok func(entry) bool) *entry {
		for i := range cands {
			if ok(cands[i]) {
				return &cands[i]
			}
		}
		return nil
	}
	var e *entry
	switch {
	case reField.MatchString(rest):
		f := reField.FindStringSubmatch(rest)
		e = pick(func(c entry) bool { return c.mapKey && c.value == f[1] })
		if e != nil && len(e.segs) > 0 {
			parent := typeAt(x.root, e.segs[:len(e.segs)-1])
			return Issue{Line: e.orig.Line, Column: e.orig.Column, Msg: unknownKeyMessage(f[1], e.parent, parent)}, e.orig
		}
		rest = fmt.Sprintf("unknown key `%s` (not a field of %s)", f[1], f[2])
	case reDupKey.MatchString(rest):
		k := reDupKey.FindStringSubmatch(rest)[1]
		e = pick(func(c entry) bool { return c.mapKey && strconv.Quote(c.value) == `"`+k+`"` })
	case reFieldSet.MatchString(rest):
		k := reFieldSet.FindStringSubmatch(rest)[1]
		e = pick(func(c entry) bool { return c.mapKey && c.value == k })
	case reValue.MatchString(rest):
		v := reValue.FindStringSubmatch(rest)
		want := yaml.ScalarNode
		switch v[1] {
		case "!!map":
			want = yaml.MappingNode
		case "!!seq":
			want = yaml.SequenceNode
		}
		e = x.valueNode(cands, want, v[2], v[3])
		switch {
		case e != nil:
			got, interpolated := "", false
			if o, ok := original[e.orig]; ok {
				// Never echo an expanded value: quote the scalar as written in the file.
				got, interpolated = o, true
			} else if e.orig.Kind == yaml.ScalarNode {
				got = e.orig.Value
			}
			rest = valueMessage(v[1], got, v[3], typeAt(x.root, e.segs), interpolated)
		case len(original) > 0:
			// The node is not identified, so it may be an interpolated one: no value shown.
			rest = valueMessage(v[1], "", v[3], nil, false)
		default:
			rest = valueMessage(v[1], strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(v[2]), "`"), "`"), v[3], nil, false)
		}
	}
	// The key path is named only for a node identified above; the first node on the line gives
	// the position of other messages (a custom unmarshaler's) but may be its enclosing mapping.
	named := e != nil
	if e == nil && len(cands) > 0 {
		e = &cands[0]
	}
	if e == nil {
		// Unknown node: only the line is known, and only when the text is the file's own.
		return Issue{Line: x.fileLine(line), Msg: rest}, nil
	}
	if named && e.path != "" {
		rest = e.path + ": " + rest // the key, as Validate's FieldErrors name it
	}
	return Issue{Line: e.orig.Line, Column: e.orig.Column, Msg: rest}, e.orig
}
