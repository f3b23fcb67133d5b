package query

import (
	"strings"
	"testing"

	"climate"
)

func host(props map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) { v, ok := props[name]; return v, ok }
}

var sample = host(map[string]string{
	"memory_mb": "131072", "vcpus": "16", "gpu": "True", "site": "uc", "node_type": "compute_icelake",
	"hypervisor_hostname": "compute-00001", "ratio": "1.5", "label": "with space",
})

func TestMatch(t *testing.T) {
	cases := []struct {
		q    string
		want bool
	}{
		{``, true},
		{`[]`, true},
		{`null`, true},
		{`[">=", "$memory_mb", "4096"]`, true},
		{`["and", ["==", "$gpu", "True"], ["==", "$site", "uc"]]`, true},
		{`[">=", "$vcpus", "4"]`, true}, // numeric: Blazar's string compare says false
		{`["<", "$vcpus", "4"]`, false},
		{`["==", "$vcpus", "16.0"]`, true},
		{`["==", "$vcpus", 16]`, true},
		{`["=", "$site", "uc"]`, true},
		{`["!=", "$site", "uc"]`, false},
		{`["==", "$gpu", "true"]`, true}, // booleans compare case-insensitively
		{`["==", "$gpu", true]`, true},
		{`["!=", "$gpu", "false"]`, true},
		{`[">", "$gpu", "false"]`, false},
		{`[">", "$node_type", "compute_a"]`, true}, // strings compare byte-wise
		{`["==", "$label", "with space"]`, true},
		{`["==", "$missing", "x"]`, false},
		{`["!=", "$missing", "x"]`, false}, // a host lacking the property fails every comparison
		{`["not", ["==", "$missing", "x"]]`, true},
		{`["or", ["==", "$site", "tacc"], ["<", "$ratio", "2"]]`, true},
		{`["or", ["==", "$site", "tacc"], [">", "$ratio", "2"]]`, false},
		{`["in", "$node_type", ["compute_skylake", "compute_icelake"]]`, true},
		{`["in", "$vcpus", [8, 16]]`, true},
		{`["in", "$node_type", ["gpu_v100"]]`, false},
		{`["and", ["or", ["not", ["==", "$site", "tacc"]]], ["in", "$site", ["uc"]]]`, true},
	}
	for _, tc := range cases {
		q, err := Parse(tc.q)
		if err != nil {
			t.Fatalf("Parse(%s): %v", tc.q, err)
		}
		if got := q.Match(sample); got != tc.want {
			t.Errorf("%s → %v, want %v", tc.q, got, tc.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct{ q, text string }{
		{`{"a": 1}`, "must be a JSON list"},
		{`[`, "invalid JSON"},
		{`["==", "$a", "1"] x`, "unexpected data after the query"},
		{`["==", "$a", "1"] ["==", "$b", "1"]`, "unexpected data after the query"},
		{`["~", "$a", "1"]`, `unknown operator "~" (expected one of ==, =, !=, <, <=, >, >=, and, or, not, in)`},
		{`["==", "a", "1"]`, `property name must start with "$"`},
		{`["==", "$", "1"]`, `property name "$" is empty`},
		{`["==", 5, "1"]`, `property name must start with "$"`},
		{`["==", "$a"]`, "a comparison has three elements"},
		{`[">=", "$a", ""]`, "needs a non-empty value"},
		{`["==", "$a", {"x": 1}]`, "must be a string, number or boolean"},
		{`["and"]`, `"and" needs at least one operand`},
		{`["and", "x"]`, `operands of "and" must be queries`},
		{`["not", ["==", "$a", "1"], ["==", "$a", "2"]]`, `"not" takes exactly one operand`},
		{`["in", "$a", []]`, `"in" needs a non-empty list`},
		{`["in", "$a", "x"]`, `"in" needs a non-empty list`},
		{`[1, 2]`, "must be an operator"},
		{`[[]]`, "must be an operator"},
		{strings.Repeat(`["not", `, 40) + `["==", "$a", "1"]` + strings.Repeat("]", 40), "nest at most 32 levels"},
	}
	for _, tc := range cases {
		_, err := Parse(tc.q)
		if err == nil {
			t.Errorf("Parse(%s) succeeded", tc.q)
			continue
		}
		if climate.ErrorCode(err) != climate.CodeInvalid || !strings.HasPrefix(err.Error(), "Malformed requirements ") || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("Parse(%s) = %v (code %s), want invalid containing %q", tc.q, err, climate.ErrorCode(err), tc.text)
		}
	}
	long := `["~", "$a", "` + strings.Repeat("x", 500) + `"]`
	if _, err := Parse(long); err == nil || len(err.Error()) > 400 {
		t.Errorf("the echoed input is not bounded: %d characters", len(err.Error()))
	}
}

func TestPropertiesStringAnd(t *testing.T) {
	q, err := Parse(`["and", ["=", "$b", 1], ["or", ["in", "$a", ["x", true]], ["not", [">", "$b", "2"]]]]`)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(q.Properties(), ","); got != "a,b" {
		t.Fatalf("Properties = %s", got)
	}
	want := `["and", ["==", "$b", "1"], ["or", ["in", "$a", ["x", "true"]], ["not", [">", "$b", "2"]]]]`
	if q.String() != want {
		t.Fatalf("String = %s\nwant     %s", q.String(), want)
	}
	again, err := Parse(q.String())
	if err != nil || again.String() != want {
		t.Fatalf("round trip: %v %s", err, again)
	}
	empty, _ := Parse("")
	if !empty.MatchAll() || empty.String() != "[]" || empty.Properties() != nil {
		t.Fatal("empty query")
	}
	var nilQ *Query
	if !nilQ.Match(sample) {
		t.Fatal("nil query must match")
	}
	a, _ := Parse(`["==", "$site", "uc"]`)
	b, _ := Parse(`[">", "$vcpus", "32"]`)
	if And(nil, empty).String() != "[]" || And(a, empty).String() != a.String() {
		t.Fatal("And drops empty queries")
	}
	if both := And(a, b); both.Match(sample) || !And(a).Match(sample) {
		t.Fatal("And must require every query")
	}
}

func TestMatchDoesNotAllocate(t *testing.T) {
	q, _ := Parse(`["and", [">=", "$memory_mb", "131072"], ["==", "$node_type", "compute_icelake"], ["in", "$gpu", ["true"]]]`)
	if n := testing.AllocsPerRun(100, func() { q.Match(sample) }); n != 0 {
		t.Fatalf("Match allocates %.0f times per call", n)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{``, `[]`, `[">=", "$memory_mb", "4096"]`, `["and", ["==", "$gpu", "True"], ["==", "$site", "uc"]]`,
		`["or", ["not", ["in", "$a", [1, "b", true]]]]`, `["==", "$a", ""]`, `[1]`, `{"a":1}`, `["=", "$x y", "1 2"]`} {
		f.Add(s)
	}
	hosts := []func(string) (string, bool){sample, host(nil), host(map[string]string{"a": "", "x y": "1e400", "b": "NaN"})}
	f.Fuzz(func(t *testing.T, s string) {
		q, err := Parse(s)
		if err != nil {
			if climate.ErrorCode(err) != climate.CodeInvalid {
				t.Fatalf("Parse(%q) error without code invalid: %v", s, err)
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
		for _, h := range hosts {
			if q.Match(h) != again.Match(h) {
				t.Fatalf("%s and its canonical form disagree", s)
			}
		}
	})
}

func BenchmarkMatch(b *testing.B) {
	q, _ := Parse(`["and", [">=", "$memory_mb", "131072"], ["==", "$node_type", "compute_icelake"]]`)
	for i := 0; i < b.N; i++ {
		q.Match(sample)
	}
}
