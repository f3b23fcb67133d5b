package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"climate/http/api"
)

// floatingIPColumns are floating IP list's default columns.
var floatingIPColumns = []string{"id", "floating_network_id", "floating_ip_address", "subnet_id", "reservable"}

func newFloatingIPCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "floatingip",
		Aliases: []string{"floatingips"},
		Short:   "Register the floating IPs leases will reserve (admins; everyone lists them)",
		Long: `Floating IPs are external IP addresses registered for reservation, each on an
external network (Blazar's virtual:floatingip inventory). Climate runs without Neutron:
it takes the network and subnet as given and checks only that the address is an IPv4
or IPv6 address, stored in canonical form. An address is registered once per network.
Admins register and delete them; every reader or member lists them.

Only the inventory exists for now: leases cannot reserve floating IPs yet.

` + clientHelp,
		Example: `  climate floatingip create ext-net 172.24.4.101
  climate floatingip list
  climate floatingip delete 6f1c9c2e-…`,
	}
	o := addClientFlags(cmd)
	cmd.AddCommand(newFloatingIPCreateCmd(o), newFloatingIPListCmd(o), newFloatingIPShowCmd(o), newFloatingIPDeleteCmd(o))
	return cmd
}

func newFloatingIPCreateCmd(o *clientOptions) *cobra.Command {
	var subnet string
	cmd := &cobra.Command{
		Use:   "create NETWORK_ID ADDRESS",
		Short: "Register a floating IP on an external network (admins)",
		Long: `Register ADDRESS (IPv4 or IPv6) on the external network NETWORK_ID, as
openstack reservation floatingip create does. --subnet-id records the subnet the
address belongs to (Climate's extension: without Neutron nothing looks it up).`,
		Example: `  climate floatingip create ext-net 172.24.4.101
  climate floatingip create ext-net 2001:db8::10 --subnet-id ext-subnet-v6
  climate floatingip create ext-net 172.24.4.102 -o value -c id`,
		Args: exactArgs(2, "NETWORK_ID ADDRESS"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client(cmd)
			if err != nil {
				return err
			}
			f, err := c.CreateFloatingIP(cmd.Context(), api.FloatingIPRequest{FloatingNetworkID: args[0], Address: args[1], SubnetID: subnet})
			if err != nil {
				return err
			}
			return o.out.printObject(cmd.OutOrStdout(), f)
		},
	}
	cmd.Flags().StringVar(&subnet, "subnet-id", "", "the subnet the address belongs to")
	return cmd
}

func newFloatingIPListCmd(o *clientOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List floating IPs",
		Long:  `List the registered floating IPs, in registration order.`,
		Example: `  climate floatingip list
  climate floatingip list --sort-by floating_ip_address
  climate floatingip list -c id,floating_ip_address -o value
  climate floatingip list -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.client(cmd)
			if err != nil {
				return err
			}
			fs, err := c.ListFloatingIPs(cmd.Context())
			if err != nil {
				return err
			}
			return o.out.printList(cmd.OutOrStdout(), fs, floatingIPColumns)
		},
	}
}

func newFloatingIPShowCmd(o *clientOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "show ID",
		Short: "Show a floating IP",
		Example: `  climate floatingip show 6f1c9c2e-…
  climate floatingip show 6f1c9c2e-… -o value -c floating_ip_address`,
		Args:              exactArgs(1, "ID"),
		ValidArgsFunction: completeFloatingIPs(o),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client(cmd)
			if err != nil {
				return err
			}
			f, err := c.GetFloatingIP(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return o.out.printObject(cmd.OutOrStdout(), f)
		},
	}
}

func newFloatingIPDeleteCmd(o *clientOptions) *cobra.Command {
	return &cobra.Command{
		Use:               "delete ID…",
		Short:             "Remove floating IPs from the inventory (admins)",
		Example:           "  climate floatingip delete 6f1c9c2e-…\n  climate floatingip list -o value -c id | xargs climate floatingip delete",
		Args:              minArgs(1, "ID…"),
		ValidArgsFunction: completeFloatingIPs(o),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client(cmd)
			if err != nil {
				return err
			}
			for _, id := range args {
				if err := c.DeleteFloatingIP(cmd.Context(), id); err != nil {
					return fmt.Errorf("deleting floating IP %s: %w", id, err)
				}
				if o.out.format == "table" {
					fmt.Fprintf(cmd.OutOrStdout(), "Deleted floating IP %s\n", id)
				}
			}
			return nil
		},
	}
}

// completeFloatingIPs completes floating IP ids from the server, described by their address.
func completeFloatingIPs(o *clientOptions) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
		c, err := o.completionClient(cmd)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		fs, err := c.ListFloatingIPs(cmd.Context())
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		out := make([]string, 0, len(fs))
		for _, f := range fs {
			out = append(out, f.ID+"\t"+f.Address+" on "+f.FloatingNetworkID)
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}
