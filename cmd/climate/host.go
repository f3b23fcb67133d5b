package main

import (
	"climate"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"climate/http/api"
	"climate/http/client"
)

// hostColumns are host list's default columns.
var hostColumns = []string{"id", "hypervisor_hostname", "vcpus", "memory_mb", "local_gb", "reservable"}

func newHostCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "host",
		Short: "Register and manage the hosts leases reserve (admins)",
		Long: `Hosts are the compute hosts leases reserve, named by hypervisor hostname or id. Extra
capabilities (--extra KEY=VALUE) are the properties reservations filter on. Managing
hosts is for admins.

` + clientHelp,
		Example: `  climate host create node-1 --extra gpu=true --extra rack=r1
  climate host list
  climate host property list --detail
  climate host maintenance add node-1 --end +4h --reason "firmware update"`,
	}
	o := addClientFlags(cmd)
	cmd.AddCommand(newHostListCmd(o), newHostShowCmd(o), newHostCreateCmd(o), newHostUpdateCmd(o),
		newHostDeleteCmd(o), newHostPropertyCmd(o), newHostMaintenanceCmd(o))
	return cmd
}

func newHostListCmd(o *clientOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List hosts",
		Long: `List hosts. Under power management (climate serve --power-off), the list shows each
host's power state and the hours it has spent powered off.`,
		Example: `  climate host list
  climate host list -c hypervisor_hostname -c gpu --sort-by hypervisor_hostname
  climate host list -c hypervisor_hostname,power_state,powered_off_hours -o json
  climate host list -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.client(cmd)
			if err != nil {
				return err
			}
			hosts, err := c.ListHosts(cmd.Context())
			if err != nil {
				return err
			}
			return o.out.printList(cmd.OutOrStdout(), hosts, hostListColumns(hosts))
		},
	}
}

// hostListColumns are host list's default columns: the power columns too once power
// management has recorded a host's state.
func hostListColumns(hosts []api.Host) []string {
	for _, h := range hosts {
		if h.PowerState != "" {
			return append(slices.Clone(hostColumns), "power_state", "powered_off_hours")
		}
	}
	return hostColumns
}

func newHostShowCmd(o *clientOptions) *cobra.Command {
	return &cobra.Command{
		Use:               "show NAME|ID",
		Short:             "Show a host with its extra capabilities",
		Example:           "  climate host show node-1\n  climate host show 3 -o json",
		Args:              exactArgs(1, "NAME|ID"),
		ValidArgsFunction: completeHosts(o),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client(cmd)
			if err != nil {
				return err
			}
			h, err := c.FindHost(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return o.out.printObject(cmd.OutOrStdout(), h)
		},
	}
}

func newHostCreateCmd(o *clientOptions) *cobra.Command {
	var extras []string
	var hf hostFieldFlags
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Register a host by its hypervisor hostname",
		Long: `Register the host whose hypervisor hostname is NAME. --vcpus, --memory-mb and
--local-gb say what it offers instance slots; each --extra KEY=VALUE sets an extra
capability that reservations can filter on (resource_properties).`,
		Example: `  climate host create node-1 --vcpus 32 --memory-mb 131072 --local-gb 900
  climate host create gpu-7 --extra gpu=true --extra gpu_model=a100 --extra rack=r4`,
		Args: exactArgs(1, "NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			fields, err := parseExtras(extras)
			if err != nil {
				return err
			}
			hf.set(cmd, fields)
			fields["name"] = args[0]
			c, err := o.client(cmd)
			if err != nil {
				return err
			}
			h, err := c.CreateHost(cmd.Context(), fields)
			if err != nil {
				return err
			}
			return o.out.printObject(cmd.OutOrStdout(), h)
		},
	}
	cmd.Flags().StringArrayVar(&extras, "extra", nil, "extra capability KEY=VALUE (repeatable)")
	hf.addFlags(cmd)
	return cmd
}

// hostFieldNames are the built-in host fields that have flags (hostFieldFlags).
var hostFieldNames = []string{"vcpus", "memory_mb", "local_gb", "hypervisor_type", "availability_zone"}

// hostFieldFlags are the built-in host fields a command sets by flag, not by --extra.
type hostFieldFlags struct {
	vcpus, memoryMB, localGB         int
	hypervisorType, availabilityZone string
}

func (h *hostFieldFlags) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.IntVar(&h.vcpus, "vcpus", 0, "the host's vCPUs (what instance slots may use)")
	f.IntVar(&h.memoryMB, "memory-mb", 0, "the host's memory in MB")
	f.IntVar(&h.localGB, "local-gb", 0, "the host's local disk in GB")
	f.StringVar(&h.hypervisorType, "hypervisor-type", "", "the hypervisor type (e.g. QEMU)")
	f.StringVar(&h.availabilityZone, "availability-zone", "", "the host's availability zone")
}

// set puts the flags given on the command line into fields.
func (h *hostFieldFlags) set(cmd *cobra.Command, fields map[string]any) {
	for name, v := range map[string]any{"vcpus": h.vcpus, "memory-mb": h.memoryMB, "local-gb": h.localGB,
		"hypervisor-type": h.hypervisorType, "availability-zone": h.availabilityZone} {
		if cmd.Flags().Changed(name) {
			fields[strings.ReplaceAll(name, "-", "_")] = fmt.Sprint(v)
		}
	}
}

func newHostUpdateCmd(o *clientOptions) *cobra.Command {
	var extras []string
	var hf hostFieldFlags
	cmd := &cobra.Command{
		Use:     "update NAME|ID",
		Aliases: []string{"set"},
		Short:   "Set extra capabilities of a host",
		Example: `  climate host update node-1 --extra rack=r2
  climate host update node-1 --extra reservable=false   # take it out of future planning`,
		Args:              exactArgs(1, "NAME|ID"),
		ValidArgsFunction: completeHosts(o),
		RunE: func(cmd *cobra.Command, args []string) error {
			fields, err := parseExtras(extras)
			if err != nil {
				return err
			}
			hf.set(cmd, fields)
			if len(fields) == 0 {
				return fmt.Errorf("nothing to change: give --extra KEY=VALUE or a field's flag (--vcpus, …)")
			}
			c, err := o.client(cmd)
			if err != nil {
				return err
			}
			h, err := c.FindHost(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if h, err = c.UpdateHost(cmd.Context(), h.ID, fields); err != nil {
				return err
			}
			return o.out.printObject(cmd.OutOrStdout(), h)
		},
	}
	cmd.Flags().StringArrayVar(&extras, "extra", nil, "extra capability KEY=VALUE (repeatable)")
	hf.addFlags(cmd)
	return cmd
}

func newHostDeleteCmd(o *clientOptions) *cobra.Command {
	return &cobra.Command{
		Use:               "delete NAME|ID…",
		Short:             "Remove hosts that no lease holds",
		Example:           "  climate host delete node-1\n  climate host delete 4 5 6",
		Args:              minArgs(1, "NAME|ID…"),
		ValidArgsFunction: completeHosts(o),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client(cmd)
			if err != nil {
				return err
			}
			for _, ref := range args {
				h, err := c.FindHost(cmd.Context(), ref)
				if err != nil {
					return err
				}
				if err := c.DeleteHost(cmd.Context(), h.ID); err != nil {
					return fmt.Errorf("deleting host %s: %w", ref, err)
				}
				if o.out.format == "table" {
					fmt.Fprintf(cmd.OutOrStdout(), "Deleted host %s (%s)\n", h.HypervisorHostname, h.ID)
				}
			}
			return nil
		},
	}
}

// parseExtras reads --extra KEY=VALUE flags.
func parseExtras(extras []string) (map[string]any, error) {
	fields := map[string]any{}
	for _, e := range extras {
		k, v, ok := strings.Cut(e, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("--extra %q: want KEY=VALUE, e.g. --extra gpu=true", e)
		}
		if _, dup := fields[k]; dup {
			return nil, fmt.Errorf("--extra %s is given twice", k)
		}
		switch {
		case slices.Contains(hostFieldNames, k):
			return nil, fmt.Errorf("--extra %s: %s is a built-in host field, not an extra capability; set it with --%s", e, k, strings.ReplaceAll(k, "_", "-"))
		case k == "name":
			return nil, fmt.Errorf("--extra %s: the name is the NAME argument", e)
		case k != "reservable" && climate.IsHostColumn(k): // reservable=false is how Blazar takes a host out
			return nil, fmt.Errorf("--extra %s: %s is a built-in host field the server sets; it cannot be set here", e, k)
		}
		fields[k] = v
	}
	return fields, nil
}

// completeHosts completes host names from the server.
func completeHosts(o *clientOptions) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
		c, err := o.completionClient(cmd)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		hosts, err := c.ListHosts(cmd.Context())
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		names := make([]string, 0, len(hosts))
		for _, h := range hosts {
			names = append(names, h.HypervisorHostname)
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}

func newHostPropertyCmd(o *clientOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "property",
		Short: "List host properties and make them private or public",
		Example: `  climate host property list --detail
  climate host property show gpu
  climate host property set gpu_serial --private`,
	}
	cmd.AddCommand(newPropertyListCmd(o), newPropertyShowCmd(o), newPropertySetCmd(o))
	return cmd
}

func newPropertyListCmd(o *clientOptions) *cobra.Command {
	var all, detail bool
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List the properties hosts have",
		Example: "  climate host property list\n  climate host property list --detail --all -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.client(cmd)
			if err != nil {
				return err
			}
			props, err := c.ListProperties(cmd.Context(), all, detail)
			if err != nil {
				return err
			}
			cols := []string{"property"}
			if detail {
				cols = append(cols, "private", "values")
			}
			return o.out.printList(cmd.OutOrStdout(), props, cols)
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "include private properties (admins)")
	cmd.Flags().BoolVar(&detail, "detail", false, "show each property's values and whether it is private")
	return cmd
}

func newPropertyShowCmd(o *clientOptions) *cobra.Command {
	return &cobra.Command{
		Use:     "show NAME",
		Short:   "Show a property's values and privacy",
		Example: "  climate host property show gpu",
		Args:    exactArgs(1, "NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client(cmd)
			if err != nil {
				return err
			}
			p, err := findProperty(cmd, c, args[0])
			if err != nil {
				return err
			}
			return o.out.printObject(cmd.OutOrStdout(), p)
		},
	}
}

func findProperty(cmd *cobra.Command, c *client.Client, name string) (*api.Property, error) {
	props, err := c.ListProperties(cmd.Context(), true, true)
	if err != nil {
		return nil, err
	}
	for i := range props {
		if props[i].Name == name {
			return &props[i], nil
		}
	}
	return nil, &client.Error{Status: 404, Message: fmt.Sprintf("No host property %q", name)}
}

func newPropertySetCmd(o *clientOptions) *cobra.Command {
	var private, public bool
	cmd := &cobra.Command{
		Use:   "set NAME --private|--public",
		Short: "Make a property private (admins only see it) or public",
		Example: `  climate host property set gpu_serial --private
  climate host property set gpu_serial --public`,
		Args: exactArgs(1, "NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if private == public {
				return fmt.Errorf("give exactly one of --private and --public")
			}
			c, err := o.client(cmd)
			if err != nil {
				return err
			}
			if _, err := c.SetPropertyPrivate(cmd.Context(), args[0], private); err != nil {
				return err
			}
			p, err := findProperty(cmd, c, args[0])
			if err != nil {
				return err
			}
			return o.out.printObject(cmd.OutOrStdout(), p)
		},
	}
	cmd.Flags().BoolVar(&private, "private", false, "hide the property from non-admins")
	cmd.Flags().BoolVar(&public, "public", false, "show the property to everyone")
	return cmd
}
