package main

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"climate"
	"climate/http/api"
)

// Completion of flag values: the output flags (-o/-f formats, -c and --sort-by fields),
// --status and --lease. None of them completes file names.

// formatsAnnotation lists, on an output flag, the formats it takes, for completion.
const formatsAnnotation = "climate-formats"

// clientFormats are the client commands' output formats, with what each is.
var clientFormats = []string{"table\taligned columns (the default)", "wide\ta table with every field",
	"json\tthe API's objects", "yaml\tthe API's objects, as YAML", "value\tbare values, one row per line", "csv\ta header line, then one comma-separated line per row"}

// commandFields are the fields each command prints, by command path (without "climate"):
// the values of its -c and --sort-by.
var commandFields = map[string]any{
	"lease list": api.Lease{}, "lease show": api.Lease{}, "lease create": api.Lease{}, "lease update": api.Lease{}, "lease wait": api.Lease{},
	"host list": api.Host{}, "host show": api.Host{}, "host create": api.Host{}, "host update": api.Host{},
	"host property list": api.Property{}, "host property show": api.Property{}, "host property set": api.Property{},
	"host maintenance list": maintenanceView{}, "host maintenance show": maintenanceView{}, "host maintenance add": maintenanceView{},
	"floatingip list": api.FloatingIP{}, "floatingip show": api.FloatingIP{}, "floatingip create": api.FloatingIP{},
	"flavor list": flavorView{}, "flavor show": flavorView{}, "flavor create": flavorView{},
	"allocation list": allocationRow{}, "allocation show": allocationRow{},
	"availability earliest": api.Slot{}, "availability timeline": api.Slot{},
	"events watch": eventFields,
	"webhook list": api.Webhook{}, "webhook show": api.Webhook{}, "webhook create": api.Webhook{}, "webhook update": api.Webhook{},
	"webhook deliveries": api.WebhookDelivery{},
	"version":            versionReport{},
	"usage":              api.Usage{}, "limits show": api.Limits{}, "limits set": api.Limits{},
}

// registerFlagCompletions registers the completion of the output flags of every command
// under root that defines them.
func registerFlagCompletions(root *cobra.Command) {
	for _, cmd := range append([]*cobra.Command{root}, descendants(root)...) {
		cmd.LocalFlags().VisitAll(func(f *pflag.Flag) {
			switch {
			case f.Annotations[formatsAnnotation] != nil:
				formats := f.Annotations[formatsAnnotation]
				_ = cmd.RegisterFlagCompletionFunc(f.Name, func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
					return formats, cobra.ShellCompDirectiveNoFileComp
				})
			case f.Name == "column" || f.Name == "sort-by":
				_ = cmd.RegisterFlagCompletionFunc(f.Name, completeFields(f.Name == "column"))
			}
		})
	}
}

func descendants(cmd *cobra.Command) []*cobra.Command {
	var out []*cobra.Command
	for _, sub := range cmd.Commands() {
		out = append(append(out, sub), descendants(sub)...)
	}
	return out
}

// completeFields completes the fields of the command being completed; list (for -c)
// completes the last of comma-separated fields.
func completeFields(list bool) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		path := strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
		sample, ok := commandFields[path]
		if !ok {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		fields := fieldsOf(sample)
		if list {
			return completeList(fields, toComplete), cobra.ShellCompDirectiveNoFileComp
		}
		return fields, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeList completes the last item of a comma-separated list, keeping the items
// before it and leaving out those already given.
func completeList(values []string, toComplete string) []string {
	prefix := ""
	var given []string
	if i := strings.LastIndexByte(toComplete, ','); i >= 0 {
		prefix = toComplete[:i+1]
		given = strings.Split(toComplete[:i], ",")
	}
	out := make([]string, 0, len(values))
	for _, v := range values {
		if !slices.Contains(given, strings.SplitN(v, "\t", 2)[0]) {
			out = append(out, prefix+v)
		}
	}
	return out
}

// fieldsOf lists the JSON fields of a sample value, in order: its struct tags (those left
// out when empty too), then any its JSON has besides (api.Host's).
func fieldsOf(sample any) []string {
	if names, ok := sample.([]string); ok {
		return names
	}
	var out []string
	var walk func(reflect.Type)
	walk = func(t reflect.Type) {
		for i := range t.NumField() {
			sf := t.Field(i)
			if sf.Anonymous && sf.Type.Kind() == reflect.Struct && sf.Tag.Get("json") == "" {
				walk(sf.Type)
				continue
			}
			name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
			if name != "" && name != "-" && sf.IsExported() && !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	if t := reflect.TypeOf(sample); t.Kind() == reflect.Struct {
		walk(t)
	}
	if b, err := json.Marshal(sample); err == nil {
		if r, err := toRecord(json.RawMessage(b)); err == nil {
			for _, k := range r.keys() {
				if !slices.Contains(out, k) {
					out = append(out, k)
				}
			}
		}
	}
	return out
}

// completeStatuses completes comma-separated lease statuses.
func completeStatuses(statuses []string) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		return completeList(statuses, strings.ToUpper(toComplete)), cobra.ShellCompDirectiveNoFileComp
	}
}

// leaseStatuses are every lease status, as strings.
func leaseStatuses() []string {
	out := make([]string, len(climate.LeaseStatuses))
	for i, s := range climate.LeaseStatuses {
		out[i] = string(s)
	}
	return out
}
