package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"climate/http/api"
	"climate/http/client"
)

// allocationRow is one host held by one reservation: the rows of allocation tables.
type allocationRow struct {
	ResourceID    string `json:"resource_id"`
	Host          string `json:"host"` // its hypervisor hostname
	ReservationID string `json:"reservation_id"`
	LeaseID       string `json:"lease_id"`
	StartDate     string `json:"start_date"`
	EndDate       string `json:"end_date"`
	// Slots is how many instance slots the reservation holds on the host (none: whole).
	Slots int `json:"slots,omitempty"`
}

func newAllocationCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "allocation",
		Short: "See which reservations hold which hosts, and when (admins)",
		Long: `Allocations are the hosts reservations hold over their windows: whole, or as instance
slots (the SLOTS column counts them). Tables show one row per host and reservation; -o json and -o yaml print the API's objects (one per host
with its reservations) unless --column is given.

` + clientHelp,
		Example: `  climate allocation list
  climate allocation list --lease train
  climate allocation list --from "2030-01-01 00:00" --to +7d
  climate allocation show node-1`,
	}
	o := addClientFlags(cmd)
	cmd.AddCommand(newAllocationListCmd(o), newAllocationShowCmd(o))
	return cmd
}

type allocationFilter struct {
	lease, reservation string
	from, to           string
}

func (f *allocationFilter) addFlags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.lease, "lease", "", "only this lease's allocations (name or id)")
	cmd.Flags().StringVar(&f.reservation, "reservation-id", "", "only this reservation's allocations")
	cmd.Flags().StringVar(&f.from, "from", "", "only allocations that end after this date (default: now, unless --lease or --reservation-id): "+dateHelp)
	cmd.Flags().StringVar(&f.to, "to", "", "only allocations that start before this date (+DURATION counts from --from): "+dateHelp)
}

func (f *allocationFilter) query(cmd *cobra.Command, c *client.Client) (client.AllocationQuery, error) {
	q := client.AllocationQuery{ReservationID: f.reservation}
	now := time.Now()
	from := now
	if f.from != "" {
		t, isNow, err := parseDate("from", f.from, now)
		if err != nil {
			return q, err
		}
		if !isNow {
			from = t
		}
		q.From = wireDate(from)
	}
	if f.to != "" {
		t, isNow, err := parseDate("to", f.to, from)
		if err != nil {
			return q, err
		}
		if isNow {
			t = now
		}
		if f.from != "" && !t.After(from) {
			return q, fmt.Errorf("--to %q is not after --from %q", f.to, f.from)
		}
		q.To = wireDate(t)
	}
	if f.lease != "" {
		l, err := c.FindLease(cmd.Context(), f.lease)
		if err != nil {
			return q, fmt.Errorf("--lease: %w", err)
		}
		q.LeaseID = l.ID
	}
	return q, nil
}

// resourceTypeArg accepts Blazar's optional leading resource type ("host").
func resourceTypeArg(args []string) ([]string, error) {
	if len(args) > 0 && args[0] == "host" {
		return args[1:], nil
	}
	if len(args) > 0 && (args[0] == "instance" || args[0] == "floatingip") {
		return nil, fmt.Errorf("allocations of %s reservations are not available yet; only host", args[0])
	}
	return args, nil
}

func newAllocationListCmd(o *clientOptions) *cobra.Command {
	var f allocationFilter
	var limit int
	cmd := &cobra.Command{
		Use:   "list [host]",
		Short: "List host allocations",
		Long: `List, host by host, the reservations holding each host: from now on by default, or
over --from/--to. The server is asked for them page by page; --limit stops after the
first N hosts.`,
		Example: `  climate allocation list
  climate allocation list host --lease train -o json
  climate allocation list --from now --to +1d
  climate allocation list --sort-by start_date -c resource_id -c lease_id -c start_date`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if rest, err := resourceTypeArg(args); err != nil || len(rest) > 0 {
				return firstErr(err, fmt.Errorf("allocation list takes an optional resource type (host), not %q", args[0]))
			}
			if limit < 0 {
				return fmt.Errorf("--limit %d: want a positive number of hosts, or 0 for all", limit)
			}
			c, err := o.client(cmd)
			if err != nil {
				return err
			}
			q, err := f.query(cmd, c)
			if err != nil {
				return err
			}
			q.Limit = limit
			allocs, err := c.ListAllocations(cmd.Context(), q)
			if err != nil {
				return err
			}
			return printAllocations(cmd, o, allocs, false)
		},
	}
	f.addFlags(cmd)
	cmd.Flags().IntVar(&limit, "limit", 0, "list at most this many hosts, the first registered (0: all)")
	return cmd
}

func newAllocationShowCmd(o *clientOptions) *cobra.Command {
	var f allocationFilter
	cmd := &cobra.Command{
		Use:               "show [host] NAME|ID",
		Short:             "Show the reservations holding one host",
		Example:           "  climate allocation show node-1\n  climate allocation show host 3 -o json",
		Args:              cobra.RangeArgs(1, 2),
		ValidArgsFunction: completeHosts(o),
		RunE: func(cmd *cobra.Command, args []string) error {
			rest, err := resourceTypeArg(args)
			if err != nil {
				return err
			}
			if len(rest) != 1 {
				return fmt.Errorf("allocation show takes [host] NAME|ID")
			}
			c, err := o.client(cmd)
			if err != nil {
				return err
			}
			h, err := c.FindHost(cmd.Context(), rest[0])
			if err != nil {
				return err
			}
			q, err := f.query(cmd, c)
			if err != nil {
				return err
			}
			a, err := c.GetAllocation(cmd.Context(), h.ID, q)
			if err != nil {
				return err
			}
			return printAllocations(cmd, o, []api.Allocation{*a}, true)
		},
	}
	f.addFlags(cmd)
	return cmd
}

// printAllocations prints the API objects in JSON/YAML (one object for show), and one
// row per host and reservation otherwise.
func printAllocations(cmd *cobra.Command, o *clientOptions, allocs []api.Allocation, show bool) error {
	structured := o.out.format == "json" || o.out.format == "yaml"
	if structured && len(o.out.columns) == 0 && o.out.sortBy == "" {
		if show {
			return writeStructured(cmd.OutOrStdout(), o.out.format, allocs[0])
		}
		return writeStructured(cmd.OutOrStdout(), o.out.format, allocs)
	}
	rows := []allocationRow{}
	for _, a := range allocs {
		for _, r := range a.Reservations {
			rows = append(rows, allocationRow{a.ResourceID, a.ResourceName, r.ID, r.LeaseID, r.StartDate, r.EndDate, r.Slots})
		}
	}
	return o.out.printList(cmd.OutOrStdout(), rows, []string{"resource_id", "host", "reservation_id", "lease_id", "start_date", "end_date", "slots"})
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
