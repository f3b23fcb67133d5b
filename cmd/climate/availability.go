package main

import (
	"fmt"
	"github.com/spf13/pflag"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"climate/http/client"
)

// slotColumns are the columns of availability tables.
var slotColumns = []string{"start_date", "end_date", "free_hosts"}

// timelineColumns are a timeline's columns: free hosts, and the slots and floating IPs
// when asked for.
func timelineColumns(inst *client.Instances, fips *client.FloatingIPs) []string {
	cols := slices.Clone(slotColumns)
	if inst != nil {
		cols = append(cols, "free_slots")
	}
	if fips != nil {
		cols = append(cols, "free_floatingips")
	}
	return cols
}

// resourceFlags are an availability command's instance slot and floating IP flags.
type resourceFlags struct {
	inst client.Instances
	fips client.FloatingIPs
}

func (r *resourceFlags) add(f *pflag.FlagSet, earliest bool) {
	if earliest {
		f.IntVar(&r.inst.Amount, "slots", 0, "instance slots that must also be free (with --vcpus, --memory-mb, --disk-gb, --affinity)")
		f.StringVar(&r.inst.Affinity, "affinity", "", "the slots' affinity: true (one host), false (distinct hosts); default none")
		f.IntVar(&r.fips.Amount, "floatingips", 0, "floating IPs of --network-id that must also be free")
	}
	f.IntVar(&r.inst.VCPUs, "vcpus", 0, "vCPUs per instance slot")
	f.IntVar(&r.inst.MemoryMB, "memory-mb", 0, "memory per instance slot, in MB")
	f.IntVar(&r.inst.DiskGB, "disk-gb", 0, "disk per instance slot, in GB")
	f.StringVar(&r.fips.NetworkID, "network-id", "", "the external network of the floating IPs")
}

// queries returns the instance and floating IP parts of a query, nil when not asked.
func (r *resourceFlags) queries(f *pflag.FlagSet) (*client.Instances, *client.FloatingIPs) {
	var inst *client.Instances
	var fips *client.FloatingIPs
	for _, name := range []string{"slots", "vcpus", "memory-mb", "disk-gb", "affinity"} {
		if fl := f.Lookup(name); fl != nil && fl.Changed {
			inst = &r.inst
		}
	}
	for _, name := range []string{"floatingips", "network-id"} {
		if fl := f.Lookup(name); fl != nil && fl.Changed {
			fips = &r.fips
		}
	}
	return inst, fips
}

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
	var rf resourceFlags
	cmd := &cobra.Command{
		Use:   "earliest",
		Short: "Find the earliest windows in which COUNT matching hosts (and slots, floating IPs) are free for DURATION",
		Long: `Find the earliest windows of --duration in which --count matching hosts are free and,
when asked, --slots instance slots of --vcpus/--memory-mb/--disk-gb on matching hosts and
--floatingips addresses of --network-id, all at once. With --slots or --floatingips,
--count defaults to 0.`,
		Example: `  climate availability earliest --count 2 --duration 6h --resource-properties '["==", "$gpu", "true"]'
  climate availability earliest --count 10 --duration 3d --after "2030-01-01 00:00" --deadline "2030-02-01 00:00" -o json

  # 6 hours with 8 slots of 4 vCPUs / 16 GB and 2 floating IPs of ext-net
  climate availability earliest --duration 6h --slots 8 --vcpus 4 --memory-mb 16384 --floatingips 2 --network-id ext-net`,
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
			q.Instances, q.FloatingIPs = rf.queries(cmd.Flags())
			if !cmd.Flags().Changed("count") && (q.Instances != nil || q.FloatingIPs != nil) {
				q.Count = 0
			}
			slots, err := c.Earliest(cmd.Context(), q)
			if err != nil {
				return err
			}
			if len(slots) == 0 && o.out.format == "table" {
				if !o.out.noHeader { // --no-headers: no text but the rows, here none
					fmt.Fprintln(cmd.OutOrStdout(), "No window found before the deadline.")
				}
				return nil
			}
			cols := slotColumns
			if q.Count == 0 {
				cols = cols[:2] // a search of slots or addresses only: no host count
			}
			return o.out.printList(cmd.OutOrStdout(), slots, cols)
		},
	}
	f := cmd.Flags()
	f.IntVar(&q.Count, "count", 1, "number of hosts that must be free")
	f.StringVar(&q.Duration, "duration", "", "how long they must be free (90m, 6h, 2d, 1d12h)")
	f.StringVar(&q.After, "after", "", "earliest start: "+dateHelp+" (default now)")
	f.StringVar(&q.Deadline, "deadline", "", "the window must end by then (default a year after --after)")
	f.IntVar(&q.Limit, "limit", 3, "how many windows to list")
	rf.add(f, true)
	return cmd
}

func newTimelineCmd(o *clientOptions, filter *client.Filter) *cobra.Command {
	q := client.TimelineQuery{}
	var rf resourceFlags
	cmd := &cobra.Command{
		Use:   "timeline",
		Short: "Count matching hosts (and slots, floating IPs) free in each step of a time range",
		Long: `Count the matching hosts free for each whole step of a range; with --vcpus/--memory-mb/
--disk-gb also the instance slots of that size, with --network-id the floating IPs of that
network. The table starts with the number of matching hosts, a line that --no-headers
leaves out with the table's header.`,
		Example: `  climate availability timeline --from "2030-01-01 00:00" --to "2030-01-08 00:00" --step 1d
  climate availability timeline --from now --to +2d --step 6h --resource-properties '["==", "$gpu", "true"]'
  climate availability timeline --from now --to +1d --step 6h --vcpus 4 --memory-mb 16384 --network-id ext-net`,
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
			q.Instances, q.FloatingIPs = rf.queries(cmd.Flags())
			tl, err := c.Timeline(cmd.Context(), q)
			if err != nil {
				return err
			}
			if o.out.format == "json" || o.out.format == "yaml" {
				if len(o.out.columns) == 0 {
					return writeStructured(cmd.OutOrStdout(), o.out.format, tl)
				}
			} else if o.out.format == "table" && !o.out.noHeader {
				fmt.Fprintf(cmd.OutOrStdout(), "%d matching hosts\n", tl.MatchingHosts)
			}
			return o.out.printList(cmd.OutOrStdout(), tl.Timeline, timelineColumns(q.Instances, q.FloatingIPs))
		},
	}
	f := cmd.Flags()
	f.StringVar(&q.From, "from", "", "range start: "+dateHelp)
	f.StringVar(&q.To, "to", "", "range end: "+dateHelp)
	f.StringVar(&q.Step, "step", "1h", "bucket width (90m, 6h, 1d)")
	rf.add(f, false)
	return cmd
}
