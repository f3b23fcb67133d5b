package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"climate/http/client"
)

// slotColumns are the columns of availability tables.
var slotColumns = []string{"start_date", "end_date", "free_hosts"}

func newAvailabilityCmd() *cobra.Command {
	var filter client.Filter
	cmd := &cobra.Command{
		Use:   "availability",
		Short: "Ask when hosts are free (earliest slot, timeline)",
		Long: `Ask a running Climate server about free capacity. Property filters use Blazar's query
language.

` + clientHelp,
		Example: `  climate availability earliest --count 2 --duration 6h
  climate availability timeline --from now --to +7d --step 1d`,
	}
	o := addClientFlags(cmd)
	f := cmd.PersistentFlags()
	f.StringVar(&filter.HypervisorProperties, "hypervisor-properties", "", `host filter, e.g. '[">=", "$memory_mb", "131072"]'`)
	f.StringVar(&filter.ResourceProperties, "resource-properties", "", `host filter, e.g. '["==", "$gpu", "true"]'`)
	cmd.AddCommand(newEarliestCmd(o, &filter), newTimelineCmd(o, &filter))
	return cmd
}

// availabilityDate turns a date flag into the API's form; empty stays empty.
func availabilityDate(flag, s string) (string, error) {
	if s == "" || s == "now" {
		return s, nil
	}
	t, _, err := parseDate(flag, s, time.Now())
	if err != nil {
		return "", err
	}
	return wireDate(t), nil
}

func newEarliestCmd(o *clientOptions, filter *client.Filter) *cobra.Command {
	q := client.SlotQuery{}
	cmd := &cobra.Command{
		Use:   "earliest",
		Short: "Find the earliest windows in which COUNT matching hosts are free for DURATION",
		Example: `  climate availability earliest --count 2 --duration 6h --resource-properties '["==", "$gpu", "true"]'
  climate availability earliest --count 10 --duration 3d --after "2030-01-01 00:00" --deadline "2030-02-01 00:00" -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if q.Duration == "" {
				return fmt.Errorf("--duration is required (e.g. 90m, 6h, 2d)")
			}
			if _, err := parseDelta("duration", q.Duration); err != nil {
				return err
			}
			var err error
			if q.After, err = availabilityDate("after", q.After); err != nil {
				return err
			}
			if q.Deadline, err = availabilityDate("deadline", q.Deadline); err != nil {
				return err
			}
			c, err := o.client(cmd)
			if err != nil {
				return err
			}
			q.Filter = *filter
			slots, err := c.Earliest(cmd.Context(), q)
			if err != nil {
				return err
			}
			if len(slots) == 0 && o.out.format == "table" {
				fmt.Fprintln(cmd.OutOrStdout(), "No window found before the deadline.")
				return nil
			}
			return o.out.printList(cmd.OutOrStdout(), slots, slotColumns)
		},
	}
	f := cmd.Flags()
	f.IntVar(&q.Count, "count", 1, "number of hosts that must be free")
	f.StringVar(&q.Duration, "duration", "", "how long they must be free (90m, 6h, 2d, 1d12h)")
	f.StringVar(&q.After, "after", "", "earliest start: "+dateHelp+" (default now)")
	f.StringVar(&q.Deadline, "deadline", "", "the window must end by then (default a year after --after)")
	f.IntVar(&q.Limit, "limit", 3, "how many windows to list")
	return cmd
}

func newTimelineCmd(o *clientOptions, filter *client.Filter) *cobra.Command {
	q := client.TimelineQuery{}
	cmd := &cobra.Command{
		Use:   "timeline",
		Short: "Count matching hosts free in each step of a time range",
		Example: `  climate availability timeline --from "2030-01-01 00:00" --to "2030-01-08 00:00" --step 1d
  climate availability timeline --from now --to +2d --step 6h --resource-properties '["==", "$gpu", "true"]'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if q.From == "" || q.To == "" {
				return fmt.Errorf("--from and --to are required (%s)", dateHelp)
			}
			var err error
			if q.From, err = availabilityDate("from", q.From); err != nil {
				return err
			}
			if q.To, err = availabilityDate("to", q.To); err != nil {
				return err
			}
			c, err := o.client(cmd)
			if err != nil {
				return err
			}
			q.Filter = *filter
			tl, err := c.Timeline(cmd.Context(), q)
			if err != nil {
				return err
			}
			if o.out.format == "json" || o.out.format == "yaml" {
				if len(o.out.columns) == 0 {
					return writeStructured(cmd.OutOrStdout(), o.out.format, tl)
				}
			} else if o.out.format == "table" {
				fmt.Fprintf(cmd.OutOrStdout(), "%d matching hosts\n", tl.MatchingHosts)
			}
			return o.out.printList(cmd.OutOrStdout(), tl.Timeline, slotColumns)
		},
	}
	f := cmd.Flags()
	f.StringVar(&q.From, "from", "", "range start: "+dateHelp)
	f.StringVar(&q.To, "to", "", "range end: "+dateHelp)
	f.StringVar(&q.Step, "step", "1h", "bucket width (90m, 6h, 1d)")
	return cmd
}
