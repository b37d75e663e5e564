package config

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// Interpolation rules (applied to scalar values only, never to mapping keys or comments):
//
//	${NAME}          the value of environment variable NAME; an error if NAME is unset
//	                 (set-but-empty yields the empty string)
//	${NAME:-default} NAME's value, or default when NAME is unset or empty (as in sh);
//	                 default is literal text up to the first '}' (no nesting)
//	$${              a literal "${" (the escape); a lone '$' elsewhere is kept as is
//
// NAME must match [A-Za-z_][A-Za-z0-9_]*.
//
// Interpolation works on the parsed YAML tree, not on the file text, so a value taken from the
// environment is always one scalar: a secret containing ": ", "#" or a newline cannot change the
// structure of the document. A plain (unquoted) scalar is re-resolved after expansion, so
// `port: ${PORT}` decodes into an int field; a quoted one stays a string.
//
// Expanded values never appear in error messages (they may be secrets): positions and variable
// names do, and a type error on an interpolated scalar quotes the scalar as written in the file.

// lookupFunc reports the value of an environment variable and whether it is set.
type lookupFunc func(name string) (string, bool)

// problem is one interpolation error: off is the byte offset of its "${" in the scalar's value.
type problem struct {
	off int
	msg string
}

// expand applies the interpolation rules to s. It returns the expanded string and every problem
// found (not just the first). Messages name variables, never their values.
func expand(s string, lookup lookupFunc) (string, []problem) {
	var (
		b        strings.Builder
		problems []problem
	)
	b.Grow(len(s))
	for i := 0; i < len(s); {
		switch {
		case strings.HasPrefix(s[i:], "$${"):
			b.WriteString("${")
			i += 3
		case strings.HasPrefix(s[i:], "${"):
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				problems = append(problems, problem{i, `unterminated "${" (write "$${" for a literal "${")`})
				b.WriteString(s[i:])
				i = len(s)
				continue
			}
			inner := s[i+2 : i+2+end]
			at := i
			i += 2 + end + 1
			name, def, hasDef := strings.Cut(inner, ":-")
			if !validVarName(name) {
				problems = append(problems, problem{at, fmt.Sprintf("invalid environment variable name %q in \"${%s}\" (want [A-Za-z_][A-Za-z0-9_]*)", name, inner)})
				continue
			}
			val, ok := lookup(name)
			switch {
			case hasDef && (!ok || val == ""):
				b.WriteString(def)
			case !ok:
				problems = append(problems, problem{at, fmt.Sprintf("environment variable %s is not set (write ${%s:-default} to give a default)", name, name)})
			default:
				b.WriteString(val)
			}
		default:
			b.WriteByte(s[i])
			i++
		}
	}
	return b.String(), problems
}

// validVarName reports whether name is a portable environment variable name.
func validVarName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '_', 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// interpolator expands the scalar values of a YAML tree in place.
type interpolator struct {
	lookup lookupFunc
	issues []Issue
	// original maps each expanded scalar to its text before expansion, so that error messages can
	// quote the file rather than the (possibly secret) expanded value.
	original map[*yaml.Node]string
	// broken holds the scalars with an interpolation problem: their expanded value is
	// meaningless, so decode errors about them are not reported on top.
	broken map[*yaml.Node]bool
}

// walk expands every scalar value under n. Mapping keys are left alone: interpolating them would
// defeat the unknown-key check. Alias nodes are not followed; their anchor is expanded once where
// it is defined.
func (it *interpolator) walk(n *yaml.Node) {
	if n == nil {
		return
	}
	switch n.Kind {
	case yaml.DocumentNode, yaml.SequenceNode:
		for _, c := range n.Content {
			it.walk(c)
		}
	case yaml.MappingNode:
		for i := 1; i < len(n.Content); i += 2 {
			it.walk(n.Content[i])
		}
	case yaml.ScalarNode:
		if !strings.Contains(n.Value, "${") {
			return
		}
		out, problems := expand(n.Value, it.lookup)
		if len(problems) > 0 {
			if it.broken == nil {
				it.broken = make(map[*yaml.Node]bool)
			}
			it.broken[n] = true
		}
		for _, p := range problems {
			line, col := position(n, p.off)
			it.issues = append(it.issues, Issue{Line: line, Column: col, Msg: p.msg})
		}
		if it.original == nil {
			it.original = make(map[*yaml.Node]string)
		}
		it.original[n] = n.Value
		n.Value = out
		const quoted = yaml.SingleQuotedStyle | yaml.DoubleQuotedStyle | yaml.LiteralStyle | yaml.FoldedStyle
		if n.Style&(quoted|yaml.TaggedStyle) == 0 {
			// A plain scalar: let the decoder resolve the expanded text (int, bool, duration...)
			// exactly as if it had been written in the file.
			n.Tag = ""
			if out == "" {
				// `key: ${UNSET:-}` behaves like `key:` (null keeps the default), not like `key: ""`.
				n.Tag = "!!null"
			}
		}
	}
}

// position returns the file position of byte offset off of scalar n's value, where it can be
// known: exact for a single-line plain scalar (the value is the source text), exact for a
// quoted one without escapes before off, the line (column unknown, 0) inside a literal block
// scalar. Elsewhere (folded or multi-line flow scalars) it is the scalar's start.
func position(n *yaml.Node, off int) (int, int) {
	before := n.Value[:off]
	nl := strings.Count(before, "\n")
	cols := utf8.RuneCountInString(before)
	switch {
	case n.Style&yaml.LiteralStyle != 0:
		return n.Line + 1 + nl, 0
	case nl > 0 || n.Style&yaml.FoldedStyle != 0:
		return n.Line, n.Column
	case n.Style&(yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle) != 0:
		return n.Line, n.Column + 1 + cols
	default:
		return n.Line, n.Column + cols
	}
}
