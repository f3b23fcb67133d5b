package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// -o jsonpath=TEMPLATE: a small part of kubectl's JSONPath. The template is text with
// {PATH} placeholders, written once per item of a list (one line each) or once for a
// shown object. PATH is a sequence of .KEY, [N] and [*] steps from the item ("." alone
// is the whole item): {.id}, {.reservations[0].resource_type}, {.events[*].event_type}.
// [*] gives every element, separated by spaces. Strings print bare, objects and lists as
// compact JSON. \n and \t in the text are a new line and a tab.

// jsonPathPart is literal text, or a path when isPath.
type jsonPathPart struct {
	text   string
	isPath bool
	steps  []jsonPathStep
}

// jsonPathStep is one step of a path: a key, an index, or every element (all).
type jsonPathStep struct {
	key   string
	index int
	all   bool
	isKey bool
}

func parseJSONPath(tmpl string) ([]jsonPathPart, error) {
	var parts []jsonPathPart
	text := strings.NewReplacer(`\n`, "\n", `\t`, "\t")
	for tmpl != "" {
		open := strings.IndexByte(tmpl, '{')
		if open < 0 {
			parts = append(parts, jsonPathPart{text: text.Replace(tmpl)})
			break
		}
		if open > 0 {
			parts = append(parts, jsonPathPart{text: text.Replace(tmpl[:open])})
		}
		end := strings.IndexByte(tmpl[open:], '}')
		if end < 0 {
			return nil, fmt.Errorf("unclosed { in the jsonpath template")
		}
		steps, err := parseJSONPathSteps(strings.TrimSpace(tmpl[open+1 : open+end]))
		if err != nil {
			return nil, err
		}
		parts = append(parts, jsonPathPart{isPath: true, steps: steps})
		tmpl = tmpl[open+end+1:]
	}
	if len(parts) == 0 {
		return nil, fmt.Errorf("empty jsonpath template")
	}
	return parts, nil
}

func parseJSONPathSteps(path string) ([]jsonPathStep, error) {
	if path == "." || path == "" {
		if path == "" {
			return nil, fmt.Errorf("empty {} in the jsonpath template")
		}
		return nil, nil
	}
	if path[0] != '.' && path[0] != '[' {
		return nil, fmt.Errorf("jsonpath {%s}: a path starts with . (e.g. {.id})", path)
	}
	var steps []jsonPathStep
	for rest := path; rest != ""; {
		switch rest[0] {
		case '.':
			rest = rest[1:]
			n := strings.IndexAny(rest, ".[")
			if n < 0 {
				n = len(rest)
			}
			if n == 0 {
				return nil, fmt.Errorf("jsonpath {%s}: a . without a field name", path)
			}
			steps = append(steps, jsonPathStep{key: normalizeColumn(rest[:n]), isKey: true})
			rest = rest[n:]
		case '[':
			end := strings.IndexByte(rest, ']')
			if end < 0 {
				return nil, fmt.Errorf("jsonpath {%s}: unclosed [", path)
			}
			in := rest[1:end]
			if in == "*" {
				steps = append(steps, jsonPathStep{all: true})
			} else if i, err := strconv.Atoi(in); err == nil && i >= 0 {
				steps = append(steps, jsonPathStep{index: i})
			} else {
				return nil, fmt.Errorf("jsonpath {%s}: [%s]: want [N] or [*]", path, in)
			}
			rest = rest[end+1:]
		default:
			return nil, fmt.Errorf("jsonpath {%s}: unexpected %q", path, rest)
		}
	}
	return steps, nil
}

// writeJSONPath writes the template for one item, and a new line.
func (o *outputOptions) writeJSONPath(w io.Writer, item record) error {
	var b strings.Builder
	for _, p := range o.jsonpath {
		if !p.isPath {
			b.WriteString(p.text)
			continue
		}
		values, err := jsonPathEval([]any{item}, p.steps)
		if err != nil {
			return err
		}
		cells := make([]string, len(values))
		for i, v := range values {
			cells[i] = jsonPathCell(v)
		}
		b.WriteString(strings.Join(cells, " "))
	}
	_, err := fmt.Fprintln(w, b.String())
	return err
}

// jsonPathEval follows steps from every one of values.
func jsonPathEval(values []any, steps []jsonPathStep) ([]any, error) {
	for _, s := range steps {
		var next []any
		for _, v := range values {
			switch {
			case s.isKey:
				r, ok := v.(record)
				if !ok {
					continue
				}
				x, found := r.get(s.key)
				if !found {
					return nil, fmt.Errorf("jsonpath: no field %q; choose from %s", s.key, strings.Join(r.keys(), ", "))
				}
				next = append(next, x)
			case s.all:
				if list, ok := v.([]any); ok {
					next = append(next, list...)
				}
			default:
				if list, ok := v.([]any); ok && s.index < len(list) {
					next = append(next, list[s.index])
				}
			}
		}
		values = next
	}
	return values, nil
}

// jsonPathCell prints a value: scalars bare, objects and lists as compact JSON.
func jsonPathCell(v any) string {
	switch v.(type) {
	case record, []any:
		b, _ := json.Marshal(v)
		return string(b)
	}
	return cell(v)
}
