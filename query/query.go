// Package query parses and evaluates Blazar's host property queries, the JSON strings in
// a reservation's hypervisor_properties and resource_properties:
//
//	[">=", "$memory_mb", "4096"]                      a comparison: ==, = (alias), !=, <, <=, >, >=
//	["and", q1, q2, …]                                 all of (Blazar)
//	["or", q1, …], ["not", q], ["in", "$k", [v, …]]    Climate's extensions; nesting is free
//
// "", "[]" and "null" match every host. Values compare as numbers when both sides are
// numbers (Blazar compares strings, so "16" >= "4" is false there), as booleans when both
// are true/false in any case, and as strings otherwise. A host lacking a property fails
// every comparison on it.
package query

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"climate"
)

// maxDepth bounds nesting so a hostile query cannot exhaust the stack.
const maxDepth = 32

// Query is a parsed property query. A nil *Query matches everything.
type Query struct {
	root *node
}

type kind int

const (
	kindCompare kind = iota
	kindAnd
	kindOr
	kindNot
	kindIn
)

type node struct {
	kind   kind
	op     string // comparison operator, "==" for "="
	name   string // property name, without "$"
	values []value
	kids   []*node
}

// value is a query literal with its number and boolean readings parsed once.
type value struct {
	text   string
	num    float64
	isNum  bool
	boolv  bool
	isBool bool
}

func newValue(s string) value {
	v := value{text: s}
	v.num, v.isNum = parseNumber(s)
	v.boolv, v.isBool = parseBool(s)
	return v
}

func parseNumber(s string) (float64, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

func parseBool(s string) (bool, bool) {
	switch {
	case strings.EqualFold(s, "true"):
		return true, true
	case strings.EqualFold(s, "false"):
		return false, true
	}
	return false, false
}

// Parse parses a query string.
func Parse(s string) (*Query, error) {
	trimmed := strings.TrimSpace(s)
	if trimmed == "" || trimmed == "null" {
		return &Query{}, nil
	}
	dec := json.NewDecoder(strings.NewReader(trimmed))
	dec.UseNumber()
	var raw any
	if err := dec.Decode(&raw); err != nil {
		return nil, malformed(s, "invalid JSON: %v", err)
	}
	if dec.More() {
		return nil, malformed(s, "unexpected data after the query")
	}
	list, ok := raw.([]any)
	if !ok {
		return nil, malformed(s, "a query must be a JSON list such as [\"==\", \"$name\", \"value\"]")
	}
	if len(list) == 0 {
		return &Query{}, nil
	}
	root, err := parseNode(list, 1)
	if err != nil {
		return nil, malformed(s, "%v", err)
	}
	return &Query{root: root}, nil
}

func malformed(input, format string, args ...any) error {
	if r := []rune(input); len(r) > 200 {
		input = string(r[:200]) + "…"
	}
	return climate.Errorf(climate.CodeInvalid, "Malformed requirements %s: %s", input, fmt.Sprintf(format, args...))
}

var comparisons = map[string]string{"==": "==", "=": "==", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}

const operators = "==, =, !=, <, <=, >, >=, and, or, not, in"

func parseNode(list []any, depth int) (*node, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("queries nest at most %d levels", maxDepth)
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("an empty list is only allowed as the whole query")
	}
	op, ok := list[0].(string)
	if !ok {
		return nil, fmt.Errorf("the first element of %s must be an operator (one of %s)", show(list), operators)
	}
	switch op {
	case "and", "or", "not":
		args := list[1:]
		if len(args) == 0 {
			return nil, fmt.Errorf("%q needs at least one operand", op)
		}
		if op == "not" && len(args) != 1 {
			return nil, fmt.Errorf("\"not\" takes exactly one operand, got %d", len(args))
		}
		n := &node{kind: map[string]kind{"and": kindAnd, "or": kindOr, "not": kindNot}[op]}
		for _, a := range args {
			sub, ok := a.([]any)
			if !ok {
				return nil, fmt.Errorf("operands of %q must be queries (lists), got %s", op, show(a))
			}
			kid, err := parseNode(sub, depth+1)
			if err != nil {
				return nil, err
			}
			n.kids = append(n.kids, kid)
		}
		return n, nil
	case "in":
		if len(list) != 3 {
			return nil, fmt.Errorf("\"in\" takes a property and a list of values: [\"in\", \"$name\", [\"a\", \"b\"]]")
		}
		name, err := propertyName(list[1])
		if err != nil {
			return nil, err
		}
		items, ok := list[2].([]any)
		if !ok || len(items) == 0 {
			return nil, fmt.Errorf("\"in\" needs a non-empty list of values, got %s", show(list[2]))
		}
		n := &node{kind: kindIn, name: name}
		for _, it := range items {
			v, err := literal(it, true)
			if err != nil {
				return nil, err
			}
			n.values = append(n.values, v)
		}
		return n, nil
	}
	canon, ok := comparisons[op]
	if !ok {
		return nil, fmt.Errorf("unknown operator %q (expected one of %s)", op, operators)
	}
	if len(list) != 3 {
		return nil, fmt.Errorf("a comparison has three elements [%q, \"$name\", \"value\"], got %d", op, len(list))
	}
	name, err := propertyName(list[1])
	if err != nil {
		return nil, err
	}
	v, err := literal(list[2], canon == "==" || canon == "!=")
	if err != nil {
		return nil, err
	}
	return &node{kind: kindCompare, op: canon, name: name, values: []value{v}}, nil
}

func propertyName(x any) (string, error) {
	s, ok := x.(string)
	if !ok || !strings.HasPrefix(s, "$") {
		return "", fmt.Errorf("property name must start with \"$\", got %s", show(x))
	}
	if len(s) == 1 {
		return "", fmt.Errorf("property name \"$\" is empty")
	}
	return s[1:], nil
}

// literal reads a value: a string (Blazar), or a number or boolean (extension).
func literal(x any, allowEmpty bool) (value, error) {
	switch v := x.(type) {
	case string:
		if v == "" && !allowEmpty {
			return value{}, fmt.Errorf("an ordering comparison needs a non-empty value")
		}
		return newValue(v), nil
	case json.Number:
		return newValue(v.String()), nil
	case bool:
		return newValue(strconv.FormatBool(v)), nil
	}
	return value{}, fmt.Errorf("a value must be a string, number or boolean, got %s", show(x))
}

func show(x any) string {
	b, err := json.Marshal(x)
	if err != nil {
		return fmt.Sprint(x)
	}
	return string(b)
}

// MatchAll reports whether q matches every host.
func (q *Query) MatchAll() bool { return q == nil || q.root == nil }

// Properties returns the distinct property names the query uses (without "$"), sorted.
func (q *Query) Properties() []string {
	if q.MatchAll() {
		return nil
	}
	set := map[string]bool{}
	var walk func(*node)
	walk = func(n *node) {
		if n.name != "" {
			set[n.name] = true
		}
		for _, k := range n.kids {
			walk(k)
		}
	}
	walk(q.root)
	out := make([]string, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// Match evaluates the query against a host; get returns a property's value and whether
// the host has it.
func (q *Query) Match(get func(name string) (string, bool)) bool {
	if q.MatchAll() {
		return true
	}
	return q.root.match(get)
}

func (n *node) match(get func(string) (string, bool)) bool {
	switch n.kind {
	case kindAnd:
		for _, k := range n.kids {
			if !k.match(get) {
				return false
			}
		}
		return true
	case kindOr:
		for _, k := range n.kids {
			if k.match(get) {
				return true
			}
		}
		return false
	case kindNot:
		return !n.kids[0].match(get)
	}
	have, ok := get(n.name)
	if !ok {
		return false
	}
	if n.kind == kindIn {
		for _, v := range n.values {
			if compare(have, "==", v) {
				return true
			}
		}
		return false
	}
	return compare(have, n.op, n.values[0])
}

// compare evaluates "have op want" with numeric, then boolean, then string semantics.
func compare(have, op string, want value) bool {
	if want.isNum {
		if h, ok := parseNumber(have); ok {
			return order(cmpFloat(h, want.num), op)
		}
	}
	if want.isBool {
		if h, ok := parseBool(have); ok {
			switch op {
			case "==":
				return h == want.boolv
			case "!=":
				return h != want.boolv
			}
			return false
		}
	}
	return order(strings.Compare(have, want.text), op)
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func order(c int, op string) bool {
	switch op {
	case "==":
		return c == 0
	case "!=":
		return c != 0
	case "<":
		return c < 0
	case "<=":
		return c <= 0
	case ">":
		return c > 0
	case ">=":
		return c >= 0
	}
	return false
}

// And combines queries into one that matches when all do; nil and empty ones are dropped.
func And(qs ...*Query) *Query {
	var kids []*node
	for _, q := range qs {
		if !q.MatchAll() {
			kids = append(kids, q.root)
		}
	}
	switch len(kids) {
	case 0:
		return &Query{}
	case 1:
		return &Query{root: kids[0]}
	}
	return &Query{root: &node{kind: kindAnd, kids: kids}}
}

// String returns the query's canonical JSON form ("[]" for match-all), usable as a key to
// group or cache by query.
func (q *Query) String() string {
	if q.MatchAll() {
		return "[]"
	}
	var b bytes.Buffer
	q.root.write(&b)
	return b.String()
}

func (n *node) write(b *bytes.Buffer) {
	str := func(s string) {
		// No HTML escaping: the canonical form is meant to be read ("<", not "\u003c").
		var j bytes.Buffer
		enc := json.NewEncoder(&j)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(s)
		b.Write(bytes.TrimSuffix(j.Bytes(), []byte("\n")))
	}
	b.WriteByte('[')
	switch n.kind {
	case kindAnd, kindOr, kindNot:
		str(map[kind]string{kindAnd: "and", kindOr: "or", kindNot: "not"}[n.kind])
		for _, k := range n.kids {
			b.WriteString(", ")
			k.write(b)
		}
	case kindIn:
		str("in")
		b.WriteString(", ")
		str("$" + n.name)
		b.WriteString(", [")
		for i, v := range n.values {
			if i > 0 {
				b.WriteString(", ")
			}
			str(v.text)
		}
		b.WriteByte(']')
	default:
		str(n.op)
		b.WriteString(", ")
		str("$" + n.name)
		b.WriteString(", ")
		str(n.values[0].text)
	}
	b.WriteByte(']')
}
