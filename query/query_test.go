package query

import (
	"errors"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"climate"
)

func host(props map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) { v, ok := props[name]; return v, ok }
}

var sample = host(map[string]string{
	"memory_mb": "131072", "vcpus": "16", "gpu": "True", "site": "uc", "node_type": "compute_icelake",
	"hypervisor_hostname": "compute-00001", "ratio": "1.5", "label": "with space", "empty": "",
	"padded": " 8 ", "hex": "0x10", "inf": "Inf", "nan": "NaN", "huge": "1e400", "pci": "0x10de",
	"neg": "-3", "mem_float": "4096.0",
})

func TestMatch(t *testing.T) {
	cases := []struct {
		q    string
		want bool
	}{
		// Empty queries match everything.
		{``, true},
		{`  `, true},
		{`[]`, true},
		{` [ ] `, true},
		{`null`, true},

		// Blazar's examples.
		{`[">=", "$memory_mb", "4096"]`, true},
		{`["and", ["==", "$gpu", "True"], ["==", "$site", "uc"]]`, true},
		{`["and", ["==", "$gpu", "True"], ["==", "$site", "tacc"]]`, false},

		// Numbers compare numerically (Blazar's string compare says "16" >= "4" is false).
		{`[">=", "$vcpus", "4"]`, true},
		{`["<", "$vcpus", "4"]`, false},
		{`[">", "$vcpus", "9"]`, true},
		{`["<=", "$vcpus", "16"]`, true},
		{`["<", "$vcpus", "16"]`, false},
		{`["==", "$vcpus", "16.0"]`, true},
		{`["==", "$vcpus", "1.6e1"]`, true},
		{`["==", "$mem_float", "4096"]`, true},
		{`["==", "$vcpus", 16]`, true},
		{`["==", "$vcpus", 16.5]`, false},
		{`["!=", "$vcpus", "16.0"]`, false},
		{`["<", "$neg", "-2"]`, true},
		{`["<", "$ratio", "2"]`, true},
		{`["==", "$padded", "8"]`, true},    // spaces around numbers are ignored
		{`["==", "$vcpus", " 16 "]`, true},  // on both sides
		{`[">", "$padded", "10"]`, false},   // numerically 8 < 10 (as strings " 8 " > "10")
		{`["==", "$hex", "16"]`, false},     // hexadecimal is not a number: string compare
		{`["==", "$hex", "0x10"]`, true},    // but equal as a string
		{`["==", "$inf", "Inf"]`, true},     // Inf is not a number: string compare
		{`[">", "$inf", "1"]`, true},        // "Inf" > "1" byte-wise
		{`["==", "$nan", "NaN"]`, true},     // NaN is not a number: string compare
		{`["==", "$huge", "1e400"]`, true},  // out of range: string compare
		{`[">", "$huge", "2"]`, false},      // "1e400" < "2" byte-wise
		{`["==", "$pci", "0x10DE"]`, false}, // strings are case-sensitive
		{`[">", "$node_type", "10"]`, true}, // numeric literal, non-numeric host: string compare
		{`["<", "$vcpus", "abc"]`, true},    // "16" < "abc" byte-wise
		{`["==", "$vcpus", "16 cores"]`, false},

		// Booleans compare case-insensitively; only == and != hold.
		{`["==", "$gpu", "true"]`, true},
		{`["==", "$gpu", "TRUE"]`, true},
		{`["==", "$gpu", true]`, true},
		{`["==", "$gpu", false]`, false},
		{`["!=", "$gpu", "false"]`, true},
		{`["!=", "$gpu", "true"]`, false},
		{`[">", "$gpu", "false"]`, false},
		{`[">=", "$gpu", "true"]`, false},
		{`["<", "$gpu", "truf"]`, true}, // not a boolean literal: string compare "True" < "truf"

		// Strings compare byte-wise and case-sensitively.
		{`["=", "$site", "uc"]`, true},
		{`["==", "$site", "UC"]`, false},
		{`["!=", "$site", "uc"]`, false},
		{`["!=", "$site", "tacc"]`, true},
		{`[">", "$node_type", "compute_a"]`, true},
		{`["<", "$node_type", "compute_a"]`, false},
		{`[">=", "$site", "uc"]`, true},
		{`["==", "$label", "with space"]`, true},
		{`["==", "$empty", ""]`, true},
		{`["!=", "$empty", ""]`, false},
		{`["!=", "$site", ""]`, true},

		// A host lacking the property fails every comparison on it.
		{`["==", "$missing", "x"]`, false},
		{`["!=", "$missing", "x"]`, false},
		{`["<", "$missing", "1"]`, false},
		{`["==", "$missing", ""]`, false},
		{`["in", "$missing", ["x", ""]]`, false},
		{`["not", ["==", "$missing", "x"]]`, true},
		{`["not", ["!=", "$missing", "x"]]`, true},

		// and / or / not / in, nested.
		{`["and", ["==", "$site", "uc"]]`, true},
		{`["and", ["==", "$site", "uc"], ["==", "$missing", "x"]]`, false},
		{`["or", ["==", "$site", "tacc"]]`, false},
		{`["or", ["==", "$site", "tacc"], ["<", "$ratio", "2"]]`, true},
		{`["or", ["==", "$site", "tacc"], [">", "$ratio", "2"]]`, false},
		{`["not", ["==", "$site", "uc"]]`, false},
		{`["not", ["not", ["==", "$site", "uc"]]]`, true},
		{`["in", "$node_type", ["compute_skylake", "compute_icelake"]]`, true},
		{`["in", "$node_type", ["gpu_v100"]]`, false},
		{`["in", "$vcpus", [8, 16]]`, true},
		{`["in", "$vcpus", ["16.0"]]`, true},
		{`["in", "$gpu", [false, "true"]]`, true},
		{`["in", "$gpu", [false]]`, false},
		{`["in", "$empty", [""]]`, true},
		{`["and", ["or", ["not", ["==", "$site", "tacc"]]], ["in", "$site", ["uc"]]]`, true},
		{`["or", ["and", [">=", "$vcpus", 32], ["==", "$gpu", true]], ["and", [">=", "$memory_mb", 131072], ["not", ["in", "$site", ["tacc"]]]]]`, true},
	}
	for _, tc := range cases {
		q, err := Parse(tc.q)
		if err != nil {
			t.Errorf("Parse(%s): %v", tc.q, err)
			continue
		}
		if got := q.Match(sample); got != tc.want {
			t.Errorf("%s → %v, want %v", tc.q, got, tc.want)
		}
	}
}

func TestParse(t *testing.T) {
	cases := []struct{ q, canon string }{
		{``, `[]`},
		{`null`, `[]`},
		{"\n[]\t", `[]`},
		{`["=", "$a", "1"]`, `["==", "$a", "1"]`},
		{`["!=","$a","x y"]`, `["!=", "$a", "x y"]`},
		{`["<", "$a", 1.50]`, `["<", "$a", "1.50"]`},
		{`["<=", "$a", -2e3]`, `["<=", "$a", "-2e3"]`},
		{`[">", "$a", true]`, `[">", "$a", "true"]`},
		{`[">=", "$a b", "<&>"]`, `[">=", "$a b", "<&>"]`},
		{`["==", "$a", "quote\" and \\ and \u00e9"]`, `["==", "$a", "quote\" and \\ and é"]`},
		{`["==", "$a", ""]`, `["==", "$a", ""]`},
		{`["in", "$a", ["x", 2, false, ""]]`, `["in", "$a", ["x", "2", "false", ""]]`},
		{`["and", ["==", "$a", "1"]]`, `["and", ["==", "$a", "1"]]`},
		{`["or", ["==", "$a", "1"], ["not", ["==", "$b", "2"]]]`, `["or", ["==", "$a", "1"], ["not", ["==", "$b", "2"]]]`},
		{nested(maxDepth), nestedCanon(maxDepth)},
	}
	for _, tc := range cases {
		q, err := Parse(tc.q)
		if err != nil {
			t.Errorf("Parse(%s): %v", tc.q, err)
			continue
		}
		if q.String() != tc.canon {
			t.Errorf("Parse(%s).String() = %s, want %s", tc.q, q.String(), tc.canon)
		}
		if q.MatchAll() != (tc.canon == "[]") {
			t.Errorf("Parse(%s).MatchAll() = %v", tc.q, q.MatchAll())
		}
	}
}

// nested returns a query of depth d: d-1 "not"s around a comparison.
func nested(d int) string {
	return strings.Repeat(`["not", `, d-1) + `["==", "$a", "1"]` + strings.Repeat("]", d-1)
}

func nestedCanon(d int) string { return nested(d) }

func TestParseErrors(t *testing.T) {
	cases := []struct{ q, text string }{
		{`{"a": 1}`, "must be a JSON list such as"},
		{`"x"`, "must be a JSON list"},
		{`42`, "must be a JSON list"},
		{`true`, "must be a JSON list"},
		{`[`, "invalid JSON: "},
		{`["==", "$a", "1"`, "invalid JSON: "},
		{`["==", "$a", '1']`, "invalid JSON: "},
		{`["==", "$a", "1"] x`, "unexpected data after the query"},
		{`["==", "$a", "1"]]`, "unexpected data after the query"},
		{`["==", "$a", "1"]}`, "unexpected data after the query"},
		{`["==", "$a", "1"],`, "unexpected data after the query"},
		{`["==", "$a", "1"] ["==", "$b", "1"]`, "unexpected data after the query"},
		{`[] []`, "unexpected data after the query"},
		{`["~", "$a", "1"]`, `unknown operator "~" (expected one of ==, =, !=, <, <=, >, >=, and, or, not, in)`},
		{`["AND", ["==", "$a", "1"]]`, `unknown operator "AND"`},
		{`["eq", "$a", "1"]`, `unknown operator "eq"`},
		{`["==", "a", "1"]`, `property name must start with "$"`},
		{`["==", 5, "1"]`, `property name must start with "$"`},
		{`["==", null, "1"]`, `property name must start with "$"`},
		{`["in", "a", ["1"]]`, `property name must start with "$"`},
		{`["==", "$", "1"]`, `property name "$" is empty`},
		{`["==", "$a"]`, "a comparison has three elements"},
		{`["==", "$a", "1", "2"]`, "a comparison has three elements"},
		{`["=="]`, "a comparison has three elements"},
		{`[">=", "$a", ""]`, `">=" needs a non-empty value`},
		{`["<", "$a", ""]`, `"<" needs a non-empty value`},
		{`["==", "$a", {"x": 1}]`, "must be a string, number or boolean"},
		{`["==", "$a", null]`, "must be a string, number or boolean"},
		{`["==", "$a", ["1"]]`, "must be a string, number or boolean"},
		{`["and"]`, `"and" needs at least one operand`},
		{`["or"]`, `"or" needs at least one operand`},
		{`["not"]`, `"not" needs at least one operand`},
		{`["and", "x"]`, `operands of "and" must be queries`},
		{`["or", ["==", "$a", "1"], 3]`, `operands of "or" must be queries`},
		{`["not", ["==", "$a", "1"], ["==", "$a", "2"]]`, `"not" takes exactly one operand, got 2`},
		{`["and", []]`, "an empty list is only allowed as the whole query"},
		{`["and", ["==", "$a", "1"], ["~", "$b", "2"]]`, `unknown operator "~"`},
		{`["in", "$a", []]`, `"in" needs a non-empty list`},
		{`["in", "$a", "x"]`, `"in" needs a non-empty list`},
		{`["in", "$a"]`, `"in" takes a property and a list of values`},
		{`["in", "$a", ["x"], ["y"]]`, `"in" takes a property and a list of values`},
		{`["in", "$a", [null]]`, "must be a string, number or boolean"},
		{`["in", "$a", [["x"]]]`, "must be a string, number or boolean"},
		{`[1, 2]`, "must be an operator"},
		{`[[]]`, "must be an operator"},
		{`[["==", "$a", "1"]]`, "must be an operator"},
		{nested(maxDepth + 1), "nest at most 32 levels"},
		{strings.Repeat("[", 100000), "invalid JSON: "},
	}
	for _, tc := range cases {
		_, err := Parse(tc.q)
		if err == nil {
			t.Errorf("Parse(%.60s) succeeded", tc.q)
			continue
		}
		var ce *climate.Error
		if !errors.As(err, &ce) || ce.Code != climate.CodeInvalid {
			t.Errorf("Parse(%.60s) = %#v, want a *climate.Error with code invalid", tc.q, err)
			continue
		}
		msg := err.Error()
		if len(tc.q) <= maxEcho && !strings.HasPrefix(msg, "Malformed requirements "+tc.q+": ") {
			t.Errorf("Parse(%s) = %q, want it to start with the echoed input", tc.q, msg)
		}
		if !strings.HasPrefix(msg, "Malformed requirements ") || !strings.Contains(msg, tc.text) {
			t.Errorf("Parse(%.60s) = %q, want it to contain %q", tc.q, msg, tc.text)
		}
	}
}

func TestErrorEchoIsBounded(t *testing.T) {
	long := `["~", "$a", "` + strings.Repeat("é", 500) + `"]`
	_, err := Parse(long)
	if err == nil {
		t.Fatal("Parse succeeded")
	}
	msg := err.Error()
	echo := strings.TrimPrefix(msg, "Malformed requirements ")
	echo = echo[:strings.Index(echo, "…: ")]
	if n := utf8.RuneCountInString(echo); n != maxEcho {
		t.Errorf("echo is %d characters, want %d", n, maxEcho)
	}
	if !strings.HasPrefix(long, echo) || !utf8.ValidString(msg) {
		t.Errorf("echo is not a valid prefix of the input: %q", echo)
	}
	if !strings.Contains(msg, `unknown operator "~"`) {
		t.Errorf("message lost the reason: %q", msg)
	}
}

func TestProperties(t *testing.T) {
	cases := []struct{ q, want string }{
		{``, ""},
		{`["==", "$a", "1"]`, "a"},
		{`["and", ["=", "$b", 1], ["or", ["in", "$a", ["x", true]], ["not", [">", "$b", "2"]]]]`, "a,b"},
		{`["or", ["==", "$z", "1"], ["==", "$memory_mb", "1"], ["==", "$a b", "1"], ["==", "$z", "2"]]`, "a b,memory_mb,z"},
	}
	for _, tc := range cases {
		q, err := Parse(tc.q)
		if err != nil {
			t.Fatalf("Parse(%s): %v", tc.q, err)
		}
		if got := strings.Join(q.Properties(), ","); got != tc.want {
			t.Errorf("Parse(%s).Properties() = %s, want %s", tc.q, got, tc.want)
		}
	}
	empty, _ := Parse("")
	if empty.Properties() != nil {
		t.Error("an empty query has properties")
	}
	var nilQ *Query
	if nilQ.Properties() != nil {
		t.Error("a nil query has properties")
	}
}

func TestStringRoundTrip(t *testing.T) {
	q, err := Parse(`["and", ["=", "$b", 1], ["or", ["in", "$a", ["x", true]], ["not", [">", "$b", "2"]]]]`)
	if err != nil {
		t.Fatal(err)
	}
	want := `["and", ["==", "$b", "1"], ["or", ["in", "$a", ["x", "true"]], ["not", [">", "$b", "2"]]]]`
	if q.String() != want {
		t.Fatalf("String = %s\nwant     %s", q.String(), want)
	}
	again, err := Parse(q.String())
	if err != nil || again.String() != want {
		t.Fatalf("round trip: %v %s", err, again)
	}
	for _, h := range []map[string]string{{"a": "x", "b": "1"}, {"a": "TRUE", "b": "1.0"}, {"a": "y", "b": "1"}, {}} {
		if q.Match(host(h)) != again.Match(host(h)) {
			t.Errorf("%v: the query and its String disagree", h)
		}
	}
}

func TestNilAndEmpty(t *testing.T) {
	var nilQ *Query
	if !nilQ.MatchAll() || !nilQ.Match(sample) || !nilQ.Match(host(nil)) || nilQ.String() != "[]" {
		t.Error("a nil query must match everything")
	}
	empty, _ := Parse("[]")
	if !empty.MatchAll() || !empty.Match(host(nil)) || empty.String() != "[]" {
		t.Error("an empty query must match everything")
	}
	q, _ := Parse(`["not", ["==", "$missing", "x"]]`)
	if q.MatchAll() {
		t.Error("a query that happens to match everything is not MatchAll")
	}
}

func TestAnd(t *testing.T) {
	a, _ := Parse(`["==", "$site", "uc"]`)
	b, _ := Parse(`[">", "$vcpus", "32"]`)
	c, _ := Parse(`["and", ["==", "$gpu", true], [">=", "$memory_mb", 4096]]`)
	empty, _ := Parse("")
	cases := []struct {
		name  string
		q     *Query
		canon string
		match bool
	}{
		{"none", And(), `[]`, true},
		{"nil and empty", And(nil, empty), `[]`, true},
		{"one", And(nil, a, empty), a.String(), true},
		{"two", And(a, b), `["and", ["==", "$site", "uc"], [">", "$vcpus", "32"]]`, false},
		{"flattened", And(a, c), `["and", ["==", "$site", "uc"], ["==", "$gpu", "true"], [">=", "$memory_mb", "4096"]]`, true},
		{"nested And", And(And(a, c), b), `["and", ["==", "$site", "uc"], ["==", "$gpu", "true"], [">=", "$memory_mb", "4096"], [">", "$vcpus", "32"]]`, false},
	}
	for _, tc := range cases {
		if tc.q == nil {
			t.Errorf("%s: And returned nil", tc.name)
			continue
		}
		if tc.q.String() != tc.canon {
			t.Errorf("%s: String = %s, want %s", tc.name, tc.q.String(), tc.canon)
		}
		if got := tc.q.Match(sample); got != tc.match {
			t.Errorf("%s: Match = %v, want %v", tc.name, got, tc.match)
		}
		if again, err := Parse(tc.q.String()); err != nil || again.String() != tc.canon {
			t.Errorf("%s: round trip: %v", tc.name, err)
		}
	}
	if got := strings.Join(And(a, b, c).Properties(), ","); got != "gpu,memory_mb,site,vcpus" {
		t.Errorf("And(a, b, c).Properties() = %s", got)
	}
	if a.String() != `["==", "$site", "uc"]` || c.String() != `["and", ["==", "$gpu", "true"], [">=", "$memory_mb", "4096"]]` {
		t.Error("And modified its operands")
	}
}

// decimalSyntax is the reference for which strings are numbers.
var decimalSyntax = regexp.MustCompile(`^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$`)

// checkNumber compares parseNumber(s) with the reference: the decimal syntax, then
// strconv.ParseFloat without error and finite.
func checkNumber(t *testing.T, s string) {
	t.Helper()
	f, ok := parseNumber(s)
	trimmed := strings.TrimSpace(s)
	want, err := strconv.ParseFloat(trimmed, 64)
	wantOK := decimalSyntax.MatchString(trimmed) && err == nil && !math.IsInf(want, 0)
	if ok != wantOK || ok && f != want {
		t.Errorf("parseNumber(%q) = %v, %v; want %v, %v", s, f, ok, want, wantOK)
	}
}

func TestNumbers(t *testing.T) {
	for _, s := range []string{
		"0", "-0", "+0", "16", " 16 ", "\t-3\n", "1.5", ".5", "5.", "-.5", "+5.", "1e3", "1E+3", "1e-3",
		"0.000123", "00012", "1e400", "1e-400", "1.7976931348623157e308", "1.8e308", "9.99e308",
		"0.0001e312", "100000e304", "10000e304", "0e99999999999999999999", "1e99999999999999999999",
		"1e-99999999999999999999", strings.Repeat("9", 308), strings.Repeat("9", 309), strings.Repeat("9", 310),
		"0." + strings.Repeat("0", 400) + "1e400", "0." + strings.Repeat("0", 400) + "1e700",
		"", " ", ".", "-", "+", "e3", "1e", "1e+", "1.2.3", "--1", "1-", "0x10", "0x1p4", "1_000", "Inf",
		"-Infinity", "NaN", "nan", "1 2", "16 cores", "1,5", "١٢", "\u00a016",
	} {
		checkNumber(t, s)
	}
}

func TestMatchDoesNotAllocate(t *testing.T) {
	queries := []string{
		`["and", [">=", "$memory_mb", "131072"], ["==", "$node_type", "compute_icelake"], ["in", "$gpu", ["true"]]]`,
		`[">=", "$node_type", "4"]`,           // numeric literal, non-numeric host value
		`["==", "$huge", "1"]`,                // "1e400": syntactically a number, out of range
		`["in", "$pci", [1, "x", true, 2.5]]`, // hex-looking host value
		`["or", ["not", ["==", "$missing", true]], ["<", "$ratio", "1e3"]]`,
	}
	for _, s := range queries {
		q, err := Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		// sample does not allocate: it only reads a map.
		if n := testing.AllocsPerRun(100, func() { q.Match(sample) }); n != 0 {
			t.Errorf("Match(%s) allocates %.0f times per call", s, n)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		``, `[]`, `null`, `[">=", "$memory_mb", "4096"]`, `["and", ["==", "$gpu", "True"], ["==", "$site", "uc"]]`,
		`["or", ["not", ["in", "$a", [1, "b", true]]]]`, `["==", "$a", ""]`, `[1]`, `{"a":1}`, `["=", "$x y", "1 2"]`,
		`["<", "$a", "\u003c\u2028\ud800"]`, `["==", "$a", -0.0e-0]`, `["==", "$a", "1"]]`, `["!=", "$b", "NaN"]`,
		`["in", "$x y", ["", " 1 ", false]]`, "[\"==\", \"$\xff\", \"\xfe\"]", nested(maxDepth), nested(maxDepth + 1),
	} {
		f.Add(s)
	}
	hosts := []func(string) (string, bool){
		sample,
		host(nil),
		host(map[string]string{"a": "", "x y": "1e400", "b": "NaN", "memory_mb": "4096.0", "gpu": "TRUE"}),
		host(map[string]string{"a": " -0 ", "x y": "1 2", "b": "false", "site": "uc", "\ufffd": "\ufffd"}),
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkNumber(t, s)
		q, err := Parse(s)
		if err != nil {
			var ce *climate.Error
			if !errors.As(err, &ce) || ce.Code != climate.CodeInvalid || !strings.HasPrefix(ce.Message, "Malformed requirements ") {
				t.Fatalf("Parse(%q) error is not a Malformed requirements *climate.Error: %#v", s, err)
			}
			return
		}
		again, err := Parse(q.String())
		if err != nil {
			t.Fatalf("Parse(%q).String() = %s does not parse: %v", s, q.String(), err)
		}
		if again.String() != q.String() {
			t.Fatalf("String not canonical: %s vs %s", q.String(), again.String())
		}
		if strings.Join(q.Properties(), "\x00") != strings.Join(again.Properties(), "\x00") {
			t.Fatalf("%s and its canonical form use different properties", s)
		}
		for _, h := range hosts {
			if q.Match(h) != again.Match(h) {
				t.Fatalf("%s and its canonical form disagree", s)
			}
		}
		if both := And(q, again); both.Match(hosts[0]) != q.Match(hosts[0]) {
			t.Fatalf("And(q, q) disagrees with q for %s", s)
		}
	})
}

func BenchmarkMatch(b *testing.B) {
	q, err := Parse(`["and", [">=", "$memory_mb", "131072"], ["==", "$node_type", "compute_icelake"]]`)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if !q.Match(sample) {
			b.Fatal("no match")
		}
	}
}
