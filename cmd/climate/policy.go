package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"climate/policy"
)

func newPolicyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Show the access rules (oslo.policy's) climate serve enforces",
		Long: `Climate enforces Blazar's policy rules, in oslo.policy's language, with Blazar's
defaults; climate serve --policy-file PATH overrides them rule by rule from a YAML or JSON
file such as /etc/blazar/policy.yaml ("rule name": "rule text").`,
		Example: `  climate policy list                                   # the defaults
  climate policy list --policy-file /etc/climate/policy.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newPolicyListCmd())
	return cmd
}

func newPolicyListCmd() *cobra.Command {
	var file, format string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "Print the effective rules: the defaults, as a policy file overrides them",
		Long: `Print every rule climate serve enforces: Blazar's and Climate's defaults, each as the
policy file (--policy-file) overrides it, then the file's other rules. The YAML output,
like oslopolicy-policy-generator's, is itself a valid policy file: each rule follows a
comment with what it guards (and its default when the file changes it).

The rule language is oslo.policy's: role:NAME (any of the caller's roles, ignoring case),
rule:NAME (another rule), is_admin:True, project_id:%(project_id)s and user_id:%(user_id)s
(the caller's attribute equals the object's), KEY:value, 'value':%(attribute)s, @
(always), ! (never), "" (always), combined with and, or, not and parentheses. A file
that does not parse is an error naming the rule and the column; a rule that is not
Climate's is kept (rule:NAME may use it) with a warning on stderr.`,
		Example: `  climate policy list                                      # the defaults, as YAML
  climate policy list --policy-file /etc/climate/policy.yaml -o table
  climate policy list -o json > policy.json                 # a starting point to edit
  climate serve --auth tokens --tokens-file tokens --policy-file policy.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch format {
			case "yaml", "json", "table":
			default:
				return fmt.Errorf("--output %q: want yaml, json or table", format)
			}
			e := policy.Default()
			if file != "" {
				var warnings []string
				var err error
				if e, warnings, err = policy.Load(file); err != nil {
					return err
				}
				for _, w := range warnings {
					fmt.Fprintf(cmd.ErrOrStderr(), "climate: warning: policy file %s: %s\n", file, w)
				}
			}
			return printPolicy(cmd.OutOrStdout(), e.Rules(), format)
		},
	}
	f := cmd.Flags()
	f.StringVar(&file, "policy-file", "", "policy file overriding the default rules (YAML or JSON, as climate serve --policy-file)")
	_ = f.SetAnnotation("policy-file", envFlag, []string{"true"}) // CLIMATE_POLICY_FILE, as serve's; not CLIMATE_OUTPUT
	f.StringVarP(&format, "output", "o", "yaml", "output format: yaml (a policy file), json or table")
	addFormatAlias(f, "output", "yaml\ta policy file", "json", "table")
	return cmd
}

// printPolicy prints rules as a policy file (YAML or JSON) or a table.
func printPolicy(w io.Writer, rules []policy.Rule, format string) error {
	q := func(s string) string { // a JSON string is a YAML double-quoted scalar
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(s)
		return strings.TrimSuffix(b.String(), "\n")
	}
	switch format {
	case "json":
		var b strings.Builder
		b.WriteString("{\n")
		for i, r := range rules {
			sep := ","
			if i == len(rules)-1 {
				sep = ""
			}
			fmt.Fprintf(&b, "    %s: %s%s\n", q(r.Name), q(r.Check), sep)
		}
		b.WriteString("}\n")
		_, err := io.WriteString(w, b.String())
		return err
	case "table":
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tRULE\tSOURCE")
		for _, r := range rules {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Name, r.Check, source(r))
		}
		return tw.Flush()
	}
	var b strings.Builder
	for i, r := range rules {
		if i > 0 {
			b.WriteString("\n")
		}
		if r.Description != "" {
			fmt.Fprintf(&b, "# %s\n", r.Description)
		}
		switch {
		case r.Custom:
			b.WriteString("# Not one of Climate's rules: from the policy file.\n")
		case r.Overridden:
			fmt.Fprintf(&b, "# Overridden by the policy file; default: %s\n", q(r.Default))
		}
		fmt.Fprintf(&b, "%s: %s\n", q(r.Name), q(r.Check))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func source(r policy.Rule) string {
	switch {
	case r.Custom:
		return "file (not Climate's)"
	case r.Overridden:
		return "file"
	}
	return "default"
}

// loadPolicy returns the rules climate serve enforces: the defaults, overridden by file
// when given (its warnings logged).
func loadPolicy(file string, log *slog.Logger) (*policy.Enforcer, error) {
	if file == "" {
		return policy.Default(), nil
	}
	e, warnings, err := policy.Load(file)
	if err != nil {
		return nil, err
	}
	for _, w := range warnings {
		log.Warn("policy file: "+w, "file", file)
	}
	n := 0
	for _, r := range e.Rules() {
		if r.Overridden {
			n++
		}
	}
	log.Info("policy file loaded", "file", file, "rules", n)
	return e, nil
}
