package manager

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"climate"
	"climate/usage"
)

// budgetSlack absorbs the rounding of summed costs: a lease that spends a budget exactly
// is not refused for a rounding error.
const budgetSlack = 1e-6

// account brings the usage records of lease l up to date in tx, the write transaction of
// a caller's create or a waiting lease's booking (cur nil) or of an update, and refuses the change if it breaks the
// project's limits. The checks read and charge inside the transaction, so concurrent
// requests of one project cannot together pass a limit (in PostgreSQL the project's
// charge row is locked until commit).
func (m *Manager) account(ctx context.Context, tx climate.Tx, cur, l *climate.Lease, now time.Time) error {
	change := usage.Updated
	if cur == nil { // a new lease, or a waiting one booked: neither has records yet
		change = usage.Created
	}
	lim, _, err := tx.GetProjectLimits(ctx, l.ProjectID) // nil when none
	if err != nil {
		return err
	}
	check := lim != nil && !m.exempt(l.ProjectID, lim)
	c, err := usage.SyncPriced(ctx, tx, l, change, now, lim, check)
	if err != nil {
		return err
	}
	l.Cost = &c.LeaseCost
	if !check {
		return nil
	}
	moved := cur == nil || !cur.Start.Equal(l.Start) || !cur.End.Equal(l.End) || c.Delta > 0
	if lim.MaxLeaseDuration != nil && moved {
		if err := (rules{maxDuration: *lim.MaxLeaseDuration}).checkDuration(l.Start, l.End); err != nil {
			return err
		}
	}
	if lim.MaxAdvance != nil && (cur == nil || !cur.Start.Equal(l.Start)) {
		if ahead := l.Start.Sub(now); ahead > *lim.MaxAdvance {
			return climate.Errorf(climate.CodeForbidden,
				"Lease would start at %s, %s from now; project %s may book at most %s ahead: the latest start now is %s.",
				fmtTime(l.Start), fmtSpan(ahead), l.ProjectID, fmtSpan(*lim.MaxAdvance), fmtTime(now.Add(*lim.MaxAdvance)))
		}
	}
	if lim.Budget != nil && c.Delta > 0 && c.Project.Charged > *lim.Budget+budgetSlack {
		return budgetError(l, lim, c)
	}
	if lim.MaxLeases != nil && cur == nil && c.Project.OpenLeases > *lim.MaxLeases {
		return climate.Errorf(climate.CodeForbidden,
			"Project %s may have at most %d leases booked and not over; it has %d: delete one or wait for one to end.",
			l.ProjectID, *lim.MaxLeases, c.Project.OpenLeases-1)
	}
	if !moved {
		return nil
	}
	var open []climate.UsageRecord // what the project holds while l runs, read once if needed
	for _, k := range []struct {
		class, what string
		max         *int
	}{{climate.ClassHost, "hosts", lim.MaxHosts}, {climate.ClassVCPU, "instance vCPUs", lim.MaxVCPUs}, {climate.ClassFloatingIP, "floating IPs", lim.MaxFloatingIPs}} {
		if k.max == nil || c.Project.Open(k.class) <= *k.max {
			continue // all its open records together fit: so does any instant
		}
		if open == nil {
			if open, err = tx.ListUsage(ctx, climate.UsageFilter{ProjectID: l.ProjectID, OpenOnly: true, From: l.Start, To: l.End}); err != nil {
				return err
			}
		}
		peak, at, mine := peakHeld(open, k.class, l)
		if peak > *k.max {
			return climate.Errorf(climate.CodeForbidden,
				"Project %s may hold at most %d %s at once; with this lease it would hold %d from %s (this lease %d): at most %d fit then.",
				l.ProjectID, *k.max, k.what, peak, fmtTime(at), mine, max(0, *k.max-(peak-mine)))
		}
	}
	return nil
}

// peakHeld returns the most units of class the open records hold at once while lease l
// runs, when that peak begins, and how many of them are l's own. Zero when l holds none
// of class.
func peakHeld(open []climate.UsageRecord, class string, l *climate.Lease) (peak int, at time.Time, mine int) {
	type edge struct {
		t     time.Time
		d     int
		mine  bool
		start bool
	}
	var edges []edge
	ownsClass := false
	for _, u := range open {
		if u.Class != class || !u.Start.Before(l.End) || !u.End.After(l.Start) {
			continue
		}
		own := u.LeaseID == l.ID
		ownsClass = ownsClass || own
		edges = append(edges, edge{u.Start, u.Units, own, true}, edge{u.End, -u.Units, own, false})
	}
	if !ownsClass {
		return 0, time.Time{}, 0
	}
	sort.Slice(edges, func(i, j int) bool {
		if !edges[i].t.Equal(edges[j].t) {
			return edges[i].t.Before(edges[j].t)
		}
		return !edges[i].start && edges[j].start // ends first: back-to-back holds do not add up
	})
	n, own := 0, 0
	for _, e := range edges {
		n += e.d
		if e.mine {
			own += e.d
		}
		if n > peak {
			peak, at, mine = n, e.t, own
		}
	}
	return peak, at, mine
}

// budgetError is the refusal of a lease that costs more than its project has left, with
// the longest lease of the same resources it can afford.
func budgetError(l *climate.Lease, lim *climate.ProjectLimits, c usage.Charge) error {
	left := *lim.Budget - (c.Project.Charged - c.Delta) // before this change
	msg := fmt.Sprintf("Lease would cost %s more; project %s has %s of its budget of %s left.",
		fmtUnits(c.Delta), l.ProjectID, fmtUnits(max(0, left)), fmtUnits(*lim.Budget))
	if c.Rate > 0 {
		end := l.End.Add(-time.Duration((c.Delta - left) / c.Rate * float64(time.Hour)))
		if end.After(l.Start) {
			msg += fmt.Sprintf(" The longest lease of these resources it can afford ends at %s.", fmtTime(end.Truncate(time.Second)))
		} else {
			msg += " It cannot afford these resources now."
		}
	}
	return climate.Errorf(climate.CodeForbidden, "%s", msg)
}

func fmtUnits(v float64) string { return fmt.Sprintf("%.6g units", v) }

// fmtSpan writes a span in days, hours and minutes ("7d", "1d12h", "45m").
func fmtSpan(d time.Duration) string {
	d = d.Round(time.Minute)
	if d < time.Minute {
		return "0m"
	}
	var out string
	for _, u := range []struct {
		size time.Duration
		unit string
	}{{24 * time.Hour, "d"}, {time.Hour, "h"}, {time.Minute, "m"}} {
		if n := d / u.size; n > 0 {
			out += fmt.Sprintf("%d%s", n, u.unit)
			d -= n * u.size
		}
	}
	return out
}

// accountBySystem brings the usage records of l up to date in tx for a change the
// service made itself (an event, healing, a preemption, a waiting lease booked): what it
// charges is charged, and no limit refuses it.
func accountBySystem(ctx context.Context, tx climate.Tx, l *climate.Lease, now time.Time) error {
	_, err := usage.Sync(ctx, tx, l, usage.Updated, now)
	return err
}

const (
	limitsGetRule = "climate:limits:get"
	limitsPutRule = "climate:limits:put"
	usageGetRule  = "climate:usage:get"
)

// GetProjectLimits returns a project's limits and what its budget was charged: admins
// any project's, members their own.
func (m *Manager) GetProjectLimits(ctx context.Context, who climate.Identity, project string) (*climate.ProjectAccount, error) {
	if err := m.allow(who, limitsGetRule, climate.Target{ProjectID: project}); err != nil {
		return nil, err
	}
	var a *climate.ProjectAccount
	err := m.store.View(ctx, func(tx climate.Tx) error {
		var err error
		a, err = readAccount(ctx, tx, project)
		return err
	})
	return a, err
}

func readAccount(ctx context.Context, tx climate.Tx, project string) (*climate.ProjectAccount, error) {
	lim, ok, err := tx.GetProjectLimits(ctx, project)
	if err != nil {
		return nil, err
	}
	if !ok {
		lim = &climate.ProjectLimits{ProjectID: project}
	}
	c, err := tx.ProjectCharged(ctx, project)
	if err != nil {
		return nil, err
	}
	return &climate.ProjectAccount{Limits: *lim, Charged: c.Charged, OpenLeases: c.OpenLeases}, nil
}

// UpdateProjectLimits changes some of a project's limits (admins only). Limits apply to
// later creations and updates: leases already booked are not refused after the fact.
func (m *Manager) UpdateProjectLimits(ctx context.Context, who climate.Identity, project string, u climate.LimitsUpdate) (*climate.ProjectAccount, error) {
	if err := m.allow(who, limitsPutRule, climate.Target{ProjectID: project}); err != nil {
		return nil, err
	}
	if err := climate.CheckText("Project id", project, climate.MaxNameLength); err != nil {
		return nil, err
	}
	if err := checkLimitsUpdate(u); err != nil {
		return nil, err
	}
	if m.cfg.Projects != nil {
		ok, err := m.cfg.Projects.ProjectExists(ctx, project)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, climate.Errorf(climate.CodeNotFound, "Project %s does not exist.", project)
		}
	}
	var a *climate.ProjectAccount
	err := m.store.Update(ctx, func(tx climate.Tx) error {
		cur, ok, err := tx.GetProjectLimits(ctx, project)
		if err != nil {
			return err
		}
		if !ok {
			cur = &climate.ProjectLimits{ProjectID: project}
		}
		next := applyLimits(*cur, u)
		next.UpdatedAt = m.now()
		if err := tx.PutProjectLimits(ctx, &next); err != nil {
			return err
		}
		if err := m.audit(ctx, tx, climate.ByUser(who), "project.limits", climate.AuditTarget{Type: "project", ID: project, ProjectID: project},
			limitsSummary(cur, ok), limitsSummary(&next, true)); err != nil {
			return err
		}
		a, err = readAccount(ctx, tx, project)
		return err
	})
	return a, err
}

func applyLimits(l climate.ProjectLimits, u climate.LimitsUpdate) climate.ProjectLimits {
	set := func(dst **int, p climate.Patch[int]) {
		if p.Set {
			*dst = p.Value
		}
	}
	set(&l.MaxHosts, u.MaxHosts)
	set(&l.MaxVCPUs, u.MaxVCPUs)
	set(&l.MaxFloatingIPs, u.MaxFloatingIPs)
	set(&l.MaxLeases, u.MaxLeases)
	if u.MaxLeaseDuration.Set {
		l.MaxLeaseDuration = u.MaxLeaseDuration.Value
	}
	if u.MaxAdvance.Set {
		l.MaxAdvance = u.MaxAdvance.Value
	}
	if u.Budget.Set {
		l.Budget = u.Budget.Value
	}
	if u.PerHour.Set {
		l.Prices.PerHour = nil
		if u.PerHour.Value != nil {
			l.Prices.PerHour = *u.PerHour.Value
		}
	}
	if u.Multipliers.Set {
		l.Prices.Multipliers = nil
		if u.Multipliers.Value != nil {
			l.Prices.Multipliers = *u.Multipliers.Value
		}
	}
	if u.Exempt.Set {
		l.Exempt = u.Exempt.Value != nil && *u.Exempt.Value
	}
	return l
}

// Bounds of limits: anything larger is a typing error, not a policy.
const (
	maxBudget = 1e15
	maxPrice  = 1e9
	maxFactor = 1e6
)

func checkLimitsUpdate(u climate.LimitsUpdate) error {
	for _, c := range []struct {
		name string
		p    climate.Patch[int]
	}{{"max_hosts", u.MaxHosts}, {"max_vcpus", u.MaxVCPUs}, {"max_floating_ips", u.MaxFloatingIPs}, {"max_leases", u.MaxLeases}} {
		if c.p.Value != nil && (*c.p.Value < 0 || *c.p.Value > climate.MaxCount) {
			return invalid("%s must be from 0 to %d (or null for no limit); got %d", c.name, climate.MaxCount, *c.p.Value)
		}
	}
	for _, c := range []struct {
		name string
		p    climate.Patch[time.Duration]
	}{{"max_lease_duration", u.MaxLeaseDuration}, {"max_advance", u.MaxAdvance}} {
		if c.p.Value != nil && (*c.p.Value <= 0 || *c.p.Value > climate.MaxDuration) {
			return invalid("%s must be a positive number of seconds up to %d (or null for no limit)", c.name, int64(climate.MaxDuration/time.Second))
		}
	}
	if v := u.Budget.Value; v != nil && !(*v >= 0 && *v <= maxBudget) {
		return invalid("budget must be from 0 to %g units (or null for no budget)", float64(maxBudget))
	}
	if u.PerHour.Value != nil {
		for class, p := range *u.PerHour.Value {
			if !slices.Contains(climate.UsageClasses, class) {
				return invalid("prices: unknown resource class %q: the classes are %v", class, climate.UsageClasses)
			}
			if !(p >= 0 && p <= maxPrice) || math.IsInf(p, 0) {
				return invalid("prices: the price of %s must be from 0 to %g units per hour", class, float64(maxPrice))
			}
		}
	}
	if u.Multipliers.Value != nil {
		for _, mu := range *u.Multipliers.Value {
			if mu.Property == "" {
				return invalid("multipliers: each needs a host property")
			}
			if err := climate.CheckText("multipliers: property", mu.Property, climate.MaxNameLength); err != nil {
				return err
			}
			if err := climate.CheckText("multipliers: value", mu.Value, climate.MaxTextLength); err != nil {
				return err
			}
			if !(mu.Factor > 0 && mu.Factor <= maxFactor) {
				return invalid("multipliers: the factor of %s=%s must be above 0 and at most %g", mu.Property, mu.Value, float64(maxFactor))
			}
		}
	}
	return nil
}

// limitsSummary is what the audit trail shows of a project's limits (nil when it had none).
func limitsSummary(l *climate.ProjectLimits, ok bool) map[string]any {
	if !ok {
		return nil
	}
	doc, err := climate.EncodeLimits(l)
	if err != nil {
		return nil
	}
	return map[string]any{"limits": doc}
}
