package main

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"climate/http/api"
	"climate/http/client"
)

// usageColumns are the usage table's default columns.
var usageColumns = []string{"project_id", "lease_name", "resource_type", "start_date", "end_date", "reserved_hours", "held_hours", "cost", "charged", "status"}

func newUsageCmd() *cobra.Command {
	var project, from, to string
	cmd := &cobra.Command{
		Use:   "usage",
		Short: "Show what each reservation reserved, held and cost",
		Long: `Show, for every reservation, what it reserved and what it actually held (from the
lease's start to its end or early deletion), in resource-hours of its class (host-hours,
vCPU-hours or IP-hours), and what it cost. With --from and --to, the figures are those
within that window (a month's bill). cost is what the hours held cost, at the
project's prices; charged is what the reservation counts against the project's budget
now: its whole reserved window while it may still hold something, what it held once it
is over (ending early refunds the rest).

Members see their own project's usage; admins any project's (--project) or all. Records
are kept after a lease is deleted. A table ends with each project's totals per class.

` + clientHelp,
		Example: `  climate usage
  climate usage --project physics --from "2030-01-01 00:00" --to "2030-02-01 00:00"
  climate usage --from "2030-01-01 00:00" --to +31d -o csv > january.csv`,
		Args: cobra.NoArgs,
	}
	o := addClientFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		q := client.UsageQuery{ProjectID: project}
		now := time.Now()
		base := now
		if from != "" {
			t, _, err := parseDate("from", from, now)
			if err != nil {
				return err
			}
			base, q.From = t, wireDate(t)
		}
		if to != "" {
			t, _, err := parseDate("to", to, base)
			if err != nil {
				return err
			}
			if from != "" && !t.After(base) {
				return fmt.Errorf("--to %q is not after --from %q", to, from)
			}
			q.To = wireDate(t)
		}
		c, err := o.client(cmd)
		if err != nil {
			return err
		}
		records, err := c.ListUsage(cmd.Context(), q)
		if err != nil {
			return err
		}
		w := cmd.OutOrStdout()
		if err := o.out.printList(w, records, usageColumns); err != nil {
			return err
		}
		if o.out.format == "table" && !o.out.noHeader && len(records) > 0 {
			fmt.Fprintln(w)
			return printUsageTotals(w, records)
		}
		return nil
	}
	cmd.Flags().StringVar(&project, "project", "", "only this project's usage (project id; admins)")
	cmd.Flags().StringVar(&from, "from", "", "count only from this date: "+dateHelp)
	cmd.Flags().StringVar(&to, "to", "", "count only until this date (+DURATION counts from --from): "+dateHelp)
	return cmd
}

// printUsageTotals prints each project's totals per class.
func printUsageTotals(w io.Writer, records []api.Usage) error {
	type key struct{ project, class string }
	type sums struct{ reserved, held, cost, charged float64 }
	totals := map[key]*sums{}
	var keys []key
	for _, r := range records {
		k := key{r.ProjectID, r.Class}
		if totals[k] == nil {
			totals[k] = &sums{}
			keys = append(keys, k)
		}
		s := totals[k]
		s.reserved += r.ReservedHours
		s.held += r.HeldHours
		s.cost += r.Cost
		s.charged += r.Charged
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].project != keys[j].project {
			return keys[i].project < keys[j].project
		}
		return keys[i].class < keys[j].class
	})
	fmt.Fprintln(w, "Totals")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PROJECT ID\tCLASS\tRESERVED HOURS\tHELD HOURS\tCOST\tCHARGED")
	for _, k := range keys {
		s := totals[k]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", k.project, k.class, num(s.reserved), num(s.held), num(s.cost), num(s.charged))
	}
	return tw.Flush()
}

func num(v float64) string { return strconv.FormatFloat(float64(int64(v*1e6+0.5))/1e6, 'f', -1, 64) }

func newLimitsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "limits",
		Short: "Show and set a project's limits, budget and prices",
		Long: `A project's limits bound what its leases may hold and cost. They are checked when a
lease is created or updated, in the same transaction as the booking, so concurrent
requests cannot together pass one; a refusal is a 403 that says which limit refused and
what would fit. Leases already booked are never refused after the fact.

  max_hosts, max_vcpus,   the most hosts, instance vCPUs and floating IPs the project
  max_floating_ips        holds at any instant
  max_leases              the most leases booked and not yet over
  max_lease_duration      the longest lease (over the server's --max-lease-duration)
  max_advance             how far ahead of now a lease may start
  budget                  what its leases may cost, in units: by default 1 unit per
                          host-hour, vCPU-hour or IP-hour
  prices                  units per resource-hour of each class (host, vcpu, floatingip)
  multipliers             scale the price of hosts with a property (gpu=true: 4)
  exempt                  no rule applies (nor the server's durations or external filter)

A lease is charged its whole reserved window when booked; one that ends early or is
deleted is refunded what it did not hold, and one deleted before it starts costs
nothing. Admins set limits (climate:limits:put); members read their own project's.

` + clientHelp,
		Example: `  climate limits show physics
  climate limits set physics --max-hosts 10 --max-lease-duration 7d --budget 2000
  climate limits set physics --price host=1 --price vcpu=0.05 --multiplier gpu=true:4
  climate limits set physics --budget none`,
	}
	o := addClientFlags(cmd)
	cmd.AddCommand(newLimitsShowCmd(o), newLimitsSetCmd(o))
	return cmd
}

func newLimitsShowCmd(o *clientOptions) *cobra.Command {
	return &cobra.Command{
		Use:     "show PROJECT",
		Short:   "Show a project's limits, budget, what it was charged and its prices",
		Example: "  climate limits show physics\n  climate limits show physics -c budget -c charged -c remaining -o value",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client(cmd)
			if err != nil {
				return err
			}
			l, err := c.GetLimits(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return o.out.printObject(cmd.OutOrStdout(), l)
		},
	}
}

func newLimitsSetCmd(o *clientOptions) *cobra.Command {
	var ints = []struct{ flag, key, what string }{
		{"max-hosts", "max_hosts", "the most hosts held at any instant"},
		{"max-vcpus", "max_vcpus", "the most instance vCPUs held at any instant"},
		{"max-floating-ips", "max_floating_ips", "the most floating IPs held at any instant"},
		{"max-leases", "max_leases", "the most leases booked and not yet over"},
	}
	var durations = []struct{ flag, key, what string }{
		{"max-lease-duration", "max_lease_duration", "the longest lease"},
		{"max-advance", "max_advance", "how far ahead of now a lease may start"},
	}
	values := map[string]*string{}
	var budget string
	var prices, multipliers []string
	var exempt bool
	cmd := &cobra.Command{
		Use:   "set PROJECT",
		Short: "Set some of a project's limits, budget and prices (admins)",
		Long: `Set the limits given; the others stay as they are. A limit set to "none" is removed.
--price replaces the project's prices (classes not given cost 1 unit per hour), and
--multiplier its multipliers; --price none and --multiplier none remove them.`,
		Example: `  climate limits set physics --max-hosts 10 --max-lease-duration 7d --budget 2000
  climate limits set physics --price host=1 --price vcpu=0.05 --multiplier gpu=true:4
  climate limits set physics --max-advance 30d --max-leases 20
  climate limits set physics --budget none --exempt`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			changes := map[string]any{}
			for _, f := range ints {
				if !cmd.Flags().Changed(f.flag) {
					continue
				}
				v, err := noneOr(f.flag, *values[f.key], func(s string) (any, error) {
					n, err := strconv.Atoi(s)
					if err != nil || n < 0 {
						return nil, fmt.Errorf("want a whole number of 0 or more")
					}
					return n, nil
				})
				if err != nil {
					return err
				}
				changes[f.key] = v
			}
			for _, f := range durations {
				if !cmd.Flags().Changed(f.flag) {
					continue
				}
				v, err := noneOr(f.flag, *values[f.key], func(s string) (any, error) {
					d, err := parseDelta(f.flag, s)
					if err != nil {
						return nil, fmt.Errorf("want a duration such as 12h, 7d or 1d12h")
					}
					return int64(d / time.Second), nil
				})
				if err != nil {
					return err
				}
				changes[f.key] = v
			}
			if cmd.Flags().Changed("budget") {
				v, err := noneOr("budget", budget, func(s string) (any, error) {
					b, err := strconv.ParseFloat(s, 64)
					if err != nil {
						return nil, fmt.Errorf("want a number of units")
					}
					return b, nil
				})
				if err != nil {
					return err
				}
				changes["budget"] = v
			}
			if cmd.Flags().Changed("price") {
				v, err := parsePrices(prices)
				if err != nil {
					return err
				}
				changes["prices"] = v
			}
			if cmd.Flags().Changed("multiplier") {
				v, err := parseMultipliers(multipliers)
				if err != nil {
					return err
				}
				changes["multipliers"] = v
			}
			if cmd.Flags().Changed("exempt") {
				changes["exempt"] = exempt
			}
			if len(changes) == 0 {
				return fmt.Errorf("nothing to set: give at least one limit (see %s --help)", cmd.CommandPath())
			}
			c, err := o.client(cmd)
			if err != nil {
				return err
			}
			l, err := c.SetLimits(cmd.Context(), args[0], changes)
			if err != nil {
				return err
			}
			return o.out.printObject(cmd.OutOrStdout(), l)
		},
	}
	for _, f := range ints {
		values[f.key] = cmd.Flags().String(f.flag, "", f.what+`: a number, or "none" for no limit`)
	}
	for _, f := range durations {
		values[f.key] = cmd.Flags().String(f.flag, "", f.what+`: a duration (12h, 7d, 1d12h), or "none" for no limit`)
	}
	cmd.Flags().StringVar(&budget, "budget", "", `what the project's leases may cost, in units, or "none" for no budget`)
	cmd.Flags().StringArrayVar(&prices, "price", nil, `CLASS=UNITS: the price of a resource-hour of host, vcpu or floatingip (repeatable; replaces all prices; "none": the defaults, 1 each)`)
	cmd.Flags().StringArrayVar(&multipliers, "multiplier", nil, `PROPERTY=VALUE:FACTOR: scale the price of hosts whose property has this value (repeatable; replaces all multipliers; "none": no multipliers)`)
	cmd.Flags().BoolVar(&exempt, "exempt", false, "exempt the project from every rule (--exempt=false to hold it to them again)")
	return cmd
}

// noneOr returns nil for "none" (a limit removed), else s parsed.
func noneOr(flag, s string, parse func(string) (any, error)) (any, error) {
	if strings.EqualFold(s, "none") {
		return nil, nil
	}
	v, err := parse(s)
	if err != nil {
		return nil, fmt.Errorf("--%s %q: %v, or none", flag, s, err)
	}
	return v, nil
}

func parsePrices(args []string) (any, error) {
	if len(args) == 1 && strings.EqualFold(args[0], "none") {
		return nil, nil
	}
	out := map[string]float64{}
	for _, a := range args {
		class, v, ok := strings.Cut(a, "=")
		p, err := strconv.ParseFloat(v, 64)
		if !ok || class == "" || err != nil {
			return nil, fmt.Errorf("--price %q: want CLASS=UNITS, such as host=2 or vcpu=0.05", a)
		}
		out[class] = p
	}
	return out, nil
}

func parseMultipliers(args []string) (any, error) {
	if len(args) == 1 && strings.EqualFold(args[0], "none") {
		return nil, nil
	}
	out := []map[string]any{}
	for _, a := range args {
		i := strings.LastIndex(a, ":")
		prop, value, ok := strings.Cut(a[:max(i, 0)], "=")
		var f float64
		var err error
		if i >= 0 {
			f, err = strconv.ParseFloat(a[i+1:], 64)
		}
		if i < 0 || !ok || prop == "" || err != nil {
			return nil, fmt.Errorf("--multiplier %q: want PROPERTY=VALUE:FACTOR, such as gpu=true:4", a)
		}
		out = append(out, map[string]any{"property": prop, "value": value, "factor": f})
	}
	return out, nil
}
