// Command climate is Climate's one binary: the server (climate serve), its database
// migrations (climate migrate), benchmarks, and the client commands (lease, host,
// allocation, availability) built on package climate/http/client.
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	if err := newRootCmd().Execute(); err != nil {
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
"climate allocation" and "climate availability". Every flag can also be set with a
CLIMATE_… environment variable (e.g. --url ↔ CLIMATE_URL, --data-dir ↔ CLIMATE_DATA_DIR).
Flags win over the environment, which wins over the client config file.`,
		Example: `  climate serve                      # the service, on 127.0.0.1:1234
  climate host create node-1 --extra gpu=true
  climate lease create train --reservation resource_type=physical:host,min=1,max=1 --end-date +2h
  climate lease list`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return bindEnv(cmd.Flags())
		},
	}
	root.AddCommand(newServeCmd(), newMigrateCmd(), newVersionCmd(), newBenchCmd(),
		newLeaseCmd(), newHostCmd(), newAllocationCmd(), newAvailabilityCmd())
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return fmt.Errorf("%v (see %s --help)", err, cmd.CommandPath())
	})
	addCompletionExamples(root)
	return root
}

// envName is the environment variable that sets a flag: CLIMATE_ plus the flag name in
// upper case with dashes as underscores.
func envName(flag string) string {
	return "CLIMATE_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// bindEnv sets every flag not given on the command line from its environment variable.
func bindEnv(flags *pflag.FlagSet) error {
	var err error
	flags.VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed || f.Name == "help" {
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

// addCompletionExamples sets up cobra's completion command and gives it examples.
func addCompletionExamples(root *cobra.Command) {
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() != "completion" {
			continue
		}
		c.Example = `  source <(climate completion bash)                              # this bash session
  climate completion zsh > "${fpath[1]}/_climate"                # zsh, for good
  climate completion fish > ~/.config/fish/completions/climate.fish`
		for _, sh := range c.Commands() {
			sh.Example = "  climate completion " + sh.Name() + " --help   # how to install it"
		}
	}
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print the version of this binary",
		Example: "  climate version",
		Args:    cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), "climate", version)
		},
	}
}
