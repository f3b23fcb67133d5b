// Command climate is Climate's one binary: the server (climate serve), its database
// migrations (climate migrate), benchmarks, and the client commands (lease, host,
// allocation, availability) built on package climate/http/client.
package main

import (
	"climate/buildinfo"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"climate/http/client"
)

func main() {
	if err := newRootCmd().Execute(); err != nil {
		var apiErr *client.Error
		if errors.As(err, &apiErr) && apiErr.Status == http.StatusUnauthorized {
			err = fmt.Errorf("%w (give --token or set CLIMATE_TOKEN)", err)
		}
		fmt.Fprintln(os.Stderr, "climate:", err)
		os.Exit(1)
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "climate",
		Short: "Climate: reserve cloud capacity (whole hosts) for a time window, now or in the future",
		Long: `Climate is a reservation service that speaks OpenStack Blazar's v1 API.

Run the service with "climate serve"; talk to it with "climate lease", "climate host",
"climate allocation" and "climate availability"; watch what happens with "climate
events watch", or have it sent to a URL with "climate webhook". Server flags and the
client commands' connection and output flags can also be set with a CLIMATE_…
environment variable (e.g. --data-dir ↔ CLIMATE_DATA_DIR, --url ↔ CLIMATE_URL, --token ↔
CLIMATE_TOKEN, -o ↔ CLIMATE_OUTPUT). Flags win over the environment, which wins over
the client config file.`,
		Example: `  climate serve                      # the service, on 127.0.0.1:1234
  climate host create node-1 --extra gpu=true
  climate lease create train --reservation resource_type=physical:host,min=1,max=1 --end-date +2h
  climate lease list`,
		Version:       buildinfo.Get().String(),
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return bindEnv(cmd.Flags())
		},
	}
	root.AddCommand(newServeCmd(), newMigrateCmd(), newVersionCmd(), newBenchCmd(),
		newLeaseCmd(), newHostCmd(), newFloatingIPCmd(), newFlavorCmd(), newAllocationCmd(), newAvailabilityCmd(), newEventsCmd(), newWebhookCmd(), newAuditCmd(), newUsageCmd(), newLimitsCmd(),
		newPolicyCmd(), newKeystoneCmd())
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return fmt.Errorf("%v (see %s --help)", err, cmd.CommandPath())
	})
	root.CompletionOptions.DisableDefaultCmd = true
	root.AddCommand(newCompletionCmd())
	root.SetVersionTemplate("climate {{.Version}}\n")
	refuseUnknownSubcommands(root)
	registerFlagCompletions(root)
	return root
}

// refuseUnknownSubcommands makes every command group (lease, host, …) answer an unknown
// subcommand as the root does: an error with suggestions and a non-zero exit, where cobra
// would print the group's help and succeed. A group given nothing still shows its help.
func refuseUnknownSubcommands(cmd *cobra.Command) {
	for _, sub := range cmd.Commands() {
		refuseUnknownSubcommands(sub)
	}
	if !cmd.HasParent() || !cmd.HasSubCommands() || cmd.Runnable() {
		return
	}
	cmd.SuggestionsMinimumDistance = 2 // as cobra's root; SuggestionsFor has no default
	cmd.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			msg += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t")
		}
		return fmt.Errorf("%s\n\nRun '%s --help' for usage.", msg, cmd.CommandPath())
	}
	cmd.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
}

// envName is the environment variable that sets a flag: CLIMATE_ plus the flag name in
// upper case with dashes as underscores.
func envName(flag string) string {
	return "CLIMATE_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// bindEnv sets every flag not given on the command line from its environment variable.
// Client commands take only their connection and output settings from the environment
// (envFlag), so that a stray CLIMATE_NAME cannot rename a lease.
func bindEnv(flags *pflag.FlagSet) error {
	clientCmd := false
	flags.VisitAll(func(f *pflag.Flag) { clientCmd = clientCmd || f.Annotations[envFlag] != nil })
	aliased := map[string]bool{} // flags given on the command line by another name
	flags.VisitAll(func(f *pflag.Flag) {
		if a := f.Annotations[aliasOf]; len(a) > 0 && f.Changed {
			aliased[a[0]] = true
		}
	})
	var err error
	flags.VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed || aliased[f.Name] || f.Annotations[aliasOf] != nil || f.Name == "help" || (clientCmd && f.Annotations[envFlag] == nil) {
			return
		}
		if v, ok := os.LookupEnv(envName(f.Name)); ok {
			if e := flags.Set(f.Name, v); e != nil {
				err = fmt.Errorf("%s=%q: %v", envName(f.Name), v, e)
			}
		}
	})
	return err
}

// envFlag annotates the flags of client commands that their CLIMATE_… variable sets.
const envFlag = "climate-env"

// newCompletionCmd prints shell completion scripts. It replaces cobra's default command,
// which binds its output stream when it is created, so that output follows SetOut.
func newCompletionCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "completion bash|zsh|fish",
		Short: "Print the shell completion script (commands, flags, lease and host names)",
		Long: `Print a completion script for your shell. Lease and host names complete from the
server (CLIMATE_URL / config file), so completion works best with a reachable server;
so do the values of --lease. -o/-f complete the output formats, --status the lease
statuses, -c and --sort-by the command's fields.`,
		Example: `  source <(climate completion bash)                                   # this bash session
  climate completion bash > /etc/bash_completion.d/climate            # bash, for good
  climate completion zsh > "${fpath[1]}/_climate"                     # zsh
  climate completion fish > ~/.config/fish/completions/climate.fish   # fish`,
		ValidArgs: []string{"bash", "zsh", "fish"},
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 || (args[0] != "bash" && args[0] != "zsh" && args[0] != "fish") {
				return fmt.Errorf("climate completion takes one shell: bash, zsh or fish")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			switch args[0] {
			case "bash":
				return cmd.Root().GenBashCompletionV2(out, true)
			case "zsh":
				return cmd.Root().GenZshCompletion(out)
			}
			return cmd.Root().GenFishCompletion(out, true)
		},
	}
	return cmd
}

func newVersionCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version of this binary and of the server",
		Long: `Print this binary's version, the commit and time it was built from and the Go that
built it, then the same for the server at --url (or CLIMATE_URL, the config file) when
it answers. An unreachable server is reported, not an error.`,
		Example: "  climate version\n  climate version -o json\n  climate --version",
		Args:    cobra.NoArgs,
	}
	o := addClientFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		me := buildinfo.Get()
		r := versionReport{Version: me.Version, Commit: me.Commit, Date: me.Date, Go: me.Go, Platform: me.Platform}
		c, err := o.client(cmd)
		if err != nil {
			return err
		}
		r.Server = c.URL()
		ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Second)
		defer cancel()
		switch srv, err := c.ServerBuild(ctx); {
		case err != nil:
			r.ServerError = err.Error()
		case srv == nil:
			r.ServerError = "the server answers Blazar's API but does not say which build it is (not Climate?)"
		default:
			r.ServerVersion, r.ServerCommit, r.ServerGo = srv.Version, srv.Commit, srv.Go
		}
		return o.out.printObject(cmd.OutOrStdout(), r)
	}
	return cmd
}

// versionReport is what climate version prints.
type versionReport struct {
	Version       string `json:"version"`
	Commit        string `json:"commit"`
	Date          string `json:"date"`
	Go            string `json:"go"`
	Platform      string `json:"platform"`
	Server        string `json:"server"`
	ServerVersion string `json:"server_version"`
	ServerCommit  string `json:"server_commit"`
	ServerGo      string `json:"server_go"`
	ServerError   string `json:"server_error,omitempty"`
}
