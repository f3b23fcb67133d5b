package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"climate/http/api"
	"climate/http/client"
)

// leaseColumns are lease list's default columns.
var leaseColumns = []string{"id", "name", "start_date", "end_date", "status"}

func newLeaseCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lease",
		Short: "Create, list, show, change, delete and wait for leases",
		Long: `Leases reserve capacity for a time window. Leases are named by name or id.

` + clientHelp,
		Example: `  climate lease create train --reservation resource_type=physical:host,min=2,max=2 --start-date now --end-date +6h
  climate lease list
  climate lease show train -o json`,
	}
	o := addClientFlags(cmd)
	cmd.AddCommand(newLeaseListCmd(o), newLeaseShowCmd(o), newLeaseCreateCmd(o), newLeaseUpdateCmd(o),
		newLeaseDeleteCmd(o), newLeaseWaitCmd(o), newLeaseCalendarCmd(o))
	return cmd
}

func newLeaseCalendarCmd(o *clientOptions) *cobra.Command {
	var q client.LeaseQuery
	var file string
	cmd := &cobra.Command{
		Use:   "calendar [--file FILE]",
		Short: "Export leases as an iCalendar file for calendar tools",
		Long: `Write the leases you may list (the server's GET /v1/leases.ics) as an iCalendar
(.ics) file, one event per lease over its window: to standard output, or to --file.
Import it into a calendar tool, or subscribe to the URL with a client that can send
the X-Auth-Token header.`,
		Example: `  climate lease calendar > leases.ics
  climate lease calendar --status ACTIVE,PENDING --file ~/leases.ics
  climate lease calendar --project physics --file physics.ics   # admins`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client(cmd)
			if err != nil {
				return err
			}
			cal, err := c.LeasesCalendar(cmd.Context(), q)
			if err != nil {
				return err
			}
			if file == "" {
				_, err = cmd.OutOrStdout().Write(cal)
				return err
			}
			return os.WriteFile(file, cal, 0o644)
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&q.Statuses, "status", nil, "only leases in these statuses (PENDING, ACTIVE, TERMINATED, …; comma-separated or repeated)")
	f.StringVar(&q.ProjectID, "project", "", "only this project's leases (admins)")
	f.StringVar(&file, "file", "", "write the calendar to this file instead of standard output")
	return cmd
}

func newLeaseListCmd(o *clientOptions) *cobra.Command {
	var q client.LeaseQuery
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the leases you can see (admins: every project's)",
		Long: `List leases in creation order. The server is asked for them page by page, so long
lists cost the server little; --limit stops after the first N.`,
		Example: `  climate lease list
  climate lease list --status ACTIVE,PENDING
  climate lease list --project physics --limit 20      # admins: one project's leases
  climate lease list --sort-by start_date -c name -c start_date -c status
  climate lease list -o json | jq -r '.[] | select(.status == "ACTIVE") | .name'
  climate lease list -o value -c id`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if q.Limit < 0 {
				return fmt.Errorf("--limit %d: want a positive number of leases, or 0 for all", q.Limit)
			}
			c, err := o.client(cmd)
			if err != nil {
				return err
			}
			leases, err := c.ListLeases(cmd.Context(), q)
			if err != nil {
				return err
			}
			return o.out.printList(cmd.OutOrStdout(), leases, leaseColumns)
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&q.Statuses, "status", nil, "only leases in these statuses (PENDING, ACTIVE, TERMINATED, ERROR, WAITING, IN_PROGRESS, FAILED, TIMEDOUT, …): repeat the flag or separate with commas")
	f.StringVar(&q.ProjectID, "project", "", "only this project's leases (admins; others see only their own project's)")
	f.IntVar(&q.Limit, "limit", 0, "list at most this many leases, the first created (0: all)")
	return cmd
}

func newLeaseShowCmd(o *clientOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "show NAME|ID",
		Short: "Show a lease with its reservations and events",
		Example: `  climate lease show train
  climate lease show train -o json
  climate lease show train -o value -c status`,
		Args:              exactArgs(1, "NAME|ID"),
		ValidArgsFunction: completeLeases(o),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client(cmd)
			if err != nil {
				return err
			}
			l, err := c.FindLease(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return o.out.printObject(cmd.OutOrStdout(), l)
		},
	}
}

type leaseCreateOptions struct {
	leaseType, retryUntil string
	priority, maxRetries  int
	preemptible           bool
	onPreempt             string
	start, end, beforeEnd string
	beforeStart           string
	reservations          []string
	physical              []string
	duration, deadline    string
	dryRun                bool
	wait                  waitOptions
}

func newLeaseCreateCmd(o *clientOptions) *cobra.Command {
	lo := &leaseCreateOptions{}
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a lease: reserve hosts, instance slots or floating IPs for a time window",
		Long: `Create a lease named NAME with one --reservation per kind of capacity.

Dates accept ` + dateHelp + `.
A +DURATION end date counts from the start. With --start-date earliest and --duration,
Climate books the first window in which the reservations fit (before --deadline, if given).`,
		Example: `  # Two hosts now, for six hours
  climate lease create train --reservation resource_type=physical:host,min=2,max=2 --end-date +6h

  # One GPU host next Monday morning, filtered by property (values may contain commas)
  climate lease create gpu-run --start-date "2030-01-07 09:00" --end-date "2030-01-07 17:00" \
    --reservation 'resource_type=physical:host,min=1,max=1,resource_properties=["==","$gpu","true"]'

  # The earliest 3-day window for 4 hosts before March, and wait until it is ACTIVE
  climate lease create big --start-date earliest --duration 3d --deadline "2030-03-01 00:00" \
    --reservation resource_type=physical:host,min=4,max=4 --wait

  # See what would be booked, without booking
  climate lease create try --reservation resource_type=physical:host,min=1,max=1 --dry-run
  # two floating IPs of network ext-net (one of them a given address), beside a host
  climate lease create web --end-date +1d --reservation resource_type=physical:host,min=1,max=1 \
    --reservation 'resource_type=virtual:floatingip,network_id=ext-net,amount=2,required_floatingips=["172.24.4.101"]'

  # Four instance slots of 2 vCPUs, 4 GB and 20 GB of disk, each on a different host
  climate lease create web-tier --end-date +1d \
    --reservation resource_type=virtual:instance,amount=4,vcpus=2,memory_mb=4096,disk_gb=20,affinity=false

  # Three instances of a registered flavor (climate flavor list), packed onto as few hosts as fit
  climate lease create batch --end-date +8h --reservation resource_type=flavor:instance,flavor_id=m1.large,amount=3

  # Start as soon as 4 hosts are free (waiting up to two days), keeping its 6 hours
  climate lease create train --type retry --retry-until +2d --end-date +6h \
    --reservation resource_type=physical:host,min=4,max=4 --wait

  # Use up to 8 idle hosts overnight, even hosts reserved from 02:00; give each back then
  climate lease create sweep --preemptible --on-preempt shrink --end-date +10h \
    --reservation resource_type=physical:host,min=1,max=8`,
		Args: exactArgs(1, "NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client(cmd)
			if err != nil {
				return err
			}
			req, err := lo.request(args[0], time.Now())
			if err != nil {
				return err
			}
			if err := lo.wait.check(); err != nil {
				return err
			}
			for _, f := range []string{"status", "timeout", "interval"} {
				if cmd.Flags().Changed(f) && !lo.wait.enabled {
					return fmt.Errorf("--%s goes with --wait", f)
				}
			}
			l, err := c.CreateLease(cmd.Context(), req)
			if err != nil {
				return err
			}
			if lo.dryRun {
				fmt.Fprintln(cmd.ErrOrStderr(), "Dry run: nothing was booked. This is what would be:")
				return o.out.printObject(cmd.OutOrStdout(), l)
			}
			if lo.wait.enabled {
				if l, err = lo.wait.run(cmd, c, l); err != nil {
					return err
				}
			}
			return o.out.printObject(cmd.OutOrStdout(), l)
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&lo.reservations, "reservation", nil, "a reservation, "+reservationHelp+" (repeatable)")
	f.StringArrayVar(&lo.physical, "physical-reservation", nil, "a host reservation (Blazar's legacy flag): min=N,max=N[,hypervisor_properties=…][,resource_properties=…] (repeatable)")
	f.StringVar(&lo.start, "start-date", "now", "start: "+dateHelp+", or earliest (with --duration)")
	f.StringVar(&lo.end, "end-date", "", "end: a date or +DURATION after the start (default: a day after the start, as in Blazar)")
	f.StringVar(&lo.beforeEnd, "before-end-date", "", "when the before_end_lease event fires: a date or -DURATION before the end (default: the server's)")
	f.StringVar(&lo.beforeStart, "before-start-date", "", "when the before_start_lease heads-up fires: a date or -DURATION before the start (default: the server's --before-start)")
	f.StringVar(&lo.duration, "duration", "", "with --start-date earliest: how long the lease lasts (90m, 6h, 2d)")
	f.StringVar(&lo.deadline, "deadline", "", "with --start-date earliest: the lease must end by this date")
	f.BoolVar(&lo.dryRun, "dry-run", false, "plan the lease and show the hosts it would get, without booking")
	f.StringVar(&lo.leaseType, "type", "", "the lease's type when capacity is short: immediate (now or refused), scheduled (refused unless it fits; the default), retry (waits as WAITING and starts as soon as it fits) or best_effort (the same, as IN_PROGRESS)")
	f.StringVar(&lo.retryUntil, "retry-until", "", "with --type retry or best_effort: when a lease still waiting gives up (a date or +DURATION after the start; default a day after the start)")
	f.IntVar(&lo.priority, "priority", 0, "with --type retry or best_effort: order among waiting leases, 0 to 1000, higher first (then first come, first served)")
	f.IntVar(&lo.maxRetries, "max-retries", 0, "with --type retry or best_effort: give up after this many re-plans that did not fit (each when capacity frees; 0 = only --retry-until)")
	f.BoolVar(&lo.preemptible, "preemptible", false, "run on hosts free now even if they are reserved later; a lease that reserves one takes it back after a lease.preempted notice (the server's --preemption-notice)")
	f.StringVar(&lo.onPreempt, "on-preempt", "", "with --preemptible: what the lease does when a host is taken back: shrink (keep the other hosts; the default) or end")
	lo.wait.addFlags(cmd, "wait until the lease reaches --status (default ACTIVE), showing its status")
	return cmd
}

// request builds the API request from the flags; relative dates count from now.
func (lo *leaseCreateOptions) request(name string, now time.Time) (api.LeaseRequest, error) {
	req := api.LeaseRequest{Name: name, DryRun: lo.dryRun, Reservations: []map[string]any{}, LeaseType: lo.leaseType, Priority: lo.priority,
		MaxRetries: lo.maxRetries, Preemptible: lo.preemptible, OnPreempt: lo.onPreempt}
	for _, s := range lo.reservations {
		r, err := parseReservation("reservation", s)
		if err != nil {
			return req, err
		}
		if _, ok := r["resource_type"]; !ok {
			return req, fmt.Errorf("--reservation %q: resource_type is required (e.g. resource_type=physical:host)", s)
		}
		req.Reservations = append(req.Reservations, r)
	}
	for _, s := range lo.physical {
		r, err := parseReservation("physical-reservation", s)
		if err != nil {
			return req, err
		}
		r["resource_type"] = "physical:host"
		req.Reservations = append(req.Reservations, r)
	}
	if len(req.Reservations) == 0 && !lo.dryRun {
		return req, fmt.Errorf("a lease needs at least one --reservation, e.g. --reservation resource_type=physical:host,min=1,max=1")
	}
	earliest := lo.start == "earliest"
	if (lo.duration != "" || lo.deadline != "") && !earliest {
		return req, fmt.Errorf("--duration and --deadline go with --start-date earliest")
	}
	if earliest {
		if lo.duration == "" {
			return req, fmt.Errorf("--start-date earliest needs --duration (e.g. --duration 6h)")
		}
		if lo.end != "" {
			return req, fmt.Errorf("--start-date earliest takes --duration, not --end-date")
		}
		if _, err := parseDelta("duration", lo.duration); err != nil {
			return req, err
		}
		req.StartDate, req.Duration = "earliest", lo.duration
		if lo.deadline != "" {
			t, isNow, err := parseDate("deadline", lo.deadline, now)
			if err != nil || isNow {
				return req, fmt.Errorf("--deadline %q: want a date: %s", lo.deadline, dateHelp)
			}
			req.Deadline = wireDate(t)
		}
		var err error
		req.BeforeEndDate, err = dateBefore("before-end-date", lo.beforeEnd, time.Time{}, "end")
		if err == nil {
			req.BeforeStartDate, err = dateBefore("before-start-date", lo.beforeStart, time.Time{}, "start")
		}
		return req, err
	}
	start, startNow, err := parseDate("start-date", lo.start, now)
	if err != nil {
		return req, err
	}
	req.StartDate = "now"
	base := now
	if !startNow {
		req.StartDate, base = wireDate(start), start
	}
	end := base.Add(24 * time.Hour).UTC().Truncate(time.Microsecond)
	if lo.end != "" {
		t, endNow, err := parseDate("end-date", lo.end, base)
		if err != nil {
			return req, err
		}
		if endNow {
			return req, fmt.Errorf("--end-date now: a lease cannot end when it starts; give a date or +DURATION")
		}
		end = t
	}
	req.EndDate = wireDate(end)
	if lo.retryUntil != "" {
		t, isNow, err := parseDate("retry-until", lo.retryUntil, base)
		if err != nil || isNow {
			return req, fmt.Errorf("--retry-until %q: want a date or +DURATION after the start: %s", lo.retryUntil, dateHelp)
		}
		req.RetryUntil = wireDate(t)
	}
	if req.BeforeEndDate, err = dateBefore("before-end-date", lo.beforeEnd, end, "end"); err != nil {
		return req, err
	}
	req.BeforeStartDate, err = dateBefore("before-start-date", lo.beforeStart, base, "start")
	return req, err
}

// dateBefore reads a flag that takes a date or -DURATION before anchor (the lease's
// "end" or "start", as anchorName says); "" gives "".
func dateBefore(flag, value string, anchor time.Time, anchorName string) (string, error) {
	if value == "" {
		return "", nil
	}
	if rest, ok := cutMinus(value); ok {
		if anchor.IsZero() {
			return "", fmt.Errorf("--%s -DURATION needs a known %s date; give a date instead", flag, anchorName)
		}
		d, err := parseDelta(flag, rest)
		if err != nil {
			return "", err
		}
		return wireDate(anchor.Add(-d)), nil
	}
	t, isNow, err := parseDate(flag, value, time.Now())
	if err != nil {
		return "", err
	}
	if isNow {
		return "", fmt.Errorf("--%s now: give a date or -DURATION before the %s", flag, anchorName)
	}
	return wireDate(t), nil
}

// cutMinus reports whether s is "-DURATION" (not a date, which starts with a digit).
func cutMinus(s string) (string, bool) {
	if len(s) > 1 && s[0] == '-' {
		return s[1:], true
	}
	return s, false
}

type leaseUpdateOptions struct {
	name, start, end, beforeEnd       string
	beforeStart                       string
	prolong, reduce, deferBy, advance string
	reservations                      []string
}

func newLeaseUpdateCmd(o *clientOptions) *cobra.Command {
	uo := &leaseUpdateOptions{}
	cmd := &cobra.Command{
		Use:     "update NAME|ID",
		Aliases: []string{"set"},
		Short:   "Rename, move, extend or shorten a lease, or resize its reservations",
		Long: `Change a lease. The end moves with --end-date, --prolong-for or --reduce-by; the start
with --start-date, --defer-by or --advance-by (only before the lease starts). Durations
are like 30m, 2h, 1d or 1d12h. --reservation changes one reservation, named by its id
(not needed when the lease has only one).`,
		Example: `  climate lease update train --prolong-for 2h
  climate lease update train --defer-by 1d --prolong-for 1d
  climate lease update train --name train-v2 --end-date "2030-01-08 18:00"
  climate lease update train --reservation max=4                       # its only reservation
  climate lease update train --reservation id=RESERVATION_ID,max=4`,
		Args:              exactArgs(1, "NAME|ID"),
		ValidArgsFunction: completeLeases(o),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := uo.check(); err != nil {
				return err
			}
			c, err := o.client(cmd)
			if err != nil {
				return err
			}
			l, err := c.FindLease(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			u, err := uo.update(l)
			if err != nil {
				return err
			}
			if l, err = c.UpdateLease(cmd.Context(), l.ID, u); err != nil {
				return err
			}
			return o.out.printObject(cmd.OutOrStdout(), l)
		},
	}
	f := cmd.Flags()
	f.StringVar(&uo.name, "name", "", "new name")
	f.StringVar(&uo.start, "start-date", "", "new start: "+dateHelp)
	f.StringVar(&uo.end, "end-date", "", "new end: a date, or +DURATION after the (new) start")
	f.StringVar(&uo.beforeEnd, "before-end-date", "", "when before_end_lease fires: a date or -DURATION before the end")
	f.StringVar(&uo.beforeStart, "before-start-date", "", "when the before_start_lease heads-up fires: a date or -DURATION before the start")
	f.StringVar(&uo.prolong, "prolong-for", "", "move the end later by this much")
	f.StringVar(&uo.reduce, "reduce-by", "", "move the end earlier by this much")
	f.StringVar(&uo.deferBy, "defer-by", "", "move the start later by this much")
	f.StringVar(&uo.advance, "advance-by", "", "move the start earlier by this much")
	f.StringArrayVar(&uo.reservations, "reservation", nil, "change a reservation: [id=RESERVATION_ID,]KEY=VALUE,… (the id may be left out when the lease has one reservation) (hosts: min, max, hypervisor_properties, resource_properties; instances: amount, vcpus, memory_mb, disk_gb, affinity, resource_properties, flavor_id; floating IPs: amount, required_floatingips; repeatable)")
	return cmd
}

// check rejects conflicting flags and an update that changes nothing, before any request.
func (uo *leaseUpdateOptions) check() error {
	if n := count(uo.end, uo.prolong, uo.reduce); n > 1 {
		return fmt.Errorf("give only one of --end-date, --prolong-for and --reduce-by")
	}
	if n := count(uo.start, uo.deferBy, uo.advance); n > 1 {
		return fmt.Errorf("give only one of --start-date, --defer-by and --advance-by")
	}
	if count(uo.name, uo.start, uo.end, uo.beforeEnd, uo.beforeStart, uo.prolong, uo.reduce, uo.deferBy, uo.advance) == 0 && len(uo.reservations) == 0 {
		return fmt.Errorf("nothing to change: give --name, --start-date, --end-date, --prolong-for, --reduce-by, --defer-by, --advance-by, --before-end-date, --before-start-date or --reservation")
	}
	return nil
}

func count(values ...string) int {
	n := 0
	for _, v := range values {
		if v != "" {
			n++
		}
	}
	return n
}

// update computes the request from the flags and the lease as it is now; like Blazar's
// client, relative changes are applied to the lease's current dates.
func (uo *leaseUpdateOptions) update(l *api.Lease) (api.LeaseUpdate, error) {
	u := api.LeaseUpdate{Name: uo.name}
	start, err := api.ParseTime(l.StartDate)
	if err != nil {
		return u, fmt.Errorf("lease %s has an unreadable start_date %q", l.ID, l.StartDate)
	}
	end, err := api.ParseTime(l.EndDate)
	if err != nil {
		return u, fmt.Errorf("lease %s has an unreadable end_date %q", l.ID, l.EndDate)
	}
	newStart, newEnd := start, end
	switch {
	case uo.start != "":
		t, isNow, err := parseDate("start-date", uo.start, time.Now())
		if err != nil {
			return u, err
		}
		u.StartDate = "now"
		if !isNow {
			u.StartDate, newStart = wireDate(t), t
		} else {
			newStart = time.Now()
		}
	case uo.deferBy != "" || uo.advance != "":
		d, err := signedDelta("defer-by", uo.deferBy, "advance-by", uo.advance)
		if err != nil {
			return u, err
		}
		newStart = start.Add(d)
		u.StartDate = wireDate(newStart)
	}
	switch {
	case uo.end != "":
		t, isNow, err := parseDate("end-date", uo.end, newStart)
		if err != nil {
			return u, err
		}
		if isNow {
			u.EndDate = "now"
		} else {
			u.EndDate, newEnd = wireDate(t), t
		}
	case uo.prolong != "" || uo.reduce != "":
		d, err := signedDelta("prolong-for", uo.prolong, "reduce-by", uo.reduce)
		if err != nil {
			return u, err
		}
		newEnd = end.Add(d)
		u.EndDate = wireDate(newEnd)
	}
	if u.BeforeEndDate, err = dateBefore("before-end-date", uo.beforeEnd, newEnd, "end"); err != nil {
		return u, err
	}
	if u.BeforeStartDate, err = dateBefore("before-start-date", uo.beforeStart, newStart, "start"); err != nil {
		return u, err
	}
	for _, s := range uo.reservations {
		r, err := parseReservation("reservation", s)
		if err != nil {
			return u, err
		}
		if _, ok := r["id"]; !ok {
			// A lease's only reservation needs no naming.
			if len(l.Reservations) != 1 {
				return u, fmt.Errorf("--reservation %q: lease %s has %d reservations: name one with id=RESERVATION_ID (see climate lease show %s)",
					s, l.Name, len(l.Reservations), l.Name)
			}
			r["id"] = l.Reservations[0].ID
		}
		u.Reservations = append(u.Reservations, r)
	}
	return u, nil
}

// signedDelta reads one of a later/earlier pair of duration flags as a signed duration.
func signedDelta(laterFlag, later, earlierFlag, earlier string) (time.Duration, error) {
	if later != "" {
		return parseDelta(laterFlag, later)
	}
	d, err := parseDelta(earlierFlag, earlier)
	return -d, err
}

func newLeaseDeleteCmd(o *clientOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME|ID…",
		Short: "Delete leases (an active lease is ended first)",
		Example: `  climate lease delete train
  climate lease delete 2d3f9c1e-8d5b-4a7e-9b55-0c4a3f1b2e6d old-run`,
		Args:              minArgs(1, "NAME|ID…"),
		ValidArgsFunction: completeLeases(o),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client(cmd)
			if err != nil {
				return err
			}
			for _, ref := range args {
				l, err := c.FindLease(cmd.Context(), ref)
				if err != nil {
					return err
				}
				if err := c.DeleteLease(cmd.Context(), l.ID); err != nil {
					return fmt.Errorf("deleting lease %s: %w", ref, err)
				}
				if o.out.format == "table" {
					fmt.Fprintf(cmd.OutOrStdout(), "Deleted lease %s (%s)\n", l.Name, l.ID)
				}
			}
			return nil
		},
	}
}

func newLeaseWaitCmd(o *clientOptions) *cobra.Command {
	w := &waitOptions{enabled: true}
	cmd := &cobra.Command{
		Use:   "wait NAME|ID",
		Short: "Wait until a lease reaches a status, showing its progress",
		Long: `Wait until the lease reaches --status, showing a live line with the elapsed time, the
current status and the time left until the lease starts (or ends). It fails when the
lease goes to ERROR, is deleted, or can no longer reach the status, and after --timeout.

The server pushes the lease's changes (its event stream, as in "climate events watch"),
so the wait ends within milliseconds of the change. A server without the stream is
polled instead, every --interval at most.`,
		Example: `  climate lease wait train                       # until ACTIVE
  climate lease wait train --status TERMINATED --timeout 2h`,
		Args:              exactArgs(1, "NAME|ID"),
		ValidArgsFunction: completeLeases(o),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := w.check(); err != nil {
				return err
			}
			c, err := o.client(cmd)
			if err != nil {
				return err
			}
			l, err := c.FindLease(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if l, err = w.run(cmd, c, l); err != nil {
				return err
			}
			return o.out.printObject(cmd.OutOrStdout(), l)
		},
	}
	w.addFlags(cmd, "")
	return cmd
}

// exactArgs is cobra.ExactArgs with a message that names what is expected.
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return fmt.Errorf("%s takes %s (got %d arguments); see %s --help", cmd.CommandPath(), what, len(args), cmd.CommandPath())
		}
		return nil
	}
}

// minArgs is cobra.MinimumNArgs with a message that names what is expected.
func minArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < n {
			return fmt.Errorf("%s takes %s; see %s --help", cmd.CommandPath(), what, cmd.CommandPath())
		}
		return nil
	}
}

// completeLeases completes lease names from the server.
func completeLeases(o *clientOptions) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
		c, err := o.completionClient(cmd)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		leases, err := c.ListLeases(cmd.Context(), client.LeaseQuery{})
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		names := make([]string, 0, len(leases))
		for _, l := range leases {
			names = append(names, l.Name+"\t"+l.Status)
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}
