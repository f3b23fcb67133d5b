package policy

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// The policy language, as oslo.policy's _parser.py reads it: a rule's text is split on
// whitespace; each word loses its leading "(" and trailing ")" (separate tokens); what is
// left is "and", "or" or "not" (any case), a quoted string (which no rule may contain), or
// a check: "@" (always), "!" (never) or KIND:MATCH. "not" binds tighter than "and", and
// "and" tighter than "or" (oslo's greedy reductions amount to that). An empty text always
// passes.
//
// Where oslo.policy logs a rule it cannot understand and denies it, Parse returns an
// error naming the column; and it refuses, rather than fail at the first request, the
// checks oslo would raise on (a MATCH with a "%" other than %(name)s and %%, a KIND that
// is not a Python literal or name) and oslo's external http:/https: checks.

// Error is a rule that does not parse: Pos is the 1-based column (in characters) where
// the problem is.
type Error struct {
	Pos int
	Msg string
}

func (e *Error) Error() string { return fmt.Sprintf("column %d: %s", e.Pos, e.Msg) }

type tokKind int

const (
	tokLParen tokKind = iota
	tokRParen
	tokAnd
	tokOr
	tokNot
	tokString
	tokCheck
)

type token struct {
	kind  tokKind
	pos   int // 1-based column
	text  string
	check Check
}

// isSpace is Python's str.isspace, which the \s of oslo's tokenizer matches: Unicode
// white space and the separators U+001C–U+001F.
func isSpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}

// tokenize splits text as oslo's _parse_tokenize does.
func tokenize(text string) ([]token, error) {
	var toks []token
	runes := []rune(text)
	for i := 0; i < len(runes); {
		if isSpace(runes[i]) {
			i++
			continue
		}
		start := i
		for i < len(runes) && !isSpace(runes[i]) {
			i++
		}
		word := runes[start:i]
		col := start + 1
		j := 0
		for j < len(word) && word[j] == '(' {
			toks = append(toks, token{kind: tokLParen, pos: col + j, text: "("})
			j++
		}
		tok := word[j:]
		if len(tok) == 0 {
			continue
		}
		col += j
		k := len(tok)
		for k > 0 && tok[k-1] == ')' {
			k--
		}
		clean := string(tok[:k])
		switch lowered := strings.ToLower(clean); {
		case lowered == "and":
			toks = append(toks, token{kind: tokAnd, pos: col, text: clean})
		case lowered == "or":
			toks = append(toks, token{kind: tokOr, pos: col, text: clean})
		case lowered == "not":
			toks = append(toks, token{kind: tokNot, pos: col, text: clean})
		case clean == "":
		case len(tok) >= 2 && (tok[0] == '"' || tok[0] == '\'') && tok[len(tok)-1] == tok[0]:
			// oslo tests the word with its trailing parentheses: 'x') is a check, not a string.
			toks = append(toks, token{kind: tokString, pos: col, text: string(tok)})
			k = len(tok) // no trailing parentheses
		default:
			c, err := parseCheck(clean, col)
			if err != nil {
				return nil, err
			}
			toks = append(toks, token{kind: tokCheck, pos: col, text: clean, check: c})
		}
		for m := k; m < len(tok); m++ {
			toks = append(toks, token{kind: tokRParen, pos: col + m, text: ")"})
		}
	}
	return toks, nil
}

// Parse parses a rule written in oslo.policy's language.
func Parse(text string) (Check, error) {
	if text == "" {
		return trueCheck{}, nil
	}
	toks, err := tokenize(text)
	if err != nil {
		return nil, err
	}
	if len(toks) == 0 {
		return nil, &Error{Pos: 1, Msg: "the rule is blank (write \"\" or @ to allow everyone)"}
	}
	p := &parser{toks: toks, end: len([]rune(text)) + 1}
	c, err := p.or()
	if err != nil {
		return nil, err
	}
	if p.i < len(p.toks) {
		t := p.toks[p.i]
		if t.kind == tokRParen {
			return nil, &Error{Pos: t.pos, Msg: "')' without a '(' before it"}
		}
		return nil, &Error{Pos: t.pos, Msg: fmt.Sprintf("expected 'and', 'or' or the end of the rule, found %s", describe(t))}
	}
	return c, nil
}

type parser struct {
	toks []token
	i    int
	end  int // column just after the text
}

func describe(t token) string {
	switch t.kind {
	case tokString:
		return "the quoted string " + t.text + " (a check is KIND:MATCH)"
	case tokCheck:
		return "the check " + strconv.Quote(t.text)
	}
	return "'" + t.text + "'"
}

func (p *parser) peek() (token, bool) {
	if p.i < len(p.toks) {
		return p.toks[p.i], true
	}
	return token{}, false
}

// or := and ("or" and)*
func (p *parser) or() (Check, error) {
	return p.chain(tokOr, p.and, func(cs []Check) Check { return orCheck(cs) })
}

// and := unary ("and" unary)*
func (p *parser) and() (Check, error) {
	return p.chain(tokAnd, p.unary, func(cs []Check) Check { return andCheck(cs) })
}

// chain parses operand (op operand)*: one operand alone, or join of them all.
func (p *parser) chain(op tokKind, operand func() (Check, error), join func([]Check) Check) (Check, error) {
	c, err := operand()
	if err != nil {
		return nil, err
	}
	rules := []Check{c}
	for {
		t, ok := p.peek()
		if !ok || t.kind != op {
			break
		}
		p.i++
		d, err := operand()
		if err != nil {
			return nil, err
		}
		rules = append(rules, d)
	}
	if len(rules) == 1 {
		return c, nil
	}
	return join(rules), nil
}

// unary := "not" unary | "(" or ")" | check
func (p *parser) unary() (Check, error) {
	t, ok := p.peek()
	if !ok {
		prev := p.toks[len(p.toks)-1]
		return nil, &Error{Pos: p.end, Msg: fmt.Sprintf("the rule ends after %s: expected a check, '(' or 'not'", describe(prev))}
	}
	p.i++
	switch t.kind {
	case tokNot:
		c, err := p.unary()
		if err != nil {
			return nil, err
		}
		return notCheck{c}, nil
	case tokLParen:
		c, err := p.or()
		if err != nil {
			return nil, err
		}
		u, ok := p.peek()
		if !ok {
			return nil, &Error{Pos: t.pos, Msg: "this '(' is never closed"}
		}
		if u.kind != tokRParen {
			return nil, &Error{Pos: u.pos, Msg: fmt.Sprintf("expected 'and', 'or' or ')', found %s", describe(u))}
		}
		p.i++
		return c, nil
	case tokCheck:
		return t.check, nil
	}
	return nil, &Error{Pos: t.pos, Msg: fmt.Sprintf("expected a check, '(' or 'not', found %s", describe(t))}
}

// parseCheck parses one check, as oslo's _parse_check: "!", "@", or KIND:MATCH split at
// the first colon, KIND being rule, role, or anything else (a generic check).
func parseCheck(s string, col int) (Check, error) {
	switch s {
	case "!":
		return falseCheck{}, nil
	case "@":
		return trueCheck{}, nil
	}
	kind, match, ok := strings.Cut(s, ":")
	if !ok {
		return nil, &Error{Pos: col, Msg: fmt.Sprintf("%q is not a check: expected KIND:MATCH, @ or !", s)}
	}
	switch kind {
	case "rule":
		return ruleCheck{name: match}, nil
	case "http", "https":
		return nil, &Error{Pos: col, Msg: fmt.Sprintf("%q: oslo.policy's external %s: checks (a request to a URL) are not supported", s, kind)}
	}
	m, err := parseMatch(match)
	if err != nil {
		return nil, &Error{Pos: col + len([]rune(kind)) + 1, Msg: fmt.Sprintf("%q: %v", s, err)}
	}
	if kind == "role" {
		return roleCheck{match: m}, nil
	}
	g, err := newGenericCheck(kind, m)
	if err != nil {
		return nil, &Error{Pos: col, Msg: fmt.Sprintf("%q: %v", s, err)}
	}
	return g, nil
}

// matchPart is a literal (key == "") or a %(key)s substitution.
type matchPart struct {
	lit, key string
	subst    bool
}

// match is a check's right side, formatted with the target as Python's "match % target".
type match struct {
	raw   string
	parts []matchPart
}

// parseMatch reads Python %-formatting with a mapping: %(name)s substitutions and %%.
// Other conversions, which Blazar's rules never use, are refused rather than imitated.
func parseMatch(s string) (match, error) {
	m := match{raw: s}
	var lit strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			lit.WriteByte(s[i])
			continue
		}
		switch {
		case i+1 < len(s) && s[i+1] == '%':
			lit.WriteByte('%')
			i++
		case i+1 < len(s) && s[i+1] == '(':
			// Python reads the key up to the matching ')', counting nested parentheses.
			depth, j := 1, i+2
			for ; j < len(s) && depth > 0; j++ {
				switch s[j] {
				case '(':
					depth++
				case ')':
					depth--
				}
			}
			if depth > 0 {
				return match{}, fmt.Errorf("%%( without its closing ) (write %%(name)s)")
			}
			key := s[i+2 : j-1]
			if j >= len(s) || s[j] != 's' {
				return match{}, fmt.Errorf("%%(%s) must be followed by s (only %%(name)s substitutions are supported)", key)
			}
			if lit.Len() > 0 {
				m.parts = append(m.parts, matchPart{lit: lit.String()})
				lit.Reset()
			}
			m.parts = append(m.parts, matchPart{key: key, subst: true})
			i = j
		default:
			return match{}, fmt.Errorf("a %% that is neither %%(name)s nor %%%% (Python would fail on it)")
		}
	}
	if lit.Len() > 0 || len(m.parts) == 0 {
		m.parts = append(m.parts, matchPart{lit: lit.String()})
	}
	return m, nil
}

// format substitutes the target's attributes; ok is false when one is missing (oslo's
// KeyError, which makes the check false).
func (m match) format(target map[string]any) (string, bool) {
	if len(m.parts) == 1 && !m.parts[0].subst {
		return m.parts[0].lit, true
	}
	var b strings.Builder
	for _, p := range m.parts {
		if !p.subst {
			b.WriteString(p.lit)
			continue
		}
		v, ok := target[p.key]
		if !ok {
			return "", false
		}
		b.WriteString(pyStr(v))
	}
	return b.String(), true
}

// pythonKeywords are the names Python cannot parse as an expression (True, False and
// None are literals).
var pythonKeywords = map[string]bool{
	"and": true, "as": true, "assert": true, "async": true, "await": true, "break": true,
	"class": true, "continue": true, "def": true, "del": true, "elif": true, "else": true,
	"except": true, "finally": true, "for": true, "from": true, "global": true, "if": true,
	"import": true, "in": true, "is": true, "lambda": true, "nonlocal": true, "not": true,
	"or": true, "pass": true, "raise": true, "return": true, "try": true, "while": true,
	"with": true, "yield": true, "True": true, "False": true, "None": true,
}

// newGenericCheck classifies KIND as oslo's GenericCheck does with ast.literal_eval: a
// Python literal is compared (as str()) with MATCH; otherwise KIND is a dotted path into
// the credentials. Supported literals: 'text' and "text" without backslashes, True,
// False, None and decimal integers; paths: dotted Python names. Anything else (Python
// would raise, or evaluate an expression as a path) is refused.
func newGenericCheck(kind string, m match) (Check, error) {
	switch {
	case kind == "":
		return nil, fmt.Errorf("empty KIND before the colon")
	case kind == "True" || kind == "False" || kind == "None":
		return genericCheck{kind: kind, literal: true, value: kind, match: m}, nil
	case len(kind) >= 2 && (kind[0] == '\'' || kind[0] == '"'):
		q := kind[0]
		body := kind[1 : len(kind)-1]
		if kind[len(kind)-1] != q || strings.ContainsRune(body, rune(q)) || strings.ContainsRune(body, '\\') {
			return nil, fmt.Errorf("KIND %s: only simple quoted literals ('text' or \"text\", no backslash) are supported", kind)
		}
		return genericCheck{kind: kind, literal: true, value: body, match: m}, nil
	}
	if v, ok := pyInt(kind); ok {
		return genericCheck{kind: kind, literal: true, value: v, match: m}, nil
	}
	path := strings.Split(kind, ".")
	for _, seg := range path {
		if !isIdent(seg) || pythonKeywords[seg] {
			return nil, fmt.Errorf("KIND %q is neither a credential name (a dotted Python name such as project_id) nor a literal ('text', True, 42)", kind)
		}
	}
	return genericCheck{kind: kind, path: path, match: m}, nil
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if !(r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (i > 0 && r >= '0' && r <= '9')) {
			return false
		}
	}
	return true
}

// pyInt reads a Python decimal integer literal, optionally signed ("007" is a syntax error
// in Python 3, "000" is 0; underscores may separate digits), and returns str() of it.
func pyInt(s string) (string, bool) {
	neg := false
	if s != "" && (s[0] == '-' || s[0] == '+') {
		neg = s[0] == '-'
		s = s[1:]
	}
	if s == "" || s[0] == '_' || s[len(s)-1] == '_' || strings.Contains(s, "__") {
		return "", false
	}
	digits := strings.ReplaceAll(s, "_", "")
	for _, r := range digits {
		if r < '0' || r > '9' {
			return "", false
		}
	}
	trimmed := strings.TrimLeft(digits, "0")
	if trimmed == "" {
		return "0", true
	}
	if len(trimmed) != len(digits) {
		return "", false // leading zeros
	}
	if neg {
		return "-" + trimmed, true
	}
	return trimmed, true
}

// ParseList parses oslo.policy's legacy list-of-lists form: the outer list is an "or" of
// its inner lists, each an "and" of single checks (a bare string stands for a list of
// one); an empty list always passes; a list of only empty lists never does.
func ParseList(rule []any) (Check, error) {
	if len(rule) == 0 {
		return trueCheck{}, nil
	}
	var ors []Check
	for i, inner := range rule {
		var items []any
		switch v := inner.(type) {
		case string:
			items = []any{v}
		case []any:
			items = v
		default:
			return nil, fmt.Errorf("item %d: expected a list of checks or a check, found %v", i+1, inner)
		}
		if len(items) == 0 {
			continue
		}
		var ands []Check
		for j, it := range items {
			s, ok := it.(string)
			if !ok {
				return nil, fmt.Errorf("item %d.%d: expected a check (a string), found %v", i+1, j+1, it)
			}
			c, err := parseCheck(s, 1)
			if err != nil {
				return nil, fmt.Errorf("item %d.%d: %v", i+1, j+1, err.(*Error).Msg)
			}
			ands = append(ands, c)
		}
		if len(ands) == 1 {
			ors = append(ors, ands[0])
		} else {
			ors = append(ors, andCheck(ands))
		}
	}
	switch len(ors) {
	case 0:
		return falseCheck{}, nil
	case 1:
		return ors[0], nil
	}
	return orCheck(ors), nil
}
