package manager

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"time"

	"climate"
	"climate/notify"
	"climate/plan"
	"climate/resource"
)

// Healing, as Blazar heals reservations when a host fails (its physical:host monitor),
// but with the fixes Blazar lacks: it runs whenever a maintenance window is added or
// deleted, in the same write transaction as the window, re-checked as every commit is;
// a reservation that finds no replacement keeps its host (Blazar deletes the
// allocation) and is flagged until the host is back, when its flags are cleared (Blazar
// never clears them); and every decision is logged and notified.
//
// One pass looks at every lease holding a host during one of the windows in effect (the
// new one included, the deleted one not), from now on, and at every degraded lease:
//
//   - a reservation that has not started and holds a host in maintenance is planned
//     again by its type, one for one (a host reservation keeps its count), its other
//     resources kept, over its whole window (replanned);
//   - an active reservation gets replacements for the rest of its window, from now
//     (replaced; resources_changed);
//   - without a replacement it keeps what it holds and is flagged missing_resources, its
//     lease degraded (degraded; notified lease.degraded);
//   - a flagged reservation whose hosts are all in service again is cleared (recovered);
//   - a lease starting, ending or changing meanwhile is left for the next pass (skipped).
//
// A lease is degraded exactly while one of its reservations misses resources; a lease
// whose reservations moved or recovered is notified lease.healed.

// maintenanceChange is the window a healing pass is written with: added or removed.
type maintenanceChange struct {
	add, remove *climate.Maintenance
	// who asked for the change; the zero identity for a pass after windows ended.
	who climate.Identity
}

// healReason says, in the audit trail, why a pass changed a lease.
func (c maintenanceChange) healReason() string {
	switch {
	case c.add != nil:
		return "healing: maintenance window " + c.add.ID + " added on host " + c.add.HostID
	case c.remove != nil:
		return "healing: maintenance window " + c.remove.ID + " deleted on host " + c.remove.HostID
	}
	return "healing: maintenance windows ended"
}

func (c maintenanceChange) window() *climate.Maintenance {
	if c.add != nil {
		return c.add
	}
	return c.remove
}

// id names the change's window in logs; "" for a pass after windows ended by themselves.
func (c maintenanceChange) id() string {
	if w := c.window(); w != nil {
		return w.ID
	}
	return ""
}

// healSnapshot is what a healing pass plans from, read in one snapshot.
type healSnapshot struct {
	// view is the availability with the change made: the new window busy, the deleted
	// one free.
	view *resource.View
	// windows are the maintenance windows in effect once the change is written, not over
	// by now.
	windows []climate.Maintenance
	// leases are the leases to look at, earliest first: those holding a host during a
	// window, and the degraded ones.
	leases []*climate.Lease
	// onHost are, for an added window, the allocations on its host overlapping it from
	// now: the commit checks no lease took the host meanwhile.
	onHost []climate.Allocation
}

// leaseHeal is one lease's change.
type leaseHeal struct {
	before, after  *climate.Lease
	event          string // notification type
	why            error  // for lease.degraded: what is missing
	removed, added []climate.Allocation
}

// healPlan is what a pass decided.
type healPlan struct {
	writes   []leaseHeal
	outcomes []climate.Healing
}

// heal writes ch with a healing pass planned on a view that has it, re-planning when a
// concurrent change invalidates the plan.
func (m *Manager) heal(ctx context.Context, ch maintenanceChange) ([]climate.Healing, error) {
	for attempt := 0; attempt < commitAttempts; attempt++ {
		p, err := m.healOnce(ctx, ch, attempt >= optimisticHealAttempts)
		if errors.Is(err, climate.ErrConflictRetry) {
			m.cfg.Observer.Conflict()
			m.cfg.Log.Debug("healing planned again: the leases or inventory changed meanwhile", "maintenance", ch.id(), "attempt", attempt+1)
			continue
		}
		if err != nil {
			return nil, err
		}
		m.logHealing(ctx, ch, p)
		if len(p.writes) > 0 {
			m.notified()
		}
		if p.outcomes == nil {
			p.outcomes = []climate.Healing{}
		}
		return p.outcomes, nil
	}
	w := ch.window()
	if w == nil {
		return nil, climate.Errorf(climate.CodeConflict, "Healing was not done: the leases it heals changed %d times in a row while it was planned", commitAttempts)
	}
	return nil, climate.Errorf(climate.CodeConflict, "The maintenance window of host %s was not recorded: the leases it heals changed %d times in a row while it was planned; try again",
		w.HostID, commitAttempts)
}

// optimisticHealAttempts is how many healing passes are planned without holding off this
// manager's other commits. A pass reads the whole view, so lease creations on a busy host
// can keep invalidating it; the later passes hold commitGate from the snapshot to the write
// and can then only lose to another replica.
const optimisticHealAttempts = 2

// healOnce plans and writes one healing pass; exclusive holds this manager's commits off
// while it does.
func (m *Manager) healOnce(ctx context.Context, ch maintenanceChange, exclusive bool) (*healPlan, error) {
	commit := m.commitChange
	if exclusive {
		m.commitGate.Lock()
		defer m.commitGate.Unlock()
		commit = m.commitGated
	}
	now := m.now()
	s, err := m.healSnapshot(ctx, ch, now)
	if err != nil {
		return nil, err
	}
	p := m.planHealing(s, now)
	held, err := m.healHolds(ctx, ch, p, now)
	if err != nil {
		return nil, err
	}
	var removed, added []climate.Allocation
	for _, w := range p.writes {
		removed, added = append(removed, w.removed...), append(added, w.added...)
	}
	err = commit(ctx, func(tx climate.Tx) error { return m.writeHealing(ctx, tx, ch, s, p, held, now) },
		func() []climate.Allocation { return removed }, func() []climate.Allocation { return added }, false)
	return p, err
}

// healSnapshot reads, in one snapshot, the view with ch made and the leases to look at.
func (m *Manager) healSnapshot(ctx context.Context, ch maintenanceChange, now time.Time) (*healSnapshot, error) {
	s := &healSnapshot{}
	hook := func(tx climate.Tx, ms []climate.Maintenance) ([]climate.Maintenance, error) {
		*s = healSnapshot{}
		if ch.remove != nil {
			ms = slices.DeleteFunc(ms, func(w climate.Maintenance) bool { return w.ID == ch.remove.ID })
		}
		if ch.add != nil {
			ms = append(ms, *ch.add)
		}
		var hosts []string
		for _, w := range ms {
			if w.End.IsZero() || w.End.After(now) {
				s.windows = append(s.windows, w)
				if !slices.Contains(hosts, w.HostID) {
					hosts = append(hosts, w.HostID)
				}
			}
		}
		ids := map[string]bool{}
		if len(hosts) > 0 {
			allocs, err := tx.ListAllocations(ctx, climate.AllocationFilter{ResourceIDs: hosts, From: now})
			if err != nil {
				return nil, err
			}
			for _, a := range allocs {
				from := climate.Later(now, a.Start)
				if inMaintenance(s.windows, a.ResourceID, from, a.End) != nil {
					ids[a.LeaseID] = true
				}
				if ch.add != nil && a.ResourceID == ch.add.HostID && ch.add.Overlaps(from, a.End) {
					s.onHost = append(s.onHost, a)
				}
			}
		}
		degraded, err := tx.DegradedLeases(ctx, now)
		if err != nil {
			return nil, err
		}
		for _, id := range degraded {
			ids[id] = true
		}
		for id := range ids {
			l, err := tx.GetLease(ctx, id)
			if err != nil {
				return nil, err
			}
			s.leases = append(s.leases, l)
		}
		// Earliest first: they have the least choice left.
		slices.SortFunc(s.leases, func(a, b *climate.Lease) int {
			if c := a.Start.Compare(b.Start); c != 0 {
				return c
			}
			if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
				return c
			}
			return strings.Compare(a.ID, b.ID)
		})
		return ms, nil
	}
	v, err := m.loadView(ctx, hook)
	if err != nil {
		return nil, err
	}
	s.view = v
	return s, nil
}

// planHealing decides what happens to each lease of s, applying each change to s.view
// before the next lease is planned.
func (m *Manager) planHealing(s *healSnapshot, now time.Time) *healPlan {
	p := &healPlan{}
	for _, l := range s.leases {
		m.healLease(s, p, l, now)
	}
	return p
}

// healLease plans one lease (see the package comment above).
func (m *Manager) healLease(s *healSnapshot, p *healPlan, l *climate.Lease, now time.Time) {
	heals := l.Status == climate.LeasePending || l.Status == climate.LeaseActive
	after := cloneLease(l)
	var why []string
	var removed, added []climate.Allocation
	changed, newlyMissing := false, false
	for i := range after.Reservations {
		r := &after.Reservations[i]
		if r.Status != climate.ReservationPending && r.Status != climate.ReservationActive {
			continue
		}
		down := downHosts(s.windows, r, now)
		o := climate.Healing{LeaseID: l.ID, ReservationID: r.ID, Down: sortedHosts(down)}
		switch {
		case !heals:
			if len(down) == 0 {
				continue
			}
			o.Outcome = climate.HealSkipped
			if l.Status.IsStable() {
				o.Detail = fmt.Sprintf("the lease is %s: only pending and active leases are healed", l.Status)
			} else {
				o.Detail = fmt.Sprintf("the lease is %s; the next change of a maintenance window looks at it again", l.Status)
			}
		case len(down) == 0:
			if !r.MissingResources {
				continue
			}
			r.MissingResources, r.UpdatedAt = false, now
			changed = true
			o.Outcome = climate.HealRecovered
		default:
			allocs, err := m.replan(s.view, after, r, down, now)
			if err != nil {
				o.Outcome = climate.HealDegraded
				o.Detail = "no replacement: " + err.Error()
				why = append(why, fmt.Sprintf("reservation %s: %s; %s", r.ID, describeDown(down), o.Detail))
				if !r.MissingResources {
					r.MissingResources, r.UpdatedAt = true, now
					changed, newlyMissing = true, true
				}
				break
			}
			rm, ad := allocationChanges(r.Allocations, allocs)
			removed, added = append(removed, rm...), append(added, ad...)
			r.Allocations = allocs
			r.MissingResources, r.UpdatedAt = false, now
			o.Outcome = climate.HealReplanned
			if started(l, r) {
				r.ResourcesChanged = true
				o.Outcome = climate.HealReplaced
			}
			changed = true
		}
		o.Hosts = resource.IDs(r.Allocations)
		p.outcomes = append(p.outcomes, o)
	}
	if !heals {
		return
	}
	degraded := slices.ContainsFunc(after.Reservations, func(r climate.Reservation) bool { return r.MissingResources })
	if degraded != after.Degraded {
		after.Degraded, changed = degraded, true
	}
	if !changed {
		return
	}
	after.UpdatedAt = now
	w := leaseHeal{before: l, after: after, event: climate.NotifyLeaseHealed, removed: removed, added: added}
	if newlyMissing {
		w.event, w.why = climate.NotifyLeaseDegraded, errors.New(strings.Join(why, "; "))
	}
	s.view.Apply(removed, added) // the next lease sees what this one now holds
	p.writes = append(p.writes, w)
}

// started reports whether r holds its resources already: its window is planned again
// from now only.
func started(l *climate.Lease, r *climate.Reservation) bool {
	return l.Status == climate.LeaseActive || r.Status == climate.ReservationActive
}

// replan plans r of l again without the hosts in down: one for one (a host reservation
// asks for as many hosts as it holds), keeping what r holds elsewhere and beside what the
// lease's other reservations hold, over l's window (from now for a started reservation).
// The allocations r keeps are returned as they were; the new ones start with the window
// planned.
func (m *Manager) replan(v *resource.View, l *climate.Lease, r *climate.Reservation, down map[string]*climate.Maintenance, now time.Time) ([]climate.Allocation, error) {
	t, err := m.cfg.Types.Get(r.ResourceType)
	if err != nil {
		return nil, err
	}
	var kept, others []climate.Allocation
	for _, a := range r.Allocations {
		if down[a.ResourceID] == nil {
			kept = append(kept, a)
		}
	}
	for _, o := range l.Reservations {
		if o.ID != r.ID && o.Status != climate.ReservationDeleted {
			others = append(others, o.Allocations...)
		}
	}
	window := *l
	if started(l, r) {
		window.Start = climate.Later(now, l.Start)
	}
	// A preemptible lease's replacement is a host free until its end: one given back
	// sooner would need a notice the emergency cannot give.
	window.Preemptible = false
	want := *r
	if r.ResourceType == climate.ResourceTypeHost {
		want.Min, want.Max = len(r.Allocations), len(r.Allocations)
	}
	chosen, err := t.Plan(v, &window, &want, kept, others, 0)
	if err != nil {
		return nil, err
	}
	out := make([]climate.Allocation, 0, len(chosen))
	used := make([]bool, len(r.Allocations))
	for _, c := range chosen {
		j := slices.IndexFunc(r.Allocations, func(a climate.Allocation) bool { return a.ResourceID == c.ResourceID })
		if j >= 0 && !used[j] && down[c.ResourceID] == nil && r.Allocations[j].Slots == c.Slots && r.Allocations[j].Size == c.Size {
			used[j] = true
			out = append(out, r.Allocations[j])
			continue
		}
		c.ID, c.ReservationID, c.LeaseID, c.Start, c.End = climate.NewID(), r.ID, l.ID, window.Start, l.End
		c.Preemptible = l.Preemptible
		out = append(out, c)
	}
	return out, nil
}

// allocationChanges returns the allocations of before absent from after and those of
// after absent from before.
func allocationChanges(before, after []climate.Allocation) (removed, added []climate.Allocation) {
	for _, a := range before {
		if !slices.Contains(after, a) {
			removed = append(removed, a)
		}
	}
	for _, a := range after {
		if !slices.Contains(before, a) {
			added = append(added, a)
		}
	}
	return removed, added
}

// writeHealing writes ch and p in tx after re-checking the plan: the inventory as
// planned, no lease on a new window's host that the plan did not see, every lease to
// rewrite as it was read, and what it is given still free beside the other leases.
func (m *Manager) writeHealing(ctx context.Context, tx climate.Tx, ch maintenanceChange, s *healSnapshot, p *healPlan, held map[string]*heldAt, now time.Time) error {
	rev, err := tx.InventoryRevision(ctx)
	if err != nil {
		return err
	}
	if rev != s.view.Index.InventoryRevision {
		return climate.ErrConflictRetry
	}
	switch {
	case ch.add != nil:
		if err := tx.InsertMaintenance(ctx, ch.add); err != nil {
			return err
		}
		if err := m.audit(ctx, tx, climate.ByUser(ch.who), "maintenance.create", maintenanceAuditTarget(ch.add), nil, maintenanceSummary(ch.add)); err != nil {
			return err
		}
		// A lease committed since the snapshot was planned without the window.
		cur, err := allocationsOn(ctx, tx, held[""], onWindowHost(ch, now))
		if err != nil {
			return err
		}
		var on []climate.Allocation
		for _, a := range cur {
			if ch.add.Overlaps(climate.Later(now, a.Start), a.End) {
				on = append(on, a)
			}
		}
		if !sameSet(on, s.onHost) {
			return climate.ErrConflictRetry
		}
	case ch.remove != nil:
		if err := tx.DeleteMaintenance(ctx, ch.remove.ID); err != nil {
			return err
		}
		if err := m.audit(ctx, tx, climate.ByUser(ch.who), "maintenance.delete", maintenanceAuditTarget(ch.remove), maintenanceSummary(ch.remove), nil); err != nil {
			return err
		}
	}
	for _, w := range p.writes {
		cur, err := tx.GetLease(ctx, w.before.ID)
		if climate.ErrorCode(err) == climate.CodeNotFound {
			return climate.ErrConflictRetry // deleted meanwhile: plan without it
		}
		if err != nil {
			return err
		}
		if !reflect.DeepEqual(cur, w.before) {
			return climate.ErrConflictRetry
		}
		if len(w.added) > 0 {
			if ok, err := m.stillFits(ctx, tx, s.view, w, held[w.after.ID]); err != nil || !ok {
				if err == nil {
					err = climate.ErrConflictRetry
				}
				return err
			}
		}
		if err := tx.UpdateLease(ctx, w.after); err != nil {
			return err
		}
		if err := accountBySystem(ctx, tx, w.after, m.now()); err != nil {
			return err
		}
		reason := ch.healReason()
		if w.why != nil {
			reason += ": " + w.why.Error()
		}
		target := climate.LeaseAuditTarget(w.after)
		if win := ch.window(); win != nil {
			target.HostID = win.HostID
		}
		if err := m.audit(ctx, tx, climate.BySystem(reason), w.event, target, climate.LeaseAuditSummary(w.before), climate.LeaseAuditSummary(w.after)); err != nil {
			return err
		}
		if err := notify.Add(ctx, tx, w.event, w.after, w.why, now); err != nil {
			return err
		}
	}
	return nil
}

// healHolds takes, before the pass's write transaction, what the index holds where its
// re-checks read (allocationsOn): the new window's host, by "", and the resources each
// lease is given, by the lease's id.
func (m *Manager) healHolds(ctx context.Context, ch maintenanceChange, p *healPlan, now time.Time) (map[string]*heldAt, error) {
	held := map[string]*heldAt{}
	var err error
	if ch.add != nil {
		if held[""], err = m.holdsOn(ctx, onWindowHost(ch, now)); err != nil {
			return nil, err
		}
	}
	for _, w := range p.writes {
		if len(w.added) > 0 {
			if _, f := m.givenOn(w); len(f.ResourceIDs) > 0 {
				if held[w.after.ID], err = m.holdsOn(ctx, f); err != nil {
					return nil, err
				}
			}
		}
	}
	return held, nil
}

// onWindowHost asks for the allocations on a new maintenance window's host from now on.
func onWindowHost(ch maintenanceChange, now time.Time) climate.AllocationFilter {
	return climate.AllocationFilter{ResourceIDs: []string{ch.add.HostID}, From: now}
}

// givenOn returns the allocations w's lease holds on the resources healing gives it, and
// the other leases' allocations that could be in their way.
func (m *Manager) givenOn(w leaseHeal) ([]climate.Allocation, climate.AllocationFilter) {
	touched := resource.Taken(w.added)
	var mine []climate.Allocation
	from := w.after.End
	for _, a := range allocationsOf(w.after) {
		if touched[a.ResourceID] {
			mine = append(mine, a)
			from = climate.Earlier(from, a.Start)
		}
	}
	// Healing moves reservations of hosts only: all of mine are kept the cleaning time
	// apart from the other leases' allocations.
	c := m.cfg.Cleaning
	return mine, climate.AllocationFilter{ResourceIDs: resource.IDs(mine), From: from.Add(-c), To: w.after.End.Add(c), ExcludeLeaseID: w.after.ID}
}

// stillFits re-checks, as planAndCommit does, that the resources w's lease is given fit
// beside the other leases' allocations as the store has them now (earlier writes of the
// same pass included); held is what the index held there before the transaction.
func (m *Manager) stillFits(ctx context.Context, tx climate.Tx, v *resource.View, w leaseHeal, held *heldAt) (bool, error) {
	mine, f := m.givenOn(w)
	others, err := allocationsOn(ctx, tx, held, f)
	if err != nil {
		return false, err
	}
	return plan.Fits(mine, others, capacities(v, mine), m.cfg.Cleaning), nil
}

// sameSet reports whether a and b hold the same allocations, in any order.
func sameSet(a, b []climate.Allocation) bool {
	if len(a) != len(b) {
		return false
	}
	count := make(map[climate.Allocation]int, len(a))
	for _, x := range a {
		count[x]++
	}
	for _, x := range b {
		if count[x] == 0 {
			return false
		}
		count[x]--
	}
	return true
}

// downHosts returns the hosts r holds during a window of windows, from now on, with one
// such window each; nil when none.
func downHosts(windows []climate.Maintenance, r *climate.Reservation, now time.Time) map[string]*climate.Maintenance {
	var out map[string]*climate.Maintenance
	for _, a := range r.Allocations {
		if !a.End.After(now) {
			continue
		}
		if w := inMaintenance(windows, a.ResourceID, climate.Later(now, a.Start), a.End); w != nil {
			if out == nil {
				out = map[string]*climate.Maintenance{}
			}
			out[a.ResourceID] = w
		}
	}
	return out
}

func sortedHosts(down map[string]*climate.Maintenance) []string {
	out := make([]string, 0, len(down))
	for h := range down {
		out = append(out, h)
	}
	slices.Sort(out)
	return out
}

// describeDown says which hosts are in maintenance and when, for a notification.
func describeDown(down map[string]*climate.Maintenance) string {
	parts := make([]string, 0, len(down))
	for _, h := range sortedHosts(down) {
		parts = append(parts, "host "+h+" is in maintenance "+describeWindow(down[h]))
	}
	return strings.Join(parts, ", ")
}

// describeWindow is a window's dates and reason, in words.
func describeWindow(w *climate.Maintenance) string {
	const layout = "2006-01-02 15:04"
	s := "from " + w.Start.UTC().Format(layout)
	if w.UntilFurtherNotice() {
		s += " until further notice"
	} else {
		s += " to " + w.End.UTC().Format(layout)
	}
	if w.Reason != "" {
		s += fmt.Sprintf(" (%s)", w.Reason)
	}
	return s
}

// logHealing logs a committed pass: the window, then each decision.
func (m *Manager) logHealing(ctx context.Context, ch maintenanceChange, p *healPlan) {
	w := ch.window()
	if w == nil { // windows ended by themselves
		for _, o := range p.outcomes {
			m.cfg.Log.Info("healing after a maintenance window ended", "lease", o.LeaseID, "reservation", o.ReservationID,
				"outcome", string(o.Outcome), "down", strings.Join(o.Down, ","), "holds", strings.Join(o.Hosts, ","), "detail", o.Detail)
		}
		return
	}
	msg := "maintenance window added"
	if ch.remove != nil {
		msg = "maintenance window deleted: the host is back in service"
	}
	end := "until further notice"
	if !w.UntilFurtherNotice() {
		end = w.End.UTC().Format(time.RFC3339)
	}
	m.cfg.Log.Info(msg, "maintenance", w.ID, "host", w.HostID, "start", w.Start.UTC().Format(time.RFC3339), "end", end,
		"reason", w.Reason, "reservations", len(p.outcomes), "leases_changed", len(p.writes))
	for _, o := range p.outcomes {
		level := slog.LevelInfo
		if o.Outcome == climate.HealDegraded || o.Outcome == climate.HealSkipped {
			level = slog.LevelWarn
		}
		m.cfg.Log.Log(ctx, level, "healing", "maintenance", w.ID, "host", w.HostID, "lease", o.LeaseID, "reservation", o.ReservationID,
			"outcome", string(o.Outcome), "down", strings.Join(o.Down, ","), "holds", strings.Join(o.Hosts, ","), "detail", o.Detail)
	}
}
