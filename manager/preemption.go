package manager

import (
	"context"
	"slices"
	"sort"
	"time"

	"climate"
	"climate/notify"
	"climate/plan"
	"climate/resource"
)

// Preemptible leases run on hosts that are free now but may be reserved later. The store
// never holds two allocations of one host at one instant: a preemptible lease's
// allocation on a host booked later in its window ends, from the start, at that booking
// less the cleaning time; a lease booked later over a preemptible allocation cuts it
// there in the same transaction (reclaim). Either way the preemptible lease gets a
// preempt_lease event a notice ahead of the cut, which sends lease.preempted, and shrinks
// or ends (OnPreempt). A lease may cut only for a start at least the notice and the
// cleaning time away, so every notice is given in full and every reserving lease starts
// on time.

// checkPreemptible validates a create request's preemption fields and sets l's.
func checkPreemptible(req climate.LeaseRequest, l *climate.Lease) error {
	switch {
	case !req.Preemptible && req.OnPreempt != "":
		return invalid("on_preempt goes with preemptible: true")
	case !req.Preemptible:
		return nil
	case req.OnPreempt != "" && req.OnPreempt != climate.PreemptShrink && req.OnPreempt != climate.PreemptEnd:
		return invalid("Unknown on_preempt %q (accepted: shrink, end)", req.OnPreempt)
	case req.Type.Waits():
		return invalid("A preemptible lease does not wait for capacity: lease_type %s cannot be preemptible", req.Type)
	case req.Start.Earliest:
		return invalid("A preemptible lease takes the capacity free at its start: give start_date, not \"earliest\"")
	}
	l.Preemptible, l.OnPreempt = true, req.OnPreempt
	if l.OnPreempt == "" {
		l.OnPreempt = climate.PreemptShrink
	}
	return nil
}

// planningView returns v as one plan made at now sees it: a lease starting at least the
// notice and the cleaning time from now may take resources back from preemptible leases,
// unless it is preemptible itself.
func (m *Manager) planningView(v *resource.View, now time.Time, preemptible bool) *resource.View {
	c := *v
	if !preemptible {
		c.ReclaimFrom = now.Add(m.cfg.PreemptionNotice + m.cfg.Cleaning)
	}
	c.Notice = m.cfg.PreemptionNotice
	return &c
}

// planShortened plans reservation r of preemptible lease l, of a type without runs of
// its own (resource.Runs), over the longest window from l's start, at least the notice
// long, in which it fits: every allocation ends there, where what it holds is booked.
func (m *Manager) planShortened(t resource.Type, v *resource.View, l *climate.Lease, r *climate.Reservation, had, planned []climate.Allocation, rotate int) ([]climate.Allocation, error) {
	try := func(end time.Time) ([]climate.Allocation, error) {
		w := *l
		w.End = end
		out, err := t.Plan(v, &w, r, had, planned, rotate)
		for i := range out {
			out[i].End, out[i].Preemptible = end, true
		}
		return out, err
	}
	out, err := try(l.End)
	if climate.ErrorCode(err) != climate.CodeConflict {
		return out, err
	}
	// A shorter window only fits more easily: the fitting ends are a prefix of the
	// candidates, in order.
	ends := v.Starts(l.Start.Add(max(v.Notice, time.Microsecond)-time.Microsecond), l.End)
	n := sort.Search(len(ends), func(i int) bool {
		_, err := try(ends[i])
		return err != nil
	})
	if n == 0 {
		return nil, err
	}
	return try(ends[n-1])
}

// shapePreemptible fits planned preemptible lease l, as asked (ending at askedEnd), to
// what its hosts allow: with shrink it ends when its
// last host is given back, with end when its first one is; every host given back before
// the asked end gets a notice.
func (m *Manager) shapePreemptible(l *climate.Lease, askedEnd time.Time, now time.Time) {
	l.Events = slices.DeleteFunc(l.Events, func(ev climate.Event) bool {
		return ev.Type == climate.EventPreemptLease && ev.Status == climate.EventUndone
	})
	allocs := allocationsOf(l)
	if len(allocs) == 0 {
		return
	}
	end := allocs[0].End
	for _, a := range allocs {
		if l.OnPreempt == climate.PreemptEnd {
			end = climate.Earlier(end, a.End)
		} else {
			end = climate.Later(end, a.End)
		}
	}
	for _, a := range allocs {
		if a.End.Before(askedEnd) {
			m.cut(l, a.ResourceID, climate.Earlier(a.End, end), now)
		}
	}
}

// cut takes host back from preemptible lease l at instant at: its allocation there ends
// then, the lease shrinks or ends, and a preempt_lease event gives notice (at once if
// the notice would be in the past). It returns the allocations as they were and are.
func (m *Manager) cut(l *climate.Lease, host string, at, now time.Time) (removed, added []climate.Allocation) {
	end := at
	if l.OnPreempt != climate.PreemptEnd {
		end = time.Time{} // the latest end of what is left
	}
	for i := range l.Reservations {
		r := &l.Reservations[i]
		for j := range r.Allocations {
			a := &r.Allocations[j]
			if (a.ResourceID == host || l.OnPreempt == climate.PreemptEnd) && a.End.After(at) {
				removed = append(removed, *a)
				a.End = at
				added = append(added, *a)
			}
			if l.OnPreempt != climate.PreemptEnd {
				end = climate.Later(end, a.End)
			}
		}
	}
	if end.Before(l.End) {
		moveEnd(l, end, now)
	}
	notice := climate.Later(now, at.Add(-m.cfg.PreemptionNotice)).Truncate(time.Microsecond)
	for _, ev := range l.Events {
		if ev.Type == climate.EventPreemptLease && ev.Status == climate.EventUndone && ev.Time.Equal(notice) {
			return removed, added
		}
	}
	l.Events = append(l.Events, climate.Event{ID: climate.NewID(), LeaseID: l.ID, Type: climate.EventPreemptLease, Time: notice,
		Status: climate.EventUndone, CreatedAt: now})
	return removed, added
}

// moveEnd brings l's end earlier to end, with its end and before_end events (the
// before_end keeps its distance to the end, but not before the start, and is due now
// at the earliest); notices of preemptions after the new end are dropped.
func moveEnd(l *climate.Lease, end, now time.Time) {
	shift := l.End.Sub(end)
	l.End = end
	l.Events = slices.DeleteFunc(l.Events, func(ev climate.Event) bool {
		return ev.Type == climate.EventPreemptLease && ev.Status == climate.EventUndone && ev.Time.After(end)
	})
	for i := range l.Events {
		ev := &l.Events[i]
		if ev.Status != climate.EventUndone {
			continue
		}
		switch ev.Type {
		case climate.EventEndLease:
			ev.Time = end
		case climate.EventBeforeEndLease:
			ev.Time = climate.Later(climate.Later(l.Start, ev.Time.Add(-shift)), now.Truncate(time.Microsecond))
		}
	}
}

// reclaim takes back, inside the write transaction of lease l (not preemptible), what
// preemptible leases hold of the resources l was planned on: each such allocation is cut
// at l's start less the resource's cleaning time, if l starts far enough ahead for the
// notice and the allocation started before the cut (the planner chose those only). On a
// host where l holds slots, preemptible holds are cut only if l does not fit beside
// them. onHosts and onOthers are l's allocations on hosts and on other resources;
// others the other leases' allocations near them, as read in the transaction. It returns
// others as they are once cut (for the re-check), and the preemptible leases to write.
func (m *Manager) reclaim(ctx context.Context, tx climate.Tx, l *climate.Lease, onHosts, onOthers, others []climate.Allocation, capacity map[string]climate.Size, now time.Time) (after []climate.Allocation, cutLeases []*climate.Lease, removed, added []climate.Allocation, err error) {
	c := m.cfg.Cleaning
	if l.Start.Before(now.Add(m.cfg.PreemptionNotice+c)) || !slices.ContainsFunc(others, isPreemptible) {
		return others, nil, nil, nil, nil // nothing to take back: no maps built
	}
	// Per resource: the cleaning time kept after its holds, l's allocations and the
	// others' there, and whether to cut.
	cleaning := map[string]time.Duration{}
	mine, near := map[string][]climate.Allocation{}, map[string][]climate.Allocation{}
	for _, a := range onOthers {
		cleaning[a.ResourceID] = 0
		mine[a.ResourceID] = append(mine[a.ResourceID], a)
	}
	for _, a := range onHosts {
		cleaning[a.ResourceID] = c
		mine[a.ResourceID] = append(mine[a.ResourceID], a)
	}
	takeable := map[string]bool{}
	for _, o := range others {
		near[o.ResourceID] = append(near[o.ResourceID], o)
		takeable[o.ResourceID] = takeable[o.ResourceID] || takeBack(o, l.Start.Add(-cleaning[o.ResourceID]))
	}
	cut := map[string]bool{}
	for id, c := range cleaning {
		cut[id] = takeable[id] && !(allShared(mine[id]) && plan.Fits(mine[id], near[id], capacity, c))
	}
	byLease := map[string]*climate.Lease{}
	after = make([]climate.Allocation, 0, len(others))
	for _, o := range others {
		at := l.Start.Add(-cleaning[o.ResourceID])
		if !cut[o.ResourceID] || !takeBack(o, at) {
			after = append(after, o)
			continue
		}
		p := byLease[o.LeaseID]
		if p == nil {
			if p, err = tx.GetLease(ctx, o.LeaseID); err != nil {
				return nil, nil, nil, nil, err
			}
			byLease[o.LeaseID] = p
			cutLeases = append(cutLeases, p)
		}
		rem, add := m.cut(p, o.ResourceID, at, now)
		removed, added = append(removed, rem...), append(added, add...)
		o.End = at
		after = append(after, o)
	}
	for _, p := range cutLeases {
		p.UpdatedAt = now
		m.cfg.Log.Info("resources taken back from a preemptible lease", "lease", p.ID, "by", l.ID, "on_preempt", p.OnPreempt)
	}
	return after, cutLeases, removed, added, nil
}

func isPreemptible(a climate.Allocation) bool { return a.Preemptible }

// takeBack reports whether preemptible allocation o can be cut at at: it started
// before and runs past it.
func takeBack(o climate.Allocation, at time.Time) bool {
	return o.Preemptible && o.Start.Before(at) && o.End.After(at)
}

// allShared reports whether every allocation holds slots of its resource.
func allShared(allocs []climate.Allocation) bool {
	for _, a := range allocs {
		if !a.Shared() {
			return false
		}
	}
	return true
}

// writeCuts writes the preemptible leases reclaim cut for lease by, each with a
// lease.update and an audit entry in the service's name.
func (m *Manager) writeCuts(ctx context.Context, tx climate.Tx, by *climate.Lease, cutLeases []*climate.Lease, now time.Time) error {
	for _, p := range cutLeases {
		before, err := tx.GetLease(ctx, p.ID) // as stored: reclaim cut p in memory only
		if err != nil {
			return err
		}
		if err := tx.UpdateLease(ctx, p); err != nil {
			return err
		}
		if err := accountBySystem(ctx, tx, p, now); err != nil {
			return err
		}
		reason := "resources taken back for lease " + by.ID + " (on_preempt " + string(p.OnPreempt) + ")"
		if err := m.audit(ctx, tx, climate.BySystem(reason), auditLeasePreempted, climate.LeaseAuditTarget(p), climate.LeaseAuditSummary(before), climate.LeaseAuditSummary(p)); err != nil {
			return err
		}
		if err := notify.Add(ctx, tx, climate.NotifyLeaseUpdate, p, nil, now); err != nil {
			return err
		}
	}
	return nil
}
