package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"climate/http/api"
	"climate/http/client"
)

// maintenanceColumns are maintenance list's default columns.
var maintenanceColumns = []string{"id", "host", "start", "end", "reason"}

// healingColumns are the columns of what healing did, under maintenance add.
var healingColumns = []string{"lease_id", "reservation_id", "outcome", "down", "hosts", "detail"}

// untilFurtherNotice is how the CLI shows a window without an end (the API's null).
const untilFurtherNotice = "until further notice"

// maintenanceView is a window as the CLI prints it: the API's object with the host's
// name beside its id, and "until further notice" for a window without an end.
type maintenanceView struct {
	ID        string `json:"id"`
	Host      string `json:"host"`
	HostID    string `json:"host_id"`
	Start     string `json:"start"`
	End       string `json:"end"`
	Reason    string `json:"reason"`
	CreatedAt string `json:"created_at"`
}

// maintenanceAdded is maintenance add's answer in JSON and YAML: the window and what
// healing did.
type maintenanceAdded struct {
	maintenanceView
	Healing []api.Healing `json:"healing"`
}

func viewMaintenance(m *api.Maintenance, hostName string) maintenanceView {
	end := untilFurtherNotice
	if m.End != nil {
		end = *m.End
	}
	return maintenanceView{ID: m.ID, Host: hostName, HostID: m.HostID, Start: m.Start, End: end, Reason: m.Reason, CreatedAt: m.CreatedAt}
}

func newHostMaintenanceCmd(o *clientOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "maintenance",
		Aliases: []string{"maintenances"},
		Short:   "Take hosts out of service for a window, healing the leases on them (admins)",
		Long: `A maintenance window takes a host out of service (down, or in maintenance) from a start
until an end, or until further notice. Climate's extension; admins only (policy rule
climate:oshosts:maintenance).

While a window lasts no new lease gets the host, whole or instance slots: the
planner, the earliest-window search (start_date "earliest", climate availability)
and the timeline all see it busy.

Adding a window heals the reservations holding the host during it, in the same
transaction:
  - a reservation that has not started moves to other matching hosts, keeping its
    other resources (replanned);
  - an active one gets free hosts for the rest of its window, from now
    (replaced; its resources_changed flag is set);
  - without a replacement it keeps the host, flagged missing_resources, and its
    lease is degraded (notification lease.degraded);
  - a lease starting or ending at that moment is left for the next window change
    (skipped).
Deleting a window puts the host back: reservations it degraded are whole again and
their flags are cleared (notification lease.healed); Blazar never clears them.

` + clientHelp,
		Example: `  climate host maintenance add node-3 --start "2030-01-07 08:00" --end +4h --reason "firmware"
  climate host maintenance add node-3 --until-further-notice --reason "PSU failure"
  climate host maintenance list
  climate host maintenance list node-3
  climate host maintenance delete node-3 6f1c9c2e-…`,
	}
	cmd.AddCommand(newMaintenanceAddCmd(o), newMaintenanceListCmd(o), newMaintenanceShowCmd(o), newMaintenanceDeleteCmd(o))
	return cmd
}

func newMaintenanceAddCmd(o *clientOptions) *cobra.Command {
	var start, end, reason string
	var open bool
	cmd := &cobra.Command{
		Use:   "add NAME|ID (--end DATE | --until-further-notice) [--start DATE] [--reason TEXT]",
		Short: "Take a host out of service for a window, healing the leases on it",
		Long: `Take the host out of service from --start (default: now) until --end, or with
--until-further-notice until the window is deleted. A +DURATION end counts from the
start. The answer is the window, then what healing did to each reservation holding
the host during it: replanned, replaced, degraded or skipped (see climate host
maintenance --help).`,
		Example: `  climate host maintenance add node-3 --end +2h
  climate host maintenance add node-3 --start "2030-01-07 08:00" --end "2030-01-07 12:00" --reason "BIOS update"
  climate host maintenance add node-3 --until-further-notice --reason "PSU failure"
  climate host maintenance add node-3 --end +1d -o json`,
		Args:              exactArgs(1, "NAME|ID"),
		ValidArgsFunction: completeHosts(o),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (end == "") == !open {
				return fmt.Errorf("give exactly one of --end DATE and --until-further-notice")
			}
			now := time.Now()
			req := api.MaintenanceRequest{Start: "now", Reason: reason}
			from := now
			t, isNow, err := parseDate("start", start, now)
			if err != nil {
				return err
			}
			if !isNow {
				from, req.Start = t, wireDate(t)
			}
			if end != "" {
				t, isNow, err := parseDate("end", end, from)
				if err != nil {
					return err
				}
				if isNow {
					return fmt.Errorf("--end now: a window cannot end now; delete it instead (climate host maintenance delete)")
				}
				if !t.After(from) {
					return fmt.Errorf("--end %q is not after --start %q", end, start)
				}
				e := wireDate(t)
				req.End = &e
			}
			c, err := o.client(cmd)
			if err != nil {
				return err
			}
			h, err := c.FindHost(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			m, healed, err := c.CreateMaintenance(cmd.Context(), h.ID, req)
			if err != nil {
				return err
			}
			v := viewMaintenance(m, h.HypervisorHostname)
			w := cmd.OutOrStdout()
			if o.out.format != "table" {
				if healed == nil {
					healed = []api.Healing{}
				}
				return o.out.printObject(w, maintenanceAdded{v, healed})
			}
			if err := o.out.printObject(w, v); err != nil {
				return err
			}
			return printHealing(w, healed, o.out.noHeader)
		},
	}
	f := cmd.Flags()
	f.StringVar(&start, "start", "now", "when the host goes out of service: "+dateHelp)
	f.StringVar(&end, "end", "", "when it is back: a date or +DURATION after the start")
	f.BoolVar(&open, "until-further-notice", false, "no end: the host is back when the window is deleted")
	f.StringVar(&reason, "reason", "", "why, for the admins and the leases' notifications")
	return cmd
}

// printHealing prints, after a table, what healing did: a table of the reservations that
// held the host, under a title; with --no-headers (noHeader), only the table's rows.
func printHealing(w io.Writer, healed []api.Healing, noHeader bool) error {
	if noHeader {
		if len(healed) == 0 {
			return nil
		}
	} else if len(healed) == 0 {
		_, err := fmt.Fprintln(w, "\nNo reservation held the host during the window.")
		return err
	} else {
		fmt.Fprintln(w, "\nReservations holding the host during the window:")
	}
	table := outputOptions{format: "table", noHeader: noHeader}
	return table.printList(w, healed, healingColumns)
}

// hostNames maps host ids to hypervisor hostnames.
func hostNames(ctx context.Context, c *client.Client) (map[string]string, error) {
	hosts, err := c.ListHosts(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(hosts))
	for _, h := range hosts {
		out[h.ID] = h.HypervisorHostname
	}
	return out, nil
}

func newMaintenanceListCmd(o *clientOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "list [NAME|ID]",
		Short: "List maintenance windows, every host's or one host's, by start",
		Example: `  climate host maintenance list
  climate host maintenance list node-3 -o json`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: completeHosts(o),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client(cmd)
			if err != nil {
				return err
			}
			names, err := hostNames(cmd.Context(), c)
			if err != nil {
				return err
			}
			hostID := ""
			if len(args) == 1 {
				h, err := c.FindHost(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				hostID = h.ID
			}
			ms, err := c.ListMaintenances(cmd.Context(), hostID)
			if err != nil {
				return err
			}
			views := make([]maintenanceView, 0, len(ms))
			for i := range ms {
				views = append(views, viewMaintenance(&ms[i], names[ms[i].HostID]))
			}
			return o.out.printList(cmd.OutOrStdout(), views, maintenanceColumns)
		},
	}
}

func newMaintenanceShowCmd(o *clientOptions) *cobra.Command {
	return &cobra.Command{
		Use:               "show NAME|ID MAINTENANCE_ID",
		Short:             "Show a host's maintenance window",
		Example:           "  climate host maintenance show node-3 6f1c9c2e-…",
		Args:              exactArgs(2, "NAME|ID MAINTENANCE_ID"),
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
			m, err := c.GetMaintenance(cmd.Context(), h.ID, args[1])
			if err != nil {
				return err
			}
			return o.out.printObject(cmd.OutOrStdout(), viewMaintenance(m, h.HypervisorHostname))
		},
	}
}

func newMaintenanceDeleteCmd(o *clientOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME|ID MAINTENANCE_ID…",
		Short: "Delete maintenance windows: the host is back in service, degraded leases heal",
		Long: `Delete windows of a host: as far as they go, the host is back in service. Reservations
they degraded hold what they asked for again and their missing_resources flag and
their lease's degraded flag are cleared (notification lease.healed); reservations
degraded by other windows may now find a replacement.`,
		Example: `  climate host maintenance delete node-3 6f1c9c2e-…
  climate host maintenance delete node-3 $(climate host maintenance list node-3 -o value -c id)`,
		Args:              minArgs(2, "NAME|ID MAINTENANCE_ID…"),
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
			for _, id := range args[1:] {
				if err := c.DeleteMaintenance(cmd.Context(), h.ID, id); err != nil {
					return fmt.Errorf("deleting maintenance %s of host %s: %w", id, args[0], err)
				}
				if o.out.format == "table" {
					fmt.Fprintf(cmd.OutOrStdout(), "Deleted maintenance %s of host %s (%s)\n", id, h.HypervisorHostname, h.ID)
				}
			}
			return nil
		},
	}
}
