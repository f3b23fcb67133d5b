package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	yaml3 "go.yaml.in/yaml/v3"

	"climate/http/api"
)

// outputOptions are the flags every client command shares for printing results.
type outputOptions struct {
	format   string         // table, json, yaml or value (check turns wide into table with wide set)
	wide     bool           // -o wide: tables with every field
	columns  []string       // --column: fields to print, in this order
	sortBy   string         // --sort-by: list rows ordered by this field
	reverse  bool           // --reverse: descending order
	noHeader bool           // --no-headers: tables without their header line
	absolute bool           // --absolute-times: table dates without "(in 2h)", "(3m ago)"
	jsonpath []jsonPathPart // -o jsonpath=TEMPLATE, parsed (format is then "jsonpath")
	now      func() time.Time
}

func (o *outputOptions) addFlags(cmd *cobra.Command) {
	f := cmd.PersistentFlags()
	f.StringVarP(&o.format, "output", "o", "table", "output format: table, wide (a table with every field), json, yaml (both in the API's key order, with its exact values), value (bare values, one row per line, for scripts), csv (a header line, then one line per row) or jsonpath=TEMPLATE (e.g. jsonpath='{.id} {.reservations[*].id}', one line per item)")
	addFormatAlias(f, "output", clientFormats...)
	f.StringSliceVarP(&o.columns, "column", "c", nil, "fields to print, e.g. -c id,name or -c id -c status (default: a summary in lists, everything in show)")
	f.StringVar(&o.sortBy, "sort-by", "", "sort lists by this field (e.g. name, start_date)")
	f.BoolVar(&o.reverse, "reverse", false, "sort lists in descending order")
	f.BoolVar(&o.absolute, "absolute-times", false, "tables show dates (always UTC, as 2030-01-07T09:00:00Z) without the relative time they add within a week of now, as in 2h or 3m ago")
	f.BoolVar(&o.noHeader, "no-headers", false, "print only the table's rows: no header line, nor the count or title lines around some tables")
}

// addFormatAlias adds -f/--format, OpenStack's name for the output format, as an alias of
// the flag named output (-o), both completing formats: both set the same value, the last
// given wins. The alias has
// no environment variable of its own (CLIMATE_OUTPUT sets both), and a command line's -f
// wins over CLIMATE_OUTPUT as -o does (see bindEnv).
func addFormatAlias(f *pflag.FlagSet, output string, formats ...string) {
	o := f.Lookup(output)
	f.VarP(o.Value, "format", "f", "the same as --"+output+" (OpenStack's name)")
	_ = f.SetAnnotation("format", aliasOf, []string{output})
	for _, name := range []string{output, "format"} { // what shell completion offers
		_ = f.SetAnnotation(name, formatsAnnotation, formats)
	}
}

// aliasOf annotates a flag that is another name for the flag it names.
const aliasOf = "climate-alias-of"

func (o *outputOptions) check() error {
	switch o.format {
	case "table", "json", "yaml", "value", "csv":
		return nil
	case "wide":
		o.format, o.wide = "table", true
		return nil
	case "jsonpath":
		return fmt.Errorf("--output/--format jsonpath: give a template, e.g. -o jsonpath='{.id} {.status}'")
	}
	if tmpl, ok := strings.CutPrefix(o.format, "jsonpath="); ok {
		parts, err := parseJSONPath(tmpl)
		if err != nil {
			return fmt.Errorf("--output/--format %q: %v", o.format, err)
		}
		o.format, o.jsonpath = "jsonpath", parts
		return nil
	}
	return fmt.Errorf("--output/--format %q: want table, wide, json, yaml, value or jsonpath=TEMPLATE", o.format)
}

// field is one key of a record with its decoded JSON value.
type field struct {
	key   string
	value any
}

// record is an API object as ordered fields, in the order the API writes them.
type record []field

func (r record) get(key string) (any, bool) {
	for _, f := range r {
		if f.key == key {
			return f.value, true
		}
	}
	return nil, false
}

func (r record) keys() []string {
	out := make([]string, len(r))
	for i, f := range r {
		out[i] = f.key
	}
	return out
}

// toRecord turns an API value (a struct with JSON tags, a map) into a record, keeping the
// order of its JSON keys, also in nested objects.
func toRecord(v any) (record, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	val, err := decodeOrdered(dec)
	if err != nil {
		return nil, err
	}
	r, ok := val.(record)
	if !ok {
		return nil, fmt.Errorf("not an object: %s", b)
	}
	return r, nil
}

// decodeOrdered decodes the next JSON value: objects as records, arrays as []any, numbers
// as json.Number.
func decodeOrdered(dec *json.Decoder) (any, error) {
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t {
	case json.Delim('{'):
		r := record{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return nil, err
			}
			v, err := decodeOrdered(dec)
			if err != nil {
				return nil, err
			}
			r = append(r, field{key: k.(string), value: v})
		}
		_, err := dec.Token() // '}'
		return r, err
	case json.Delim('['):
		list := []any{}
		for dec.More() {
			v, err := decodeOrdered(dec)
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		_, err := dec.Token() // ']'
		return list, err
	}
	return t, nil
}

// MarshalJSON writes the record as an object with its keys in order.
func (r record) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range r {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(f.key)
		v, err := json.Marshal(f.value)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// only returns the fields cols, in that order.
func (r record) only(cols []string) record {
	out := make(record, 0, len(cols))
	for _, c := range cols {
		v, _ := r.get(c)
		out = append(out, field{c, v})
	}
	return out
}

// normalizeColumn lets users write a field as "start_date", "start-date" or "START DATE".
func normalizeColumn(c string) string {
	return strings.NewReplacer("-", "_", " ", "_").Replace(strings.ToLower(strings.TrimSpace(c)))
}

// selectColumns checks --column against the fields records have (known) and returns the
// columns to print: the user's, or def.
func (o *outputOptions) selectColumns(known, def []string) ([]string, error) {
	if len(o.columns) == 0 {
		return def, nil
	}
	cols := make([]string, 0, len(o.columns))
	for _, c := range o.columns {
		n := normalizeColumn(c)
		if !slices.Contains(known, n) {
			return nil, fmt.Errorf("--column %q: no such field; choose from %s", c, strings.Join(known, ", "))
		}
		cols = append(cols, n)
	}
	return cols, nil
}

// printList prints items (API objects) as rows. def are the table's default columns;
// JSON and YAML print whole objects unless --column is given.
func (o *outputOptions) printList(w io.Writer, items any, def []string) error {
	rows, known, err := toRecords(items)
	if err != nil {
		return err
	}
	if len(known) == 0 {
		known = def
	}
	if o.wide {
		def = known
	}
	cols, err := o.selectColumns(known, def)
	if err != nil {
		return err
	}
	if o.sortBy != "" {
		key := normalizeColumn(o.sortBy)
		if !slices.Contains(known, key) {
			return fmt.Errorf("--sort-by %q: no such field; choose from %s", o.sortBy, strings.Join(known, ", "))
		}
		order := slices.Clone(rows)
		slices.SortStableFunc(order, func(a, b record) int {
			va, _ := a.get(key)
			vb, _ := b.get(key)
			c := compareValues(va, vb)
			if o.reverse {
				c = -c
			}
			return c
		})
		rows = order
	} else if o.reverse {
		slices.Reverse(rows)
	}
	switch o.format {
	case "json", "yaml":
		if len(o.columns) == 0 {
			cols = nil // whole objects
		}
		return writeStructured(w, o.format, jsonList(rows, cols))
	case "jsonpath":
		for _, r := range rows {
			if err := o.writeJSONPath(w, r); err != nil {
				return err
			}
		}
		return nil
	case "value":
		for _, r := range rows {
			cells := make([]string, len(cols))
			for i, c := range cols {
				v, _ := r.get(c)
				cells[i] = cell(v)
			}
			fmt.Fprintln(w, strings.Join(cells, " "))
		}
		return nil
	case "csv":
		return o.writeCSV(w, cols, rows)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if !o.noHeader {
		heads := make([]string, len(cols))
		for i, c := range cols {
			heads[i] = header(c)
		}
		fmt.Fprintln(tw, strings.Join(heads, "\t"))
	}
	for _, r := range rows {
		cells := make([]string, len(cols))
		for i, c := range cols {
			v, _ := r.get(c)
			cells[i] = strings.ReplaceAll(o.tableCell(c, v), "\n", ", ")
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// printObject prints one API object: a FIELD/VALUE table, or the object in JSON/YAML, or
// its values one per line.
func (o *outputOptions) printObject(w io.Writer, item any) error {
	r, err := toRecord(item)
	if err != nil {
		return err
	}
	cols, err := o.selectColumns(r.keys(), r.keys())
	if err != nil {
		return err
	}
	switch o.format {
	case "json", "yaml":
		return writeStructured(w, o.format, r.only(cols))
	case "jsonpath":
		return o.writeJSONPath(w, r)
	case "value":
		for _, c := range cols {
			v, _ := r.get(c)
			fmt.Fprintln(w, cell(v))
		}
		return nil
	case "csv":
		return o.writeCSV(w, cols, []record{r})
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if !o.noHeader {
		fmt.Fprintln(tw, "FIELD\tVALUE")
	}
	for _, c := range cols {
		v, _ := r.get(c)
		for i, line := range strings.Split(o.tableCell(c, v), "\n") {
			name := c
			if i > 0 {
				name = ""
			}
			fmt.Fprintf(tw, "%s\t%s\n", name, line)
		}
	}
	return tw.Flush()
}

// toRecords converts a slice of API objects and lists the fields they have, in order.
func toRecords(items any) ([]record, []string, error) {
	b, err := json.Marshal(items)
	if err != nil {
		return nil, nil, err
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(b, &raws); err != nil {
		return nil, nil, err
	}
	rows := make([]record, 0, len(raws))
	var known []string
	for _, raw := range raws {
		r, err := toRecord(raw)
		if err != nil {
			return nil, nil, err
		}
		for _, k := range r.keys() {
			if !slices.Contains(known, k) {
				known = append(known, k)
			}
		}
		rows = append(rows, r)
	}
	return rows, known, nil
}

// jsonList returns rows for JSON output, each limited to cols (nil: all of its fields).
func jsonList(rows []record, cols []string) []record {
	if cols == nil {
		return rows
	}
	out := make([]record, len(rows))
	for i, r := range rows {
		out[i] = r.only(cols)
	}
	return out
}

// writeStructured writes v as indented JSON or as YAML, both with the keys in the API's
// order.
func writeStructured(w io.Writer, format string, v any) error {
	if format == "yaml" {
		b, err := yamlBytes(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// yamlBytes writes v (an API value, or records) as YAML with its keys in the order JSON
// has them (sigs.k8s.io/yaml would sort them). Dates are always double-quoted strings,
// whatever their layout, where YAML would quote some (2030-01-01 10:00:00) and not others
// (2030-01-01T10:00:00.000000); other strings are quoted only when YAML needs it.
func yamlBytes(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	val, err := decodeOrdered(dec)
	if err != nil {
		return nil, err
	}
	n, err := yamlNode(val)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	enc := yaml3.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// yamlNode turns a decoded JSON value (see decodeOrdered) into a YAML node, in order.
func yamlNode(v any) (*yaml3.Node, error) {
	switch v := v.(type) {
	case record:
		n := &yaml3.Node{Kind: yaml3.MappingNode, Tag: "!!map"}
		if len(v) == 0 {
			n.Style = yaml3.FlowStyle
		}
		for _, f := range v {
			val, err := yamlNode(f.value)
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, &yaml3.Node{Kind: yaml3.ScalarNode, Tag: "!!str", Value: f.key}, val)
		}
		return n, nil
	case []any:
		n := &yaml3.Node{Kind: yaml3.SequenceNode, Tag: "!!seq"}
		if len(v) == 0 {
			n.Style = yaml3.FlowStyle
		}
		for _, item := range v {
			val, err := yamlNode(item)
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, val)
		}
		return n, nil
	case nil:
		return &yaml3.Node{Kind: yaml3.ScalarNode, Tag: "!!null", Value: "null"}, nil
	case json.Number:
		tag := "!!int"
		if strings.ContainsAny(v.String(), ".eE") {
			tag = "!!float"
		}
		return &yaml3.Node{Kind: yaml3.ScalarNode, Tag: tag, Value: v.String()}, nil
	case bool:
		return &yaml3.Node{Kind: yaml3.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(v)}, nil
	case string:
		if _, ok := parseAnyDate(v); ok {
			return &yaml3.Node{Kind: yaml3.ScalarNode, Tag: "!!str", Value: v, Style: yaml3.DoubleQuotedStyle}, nil
		}
		n := &yaml3.Node{}
		if err := n.Encode(v); err != nil { // plain, quoted or literal, as the string needs
			return nil, err
		}
		return n, nil
	}
	return nil, fmt.Errorf("yaml: unexpected %T", v)
}

// anyDateLayouts are the layouts in which the API's objects hold dates.
var anyDateLayouts = []string{api.TimeFormat, "2006-01-02 15:04:05.999999999", "2006-01-02T15:04:05.999999999",
	time.RFC3339Nano, api.DateFormat, "2006-01-02T15:04", "2006-01-02 15:04:05"}

// parseAnyDate reads a date as the API writes them (UTC unless it says otherwise).
func parseAnyDate(s string) (time.Time, bool) {
	if len(s) < len("2006-01-02 15:04") || s[4] != '-' {
		return time.Time{}, false
	}
	for _, l := range anyDateLayouts {
		if t, err := time.ParseInLocation(l, s, time.UTC); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// header turns a field name into a table heading: start_date → START DATE.
func header(key string) string {
	return strings.ToUpper(strings.ReplaceAll(key, "_", " "))
}

// cell renders a value for a table or value output: scalars as they are, lists one item
// per line, objects as compact JSON.
func cell(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case json.Number:
		return v.String()
	case bool:
		return strconv.FormatBool(v)
	case []any:
		lines := make([]string, len(v))
		for i, item := range v {
			lines[i] = cell(item)
		}
		return strings.Join(lines, "\n")
	case record: // nested objects: key=value pairs, empty and bookkeeping ones left out
		pairs := make([]string, 0, len(v))
		for _, f := range v {
			if nestedNoise[f.key] {
				continue
			}
			if c := cell(f.value); c != "" {
				pairs = append(pairs, f.key+"="+strings.ReplaceAll(c, "\n", ","))
			}
		}
		return strings.Join(pairs, " ")
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// tableCell renders the value of field key for a table: as cell does, with dates in one
// format (see tableDate), also in nested objects.
func (o *outputOptions) tableCell(key string, v any) string {
	switch v := v.(type) {
	case string:
		if isDateField(key) {
			if t, ok := parseAnyDate(v); ok {
				return o.tableDate(t)
			}
		}
	case []any:
		lines := make([]string, len(v))
		for i, item := range v {
			lines[i] = o.tableCell(key, item)
		}
		return strings.Join(lines, "\n")
	case record:
		pairs := make([]string, 0, len(v))
		for _, f := range v {
			if nestedNoise[f.key] {
				continue
			}
			if c := o.tableCell(f.key, f.value); c != "" {
				pairs = append(pairs, f.key+"="+strings.ReplaceAll(c, "\n", ","))
			}
		}
		return strings.Join(pairs, " ")
	}
	return cell(v)
}

// isDateField reports whether a field holds dates: start_date, created_at, retry_until,
// time, start, deadline, …
func isDateField(key string) bool {
	for _, suffix := range []string{"_date", "_at", "_until", "_time"} {
		if strings.HasSuffix(key, suffix) {
			return true
		}
	}
	switch key {
	case "time", "date", "start", "end", "deadline", "after", "before", "from", "to":
		return true
	}
	return false
}

// relativeWithin is how far from now a table date also shows as a relative time: farther,
// "in 40d" says no more than the date.
const relativeWithin = 7 * 24 * time.Hour

// tableDate is a date as tables show it: UTC to the second, marked Z (2030-01-07T09:00:00Z,
// which date flags accept back), followed within a week of now by the relative time,
// (in 2h) or (3m ago), unless --absolute-times.
func (o *outputOptions) tableDate(t time.Time) string {
	s := t.UTC().Format("2006-01-02T15:04:05Z")
	if o.absolute {
		return s
	}
	now := time.Now()
	if o.now != nil {
		now = o.now()
	}
	d := t.Sub(now)
	if d.Abs() > relativeWithin {
		return s
	}
	if d >= 0 {
		return s + " (in " + shortDuration(d) + ")"
	}
	return s + " (" + shortDuration(-d) + " ago)"
}

// shortDuration is d in its two largest units, rounded down: 45s, 12m, 2h, 1h59m, 3d4h.
func shortDuration(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 24*time.Hour:
		h, m := int(d/time.Hour), int(d%time.Hour/time.Minute)
		if m == 0 {
			return fmt.Sprintf("%dh", h)
		}
		return fmt.Sprintf("%dh%dm", h, m)
	}
	days, h := int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour)
	if h == 0 {
		return fmt.Sprintf("%dd", days)
	}
	return fmt.Sprintf("%dd%dh", days, h)
}

// nestedNoise are fields of nested objects that tables leave out: the parent's id and
// timestamps (JSON and YAML keep everything).
var nestedNoise = map[string]bool{"lease_id": true, "created_at": true, "updated_at": true}

// compareValues orders two cells: numbers by value, anything else as text.
func compareValues(a, b any) int {
	na, errA := strconv.ParseFloat(cell(a), 64)
	nb, errB := strconv.ParseFloat(cell(b), 64)
	if errA == nil && errB == nil {
		switch {
		case na < nb:
			return -1
		case na > nb:
			return 1
		}
		return 0
	}
	return strings.Compare(cell(a), cell(b))
}

// writeCSV writes rows as CSV (RFC 4180): a header line of field names (unless
// --no-headers), then one line per row, values as -o value prints them.
func (o *outputOptions) writeCSV(w io.Writer, cols []string, rows []record) error {
	cw := csv.NewWriter(w)
	if !o.noHeader {
		if err := cw.Write(cols); err != nil {
			return err
		}
	}
	for _, r := range rows {
		cells := make([]string, len(cols))
		for i, c := range cols {
			v, _ := r.get(c)
			cells[i] = cell(v)
		}
		if err := cw.Write(cells); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
