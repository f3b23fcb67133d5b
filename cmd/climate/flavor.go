package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"climate/http/api"
)

// flavorColumns are flavor list's default columns.
var flavorColumns = []string{"id", "name", "vcpus", "ram", "disk", "ephemeral"}

// flavorView is a flavor as the CLI prints it: the API's object with the ephemeral disk
// under a plain key (the API's OS-FLV-EXT-DATA:ephemeral cannot be named with --column),
// as openstack flavor list does.
type flavorView struct {
	ID         string            `json:"id"`
	Name       string            `json:"name"`
	VCPUs      int               `json:"vcpus"`
	RAM        int               `json:"ram"`
	Disk       int               `json:"disk"`
	Ephemeral  int               `json:"ephemeral"`
	ExtraSpecs map[string]string `json:"extra_specs"`
	CreatedAt  string            `json:"created_at"`
	UpdatedAt  *string           `json:"updated_at"`
}

func viewFlavor(f *api.Flavor) flavorView {
	return flavorView{ID: f.ID, Name: f.Name, VCPUs: f.VCPUs, RAM: f.RAM, Disk: f.Disk, Ephemeral: f.Ephemeral,
		ExtraSpecs: f.ExtraSpecs, CreatedAt: f.CreatedAt, UpdatedAt: f.UpdatedAt}
}

func newFlavorCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "flavor",
		Aliases: []string{"flavors"},
		Short:   "Register the flavors instance reservations name (admins; everyone lists them)",
		Long: `Flavors are instance sizes: vCPUs, RAM (MB), root disk and ephemeral disk (GB), and
Nova's extra specs. A flavor:instance reservation asks for an amount of instances of a
registered flavor. Climate runs without Nova and keeps the flavors itself (GET/POST
/v1/flavors, shaped as Nova's flavors). Admins register and delete them; every reader
or member lists them. A reservation copies its flavor's sizes when it is made, so
deleting a flavor changes no lease.

Extra specs follow Nova's rules for the keys placement reads: trait:NAME must be
"required" or "forbidden", resources:CLASS a non-negative integer (with Nova's optional
group suffix: trait1:NAME, resources_gpu:CLASS). Other keys are kept as given.

The CLI prints the ephemeral disk as "ephemeral"; the API's key is
OS-FLV-EXT-DATA:ephemeral, as Nova's.

` + clientHelp,
		Example: `  climate flavor create m1.small --vcpus 1 --ram 2048 --disk 20
  climate flavor list
  climate flavor delete m1.small`,
	}
	o := addClientFlags(cmd)
	cmd.AddCommand(newFlavorCreateCmd(o), newFlavorListCmd(o), newFlavorShowCmd(o), newFlavorDeleteCmd(o))
	return cmd
}

func newFlavorCreateCmd(o *clientOptions) *cobra.Command {
	var req api.FlavorRequest
	var specs []string
	cmd := &cobra.Command{
		Use:   "create NAME --vcpus N --ram MB --disk GB",
		Short: "Register a flavor (admins)",
		Long: `Register the flavor NAME, as openstack flavor create does. --vcpus (at least 1), --ram
in MB (at least 1) and --disk in GB (0 for a volume-backed flavor) are required;
--ephemeral is 0 unless given. --id sets the flavor's id (Nova's ids are free-form,
e.g. "1" or "m1.small"; no "/"); without it the server makes one. --extra-spec adds
one of Nova's extra specs (repeatable).`,
		Example: `  climate flavor create m1.small --vcpus 1 --ram 2048 --disk 20
  climate flavor create m1.large --id 4 --vcpus 4 --ram 8192 --disk 80 --ephemeral 20
  climate flavor create gpu.a100 --vcpus 16 --ram 131072 --disk 200 \
    --extra-spec trait:CUSTOM_GPU_A100=required --extra-spec resources:VGPU=1
  climate flavor create m1.tiny --vcpus 1 --ram 512 --disk 0 -o value -c id`,
		Args: exactArgs(1, "NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			extra, err := parseExtraSpecs(specs)
			if err != nil {
				return err
			}
			req.Name, req.ExtraSpecs = args[0], extra
			c, err := o.client(cmd)
			if err != nil {
				return err
			}
			f, err := c.CreateFlavor(cmd.Context(), req)
			if err != nil {
				return err
			}
			return o.out.printObject(cmd.OutOrStdout(), viewFlavor(f))
		},
	}
	f := cmd.Flags()
	f.IntVar(&req.VCPUs, "vcpus", 0, "virtual CPUs (required)")
	f.IntVar(&req.RAM, "ram", 0, "memory in MB (required)")
	f.IntVar(&req.Disk, "disk", 0, "root disk in GB (required; 0: volume-backed)")
	f.IntVar(&req.Ephemeral, "ephemeral", 0, "ephemeral disk in GB")
	f.StringVar(&req.ID, "id", "", "the flavor's id (default: one the server makes)")
	f.StringArrayVar(&specs, "extra-spec", nil, "an extra spec KEY=VALUE, e.g. hw:cpu_policy=dedicated (repeatable)")
	for _, name := range []string{"vcpus", "ram", "disk"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}

// parseExtraSpecs reads --extra-spec KEY=VALUE flags; nil when there are none.
func parseExtraSpecs(specs []string) (map[string]string, error) {
	if len(specs) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(specs))
	for _, s := range specs {
		k, v, ok := strings.Cut(s, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("--extra-spec %q: want KEY=VALUE, e.g. --extra-spec hw:cpu_policy=dedicated", s)
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("--extra-spec %s is given twice", k)
		}
		out[k] = v
	}
	return out, nil
}

func newFlavorListCmd(o *clientOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List flavors",
		Long:  `List the registered flavors, in registration order.`,
		Example: `  climate flavor list
  climate flavor list --sort-by ram
  climate flavor list -c name,vcpus,extra_specs
  climate flavor list -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.client(cmd)
			if err != nil {
				return err
			}
			fs, err := c.ListFlavors(cmd.Context())
			if err != nil {
				return err
			}
			views := make([]flavorView, 0, len(fs))
			for i := range fs {
				views = append(views, viewFlavor(&fs[i]))
			}
			return o.out.printList(cmd.OutOrStdout(), views, flavorColumns)
		},
	}
}

func newFlavorShowCmd(o *clientOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "show ID|NAME",
		Short: "Show a flavor",
		Example: `  climate flavor show m1.small
  climate flavor show 4 -o json
  climate flavor show gpu.a100 -o value -c extra_specs`,
		Args:              exactArgs(1, "ID|NAME"),
		ValidArgsFunction: completeFlavors(o),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client(cmd)
			if err != nil {
				return err
			}
			f, err := c.FindFlavor(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return o.out.printObject(cmd.OutOrStdout(), viewFlavor(f))
		},
	}
}

func newFlavorDeleteCmd(o *clientOptions) *cobra.Command {
	return &cobra.Command{
		Use:               "delete ID|NAME…",
		Short:             "Remove flavors (admins)",
		Long:              `Remove flavors. Reservations made with one keep the sizes they copied.`,
		Example:           "  climate flavor delete m1.small\n  climate flavor delete 4 gpu.a100",
		Args:              minArgs(1, "ID|NAME…"),
		ValidArgsFunction: completeFlavors(o),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client(cmd)
			if err != nil {
				return err
			}
			for _, ref := range args {
				f, err := c.FindFlavor(cmd.Context(), ref)
				if err == nil {
					err = c.DeleteFlavor(cmd.Context(), f.ID)
				}
				if err != nil {
					return fmt.Errorf("deleting flavor %s: %w", ref, err)
				}
				if o.out.format == "table" {
					fmt.Fprintf(cmd.OutOrStdout(), "Deleted flavor %s\n", f.ID)
				}
			}
			return nil
		},
	}
}

// completeFlavors completes flavor ids from the server, described by name and size.
func completeFlavors(o *clientOptions) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
		c, err := o.completionClient(cmd)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		fs, err := c.ListFlavors(cmd.Context())
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		out := make([]string, 0, len(fs))
		for _, f := range fs {
			out = append(out, fmt.Sprintf("%s\t%s: %d vCPUs, %d MB RAM, %d GB disk", f.ID, f.Name, f.VCPUs, f.RAM, f.Disk))
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}
