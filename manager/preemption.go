package manager

import (
	"context"
	"slices"
	"time"

	"climate"
	"climate/notify"
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
	for _, r := range l.Reservations {
		if r.ResourceType != climate.ResourceTypeHost {
			return invalid("A preemptible lease reserves %s only; %s cannot be preemptible", climate.ResourceTypeHost, r.ResourceType)
		}
	}
	l.Preemptible, l.OnPreempt = true, req.OnPreempt
	if l.OnPreempt == "" {
		l.OnPreempt = climate.PreemptShrink
	}
	return nil
}

// planningView returns v as one plan made at now sees it: a lease starting at least the
// notice and the cleaning time from now may take hosts back from preemptible leases.
func (m *Manager) planningView(v *resource.View, now time.Time) *resource.View {
	c := *v
	c.ReclaimFrom = now.Add(m.cfg.PreemptionNotice + m.cfg.Cleaning)
	c.Notice = m.cfg.PreemptionNotice
	return &c
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

// reclaim takes back, inside the write transaction of lease l (not preemptible), the
// hosts l was planned on that preemptible leases hold: each such allocation is cut at
// l's start less the cleaning time, if l starts far enough ahead for the notice and the
// allocation started before the cut (the planner chose those only). others are the other
// leases' allocations near l's hosts, as read in the transaction; it returns them as
// they are once cut (for the re-check), and the preemptible leases to write.
func (m *Manager) reclaim(ctx context.Context, tx climate.Tx, l *climate.Lease, others []climate.Allocation, now time.Time) (after []climate.Allocation, cutLeases []*climate.Lease, removed, added []climate.Allocation, err error) {
	c := m.cfg.Cleaning
	if l.Start.Before(now.Add(m.cfg.PreemptionNotice + c)) {
		return others, nil, nil, nil, nil
	}
	mine := map[string]bool{}
	for _, a := range allocationsOf(l) {
		if !a.Shared() {
			mine[a.ResourceID] = true
		}
	}
	at := l.Start.Add(-c)
	byLease := map[string]*climate.Lease{}
	after = make([]climate.Allocation, 0, len(others))
	for _, o := range others {
		if !o.Preemptible || !mine[o.ResourceID] || !o.Start.Before(at) || !o.End.After(at) {
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
		m.cfg.Log.Info("hosts taken back from a preemptible lease", "lease", p.ID, "by", l.ID, "at", at, "on_preempt", p.OnPreempt)
	}
	return after, cutLeases, removed, added, nil
}

// writeCuts writes the preemptible leases reclaim cut, each with a lease.update.
func writeCuts(ctx context.Context, tx climate.Tx, cutLeases []*climate.Lease, now time.Time) error {
	for _, p := range cutLeases {
		if err := tx.UpdateLease(ctx, p); err != nil {
			return err
		}
		if err := notify.Add(ctx, tx, climate.NotifyLeaseUpdate, p, nil, now); err != nil {
			return err
		}
	}
	return nil
}
