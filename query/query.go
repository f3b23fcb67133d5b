// Package query parses and evaluates Blazar's host property queries, the JSON strings in
// a reservation's hypervisor_properties and resource_properties:
//
//	[">=", "$memory_mb", "4096"]                      a comparison: ==, = (alias), !=, <, <=, >, >=
//	["and", q1, q2, …]                                 all of (Blazar)
//	["or", q1, …], ["not", q], ["in", "$k", [v, …]]    Climate's extensions
//
// Queries nest up to 32 levels. A value is a JSON string (Blazar) or, as an extension, a
// number or boolean, which stands for its JSON text. "", "[]" and "null" match every host.
//
// Values compare as numbers when both sides are decimal numbers (Blazar compares strings,
// so "16" >= "4" is false there), as booleans when both are true/false in any letter case
// (only == and != hold for booleans), and otherwise as byte-wise strings. A host lacking a
// property fails every comparison and "in" on it; "not" negates whatever its operand gives.
package query

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"climate"
)

// maxDepth bounds nesting so a hostile query cannot exhaust the stack.
const maxDepth = 32

// maxEcho bounds how much of the input an error message repeats, in characters.
const maxEcho = 200

// Query is a parsed property query. It is immutable and safe for concurrent use.
// A nil *Query matches everything.
type Query struct {
	root  *node  // nil: match all
	canon string // String(), computed once
}

type op uint8

const (
	opEq op = iota
	opNe
	opLt
	opLe
	opGt
	opGe
	opAnd
	opOr
	opNot
	opIn
)

var opNames = [...]string{opEq: "==", opNe: "!=", opLt: "<", opLe: "<=", opGt: ">", opGe: ">=",
	opAnd: "and", opOr: "or", opNot: "not", opIn: "in"}

const operators = "==, =, !=, <, <=, >, >=, and, or, not, in"

func lookupOp(s string) (op, bool) {
	if s == "=" {
		return opEq, true
	}
	for o, name := range opNames {
		if name == s {
			return op(o), true
		}
	}
	return 0, false
}

type node struct {
	op     op
	name   string  // property name without "$" (comparisons and "in")
	values []value // one for a comparison, one or more for "in"
	kids   []*node // operands of and, or, not
}

// value is a query literal or a host's value with its number and boolean readings.
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

// parseNumber reads s, less surrounding spaces, as a finite decimal number. It checks the
// syntax and magnitude first so that strconv.ParseFloat is not called, and allocates no
// error, for the common non-numeric host value or a huge one such as "1e400". Hexadecimal,
// underscores, Inf and NaN are not numbers.
func parseNumber(s string) (float64, bool) {
	s = strings.TrimSpace(s)
	mag, ok := decimal(s)
	if !ok || mag > 308 { // ≥ 1e309 overflows float64
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) { // err: out of range, 1.8e308 to 1e309
		return 0, false
	}
	return f, true
}

// decimal reports whether s is [+-]digits[.digits][(e|E)[+-]digits], where either side of
// the point may be empty but not both, and if so the power of ten of its leading non-zero
// digit (an arbitrary small number for zero).
func decimal(s string) (mag int, ok bool) {
	const zero = -1 << 40
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	digits, mag := 0, zero
	for ; i < len(s) && '0' <= s[i] && s[i] <= '9'; i++ {
		if mag == zero && s[i] != '0' {
			mag = -i // the leading digit's index; its power is (end of integer part)-1-index
		}
		digits++
	}
	if mag != zero {
		mag += i - 1
	}
	if i < len(s) && s[i] == '.' {
		point := i
		for i++; i < len(s) && '0' <= s[i] && s[i] <= '9'; i++ {
			if mag == zero && s[i] != '0' {
				mag = point - i
			}
			digits++
		}
	}
	if digits == 0 {
		return 0, false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		neg := false
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			neg = s[i] == '-'
			i++
		}
		exp, first := 0, i
		for ; i < len(s) && '0' <= s[i] && s[i] <= '9'; i++ {
			if exp < 1<<20 { // saturate: anything this large is out of range anyway
				exp = exp*10 + int(s[i]-'0')
			}
		}
		if i == first {
			return 0, false
		}
		if neg {
			exp = -exp
		}
		if mag != zero {
			mag += exp
		}
	}
	return mag, i == len(s)
}

func parseBool(s string) (b, ok bool) {
	switch {
	case strings.EqualFold(s, "true"):
		return true, true
	case strings.EqualFold(s, "false"):
		return false, true
	}
	return false, false
}

// Parse parses a query string. "" (after trimming spaces), "[]" and "null" mean "match
// everything". Every error is a *climate.Error with code climate.CodeInvalid whose message
// reads "Malformed requirements <input>: <what is wrong>".
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
	if rest := trimmed[dec.InputOffset():]; strings.TrimSpace(rest) != "" {
		return nil, malformed(s, "unexpected data after the query")
	}
	list, ok := raw.([]any)
	if !ok {
		return nil, malformed(s, "a query must be a JSON list such as [\"==\", \"$name\", \"value\"], got %s", kindOf(raw))
	}
	if len(list) == 0 {
		return &Query{}, nil
	}
	root, err := parseNode(list, 1)
	if err != nil {
		return nil, malformed(s, "%v", err)
	}
	return newQuery(root), nil
}

func malformed(input, format string, args ...any) error {
	if utf8.RuneCountInString(input) > maxEcho {
		input = string([]rune(input)[:maxEcho]) + "…"
	}
	return climate.Errorf(climate.CodeInvalid, "Malformed requirements %s: %s", input, fmt.Sprintf(format, args...))
}

func parseNode(list []any, depth int) (*node, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("queries nest at most %d levels", maxDepth)
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("an empty list is only allowed as the whole query")
	}
	name, ok := list[0].(string)
	if !ok {
		return nil, fmt.Errorf("the first element of %s must be an operator (one of %s)", show(list), operators)
	}
	o, ok := lookupOp(name)
	if !ok {
		return nil, fmt.Errorf("unknown operator %q (expected one of %s)", name, operators)
	}
	switch o {
	case opAnd, opOr, opNot:
		args := list[1:]
		if len(args) == 0 {
			return nil, fmt.Errorf("%q needs at least one operand", name)
		}
		if o == opNot && len(args) != 1 {
			return nil, fmt.Errorf("\"not\" takes exactly one operand, got %d", len(args))
		}
		n := &node{op: o, kids: make([]*node, 0, len(args))}
		for _, a := range args {
			sub, ok := a.([]any)
			if !ok {
				return nil, fmt.Errorf("operands of %q must be queries (lists), got %s", name, show(a))
			}
			kid, err := parseNode(sub, depth+1)
			if err != nil {
				return nil, err
			}
			n.kids = append(n.kids, kid)
		}
		return n, nil
	case opIn:
		if len(list) != 3 {
			return nil, fmt.Errorf("\"in\" takes a property and a list of values: [\"in\", \"$name\", [\"a\", \"b\"]], got %d elements", len(list))
		}
		prop, err := propertyName(list[1])
		if err != nil {
			return nil, err
		}
		items, ok := list[2].([]any)
		if !ok || len(items) == 0 {
			return nil, fmt.Errorf("\"in\" needs a non-empty list of values, got %s", show(list[2]))
		}
		n := &node{op: opIn, name: prop, values: make([]value, 0, len(items))}
		for _, it := range items {
			v, err := literal(name, it)
			if err != nil {
				return nil, err
			}
			n.values = append(n.values, v)
		}
		return n, nil
	}
	if len(list) != 3 {
		return nil, fmt.Errorf("a comparison has three elements [%q, \"$name\", \"value\"], got %d", name, len(list))
	}
	prop, err := propertyName(list[1])
	if err != nil {
		return nil, err
	}
	v, err := literal(name, list[2])
	if err != nil {
		return nil, err
	}
	return &node{op: o, name: prop, values: []value{v}}, nil
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

// literal reads a value of operator opName: a string (Blazar), or a number or boolean
// (extension). Only equality ("==", "=", "!=", "in") accepts the empty string.
func literal(opName string, x any) (value, error) {
	switch v := x.(type) {
	case string:
		if v == "" && opName != "==" && opName != "=" && opName != "!=" && opName != "in" {
			return value{}, fmt.Errorf("%q needs a non-empty value", opName)
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

func kindOf(x any) string {
	switch x.(type) {
	case map[string]any:
		return "an object"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	}
	return show(x)
}

// MatchAll reports whether q matches every host (empty query).
func (q *Query) MatchAll() bool { return q == nil || q.root == nil }

// Properties returns the distinct property names the query references (without the
// "$"), sorted; nil for an empty query.
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
// the host has it. Match itself does not allocate.
func (q *Query) Match(get func(name string) (string, bool)) bool {
	if q.MatchAll() {
		return true
	}
	return q.root.match(get)
}

func (n *node) match(get func(string) (string, bool)) bool {
	switch n.op {
	case opAnd:
		for _, k := range n.kids {
			if !k.match(get) {
				return false
			}
		}
		return true
	case opOr:
		for _, k := range n.kids {
			if k.match(get) {
				return true
			}
		}
		return false
	case opNot:
		return !n.kids[0].match(get)
	}
	text, ok := get(n.name)
	if !ok {
		return false
	}
	have := newValue(text)
	if n.op == opIn {
		for i := range n.values {
			if compare(&have, opEq, &n.values[i]) {
				return true
			}
		}
		return false
	}
	return compare(&have, n.op, &n.values[0])
}

// compare evaluates "have o want" with numeric, then boolean, then string semantics.
func compare(have *value, o op, want *value) bool {
	var c int
	switch {
	case have.isNum && want.isNum:
		c = cmpFloat(have.num, want.num)
	case have.isBool && want.isBool:
		switch o {
		case opEq:
			return have.boolv == want.boolv
		case opNe:
			return have.boolv != want.boolv
		}
		return false
	default:
		c = strings.Compare(have.text, want.text)
	}
	switch o {
	case opEq:
		return c == 0
	case opNe:
		return c != 0
	case opLt:
		return c < 0
	case opLe:
		return c <= 0
	case opGt:
		return c > 0
	case opGe:
		return c >= 0
	}
	return false
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

// And combines queries (nil-safe; empty queries dropped) into one that matches when all
// match. A single remaining query is returned as is; "and" operands are flattened into the
// result. The result may nest one level deeper than its operands.
func And(qs ...*Query) *Query {
	var live []*Query
	for _, q := range qs {
		if !q.MatchAll() {
			live = append(live, q)
		}
	}
	switch len(live) {
	case 0:
		return &Query{}
	case 1:
		return live[0]
	}
	root := &node{op: opAnd}
	for _, q := range live {
		if q.root.op == opAnd {
			root.kids = append(root.kids, q.root.kids...)
		} else {
			root.kids = append(root.kids, q.root)
		}
	}
	return newQuery(root)
}

func newQuery(root *node) *Query {
	var b bytes.Buffer
	root.write(&b)
	return &Query{root: root, canon: b.String()}
}

// String returns a canonical JSON form of the query ("[]" for an empty one): "=" becomes
// "==", values become JSON strings, and elements are separated by ", ". Queries with the
// same String match the same hosts, so it serves to group hosts or cache by query.
func (q *Query) String() string {
	if q.MatchAll() {
		return "[]"
	}
	return q.canon
}

func (n *node) write(b *bytes.Buffer) {
	b.WriteByte('[')
	writeString(b, opNames[n.op])
	switch n.op {
	case opAnd, opOr, opNot:
		for _, k := range n.kids {
			b.WriteString(", ")
			k.write(b)
		}
	case opIn:
		b.WriteString(", ")
		writeString(b, "$"+n.name)
		b.WriteString(", [")
		for i, v := range n.values {
			if i > 0 {
				b.WriteString(", ")
			}
			writeString(b, v.text)
		}
		b.WriteByte(']')
	default:
		b.WriteString(", ")
		writeString(b, "$"+n.name)
		b.WriteString(", ")
		writeString(b, n.values[0].text)
	}
	b.WriteByte(']')
}

// writeString writes s as a JSON string without HTML escaping ("<", not "\u003c").
func writeString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)       // a string always encodes
	b.Truncate(b.Len() - 1) // Encode's trailing newline
}
