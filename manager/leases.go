package manager

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"time"

	"climate"
	"climate/notify"
	"climate/plan"
	"climate/resource"
	"climate/usage"
)

// resolve returns the time a request date stands for, "now" being now.
func resolve(d climate.Date, now time.Time) time.Time {
	if d.Now {
		return now
	}
	return d.Time.UTC().Truncate(time.Microsecond)
}

const maxLeaseName = 80

func invalid(format string, args ...any) error {
	return climate.Errorf(climate.CodeInvalid, format, args...)
}

// GetLease returns a lease the caller may see.
func (m *Manager) GetLease(ctx context.Context, who climate.Identity, id string) (*climate.Lease, error) {
	if err := m.allow(who, "blazar:leases:get", who.OwnTarget()); err != nil {
		return nil, err
	}
	var l *climate.Lease
	err := m.store.View(ctx, func(tx climate.Tx) error {
		var err error
		if l, err = m.getOwnLease(ctx, tx, who, id, "blazar:leases:get"); err != nil {
			return err
		}
		one := []climate.Lease{*l}
		err = usage.FillCosts(ctx, tx, one)
		l.Cost = one[0].Cost
		return err
	})
	return l, err
}

// getOwnLease loads a lease and hides it from other projects (as if it did not exist, so
// ids of other projects' leases are not even confirmed), then checks rule on the lease's
// project and user (with the default rules, always allowed once the caller's own
// project passed them).
func (m *Manager) getOwnLease(ctx context.Context, tx climate.Tx, who climate.Identity, id, rule string) (*climate.Lease, error) {
	l, err := tx.GetLease(ctx, id)
	if err != nil {
		return nil, err
	}
	if !who.IsAdmin() && l.ProjectID != who.ProjectID {
		return nil, climate.Errorf(climate.CodeNotFound, "Object with {'lease_id': '%s'} not found", id)
	}
	if err := m.allow(who, rule, leaseTarget(l)); err != nil {
		return nil, err
	}
	return l, nil
}

// CreateLease validates, plans and books a lease for the caller's project.
func (m *Manager) CreateLease(ctx context.Context, who climate.Identity, req climate.LeaseRequest) (*climate.Lease, error) {
	if err := m.allow(who, "blazar:leases:post", who.OwnTarget()); err != nil {
		return nil, err
	}
	now := m.now()
	if req.Name == "" {
		return nil, invalid("Missing parameter name")
	}
	if err := climate.CheckText("Lease name", req.Name, maxLeaseName); err != nil {
		return nil, err
	}
	if len(req.Reservations) > climate.MaxReservations {
		return nil, invalid("A lease has at most %d reservations; %d were given", climate.MaxReservations, len(req.Reservations))
	}
	if !req.Start.IsSet() {
		return nil, invalid("Missing parameter start_date")
	}
	l := &climate.Lease{
		ID: climate.NewID(), Name: req.Name, UserID: who.UserID, ProjectID: who.ProjectID,
		Status: climate.LeasePending, CreatedAt: now,
	}
	for _, rr := range req.Reservations {
		t, err := m.cfg.Types.Get(rr.ResourceType)
		if err != nil {
			return nil, err
		}
		r, err := t.New(ctx, rr)
		if err != nil {
			return nil, err
		}
		r.ResourceType = t.Name()
		r.ID, r.LeaseID, r.Status, r.CreatedAt = climate.NewID(), l.ID, climate.ReservationPending, now
		l.Reservations = append(l.Reservations, r)
	}
	if err := checkLeaseType(req, l); err != nil {
		return nil, err
	}
	if err := checkPreemptible(req, l); err != nil {
		return nil, err
	}
	pr, err := m.rulesFor(ctx, l.ProjectID, req.DryRun)
	if err != nil {
		return nil, err
	}
	var search *slotSearch
	if req.Start.Earliest {
		if search, err = newSlotSearch(req, l, now); err != nil {
			return nil, err
		}
		if err := pr.checkDuration(now, now.Add(req.Duration)); err != nil {
			return nil, err
		}
	} else {
		if req.Duration != 0 || !req.Deadline.IsZero() {
			return nil, invalid("duration and deadline go with start_date \"earliest\"")
		}
		if !req.End.IsSet() {
			return nil, invalid("Missing parameter end_date")
		}
		if req.End.Earliest {
			return nil, invalid("end_date cannot be \"earliest\": give start_date \"earliest\" and a duration")
		}
		l.Start, l.End = resolve(req.Start, now), resolve(req.End, now)
		// Blazar compares with "now" truncated to the minute, so a start in the current
		// minute is accepted; we keep that for clients that only send minutes.
		if l.Start.Before(now.Truncate(time.Minute)) {
			return nil, invalid("Start date must be later than current date")
		}
		if !l.End.After(l.Start) {
			return nil, invalid("End date must be later than start date.")
		}
		if err := pr.checkDuration(l.Start, l.End); err != nil {
			return nil, err
		}
		if err := m.setEvents(l, req.BeforeEnd, req.BeforeStart, now); err != nil {
			return nil, err
		}
		if err := setRetryUntil(req, l); err != nil {
			return nil, err
		}
	}
	if err := m.checkExternal(ctx, pr, who, nil, l); err != nil {
		return nil, err
	}
	if m.cfg.Trusts != nil && !req.DryRun {
		// As Blazar: the owner's roles are delegated to Climate for the lease's actions.
		if l.TrustID, err = m.cfg.Trusts.Create(ctx, who); err != nil {
			return nil, err
		}
	}
	var entry *climate.AuditEntry
	var note *climate.Notification
	prepare := func() (err error) { // the lease as planned: its hosts are chosen
		if entry, err = climate.NewAuditEntry(ctx, climate.ByUser(who), auditLeaseCreate, climate.LeaseAuditTarget(l), nil, climate.LeaseAuditSummary(l), m.now()); err != nil {
			return err
		}
		note, err = notify.New(climate.NotifyLeaseCreate, l, nil, now)
		return err
	}
	err = m.planAndCommit(ctx, l, nil, planOptions{dryRun: req.DryRun, search: search, prepare: prepare}, func(tx climate.Tx) error {
		if err := tx.InsertLease(ctx, l); err != nil {
			return err
		}
		if err := tx.InsertAudit(ctx, entry); err != nil {
			return err
		}
		if err := tx.AddNotification(ctx, note); err != nil {
			return err
		}
		// Last: the charge locks the project's running totals until commit (PostgreSQL),
		// so the project's other creations wait for as little as possible.
		return m.account(ctx, tx, nil, l, now)
	})
	if climate.ErrorCode(err) == climate.CodeConflict && l.Type.Waits() && !req.DryRun {
		err = m.insertWaiting(ctx, who, l, now) // it waits for capacity
	}
	if err != nil {
		m.deleteTrust(l) // no lease, no trust left behind (Blazar leaves it)
		return nil, err
	}
	if req.DryRun {
		return l, nil
	}
	m.eventsChanged(l)
	m.notified()
	return l, nil
}

// setEvents gives a new lease its start, end, before_end and before_start events.
func (m *Manager) setEvents(l *climate.Lease, beforeEndGiven, beforeStartGiven *time.Time, now time.Time) error {
	beforeEnd, err := m.beforeEndTime(beforeEndGiven, l.Start, l.End)
	if err != nil {
		return err
	}
	beforeStart, err := m.beforeStartTime(beforeStartGiven, l.Start, now)
	if err != nil {
		return err
	}
	l.Events = []climate.Event{
		{ID: climate.NewID(), LeaseID: l.ID, Type: climate.EventStartLease, Time: l.Start, Status: climate.EventUndone, CreatedAt: now},
		{ID: climate.NewID(), LeaseID: l.ID, Type: climate.EventEndLease, Time: l.End, Status: climate.EventUndone, CreatedAt: now},
	}
	if !beforeEnd.IsZero() {
		l.Events = append(l.Events, climate.Event{ID: climate.NewID(), LeaseID: l.ID, Type: climate.EventBeforeEndLease, Time: beforeEnd, Status: climate.EventUndone, CreatedAt: now})
	}
	if !beforeStart.IsZero() {
		l.Events = append(l.Events, climate.Event{ID: climate.NewID(), LeaseID: l.ID, Type: climate.EventBeforeStartLease, Time: beforeStart, Status: climate.EventUndone, CreatedAt: now})
	}
	return nil
}

// beforeStartTime returns when the before_start_lease heads-up fires, or zero for none:
// the given time, which must lie between now and the start, or the server's lead before
// the start, if the start is at least that far away.
func (m *Manager) beforeStartTime(given *time.Time, start, now time.Time) (time.Time, error) {
	if given != nil {
		t := given.UTC().Truncate(time.Microsecond)
		if t.Before(now.Truncate(time.Minute)) || !t.Before(start) {
			return time.Time{}, invalid("before_start_date must be between now and the start date")
		}
		return t, nil
	}
	if t := start.Add(-m.cfg.BeforeStart); m.cfg.BeforeStart > 0 && !t.Before(now) {
		return t, nil
	}
	return time.Time{}, nil
}

// beforeEndTime returns when the before_end_lease event fires, or zero for none.
func (m *Manager) beforeEndTime(given *time.Time, start, end time.Time) (time.Time, error) {
	if given != nil {
		t := given.UTC().Truncate(time.Microsecond)
		if !t.After(start) || !t.Before(end) {
			return time.Time{}, invalid("Datetime is out of lease limits")
		}
		return t, nil
	}
	if m.cfg.BeforeEnd <= 0 {
		return time.Time{}, nil
	}
	t := end.Add(-m.cfg.BeforeEnd)
	if t.Before(start) {
		t = start
	}
	return t, nil
}

// planOptions modify planAndCommit: a dry run writes nothing; a search first finds the
// earliest window for the lease.
type planOptions struct {
	dryRun bool
	search *slotSearch // set for start_date "earliest"
	// prepare, when set, runs after each plan that is to be committed, before its write
	// transaction: work that needs the plan but not the database (the records write
	// inserts), so the transaction, and SQLite's one writer, do not wait for it.
	prepare func() error
}

// planAndCommit plans every reservation of l over l's window and commits with write.
// Inside the write transaction it re-checks that the inventory has not changed and that
// what was chosen still fits beside what other leases hold now (no resource held whole
// by two, slots within their host's capacity: the database, not the index, is the
// authority); on
// conflict it plans again on a fresh view. prev is the lease before an update (nil on
// create): its hosts are preferred, and active reservations must keep all of theirs.
func (m *Manager) planAndCommit(ctx context.Context, l, prev *climate.Lease, opts planOptions, write func(climate.Tx) error) error {
	var askedEnd time.Time // a preemptible lease's window and events, before it is fitted
	var askedEvents []climate.Event
	if l.Preemptible {
		askedEnd, askedEvents = l.End, slices.Clone(l.Events)
	}
	for attempt := 0; attempt < commitAttempts; attempt++ {
		var chosen, onHosts, onOthers []climate.Allocation
		var capacity map[string]climate.Size
		var invRev int64
		var cutLeases []*climate.Lease
		var cutRemoved, cutAdded []climate.Allocation
		var recheck climate.AllocationFilter // the other leases' allocations on what was chosen
		var held *heldAt                     // what the plan's index held there, for a SerialLog
		now := m.now()
		if l.Preemptible {
			l.End, l.Events = askedEnd, slices.Clone(askedEvents)
		}
		planStart := time.Now() // wall time: the clock may be a test's fake
		// Only a first attempt that commits may plan on a trusted index: a dry run's answer,
		// an earliest slot and a refusal are given as of a checked view.
		trusted, err := m.planView(ctx, attempt == 0 && !opts.dryRun && opts.search == nil, func(a *resource.View) error {
			a = m.planningView(a, now, l.Preemptible)
			if opts.search != nil { // "earliest": find the slot on this same view
				if err := m.placeEarliest(l, a, opts.search); err != nil {
					return err
				}
			}
			var err error
			rotate := 0
			if attempt > 0 || m.committing.Load() > 0 { // lost a race, or others are committing: look elsewhere than they do
				rotate = rand.IntN(1 << 30)
			}
			c := m.cfg.Cleaning // a host is kept free this long after each allocation
			chosen, err = m.planLease(l, prev, a, rotate, m.inFlight.overlapping(l.Start.Add(-c), l.End.Add(c)))
			if err == nil && l.Preemptible {
				m.shapePreemptible(l, askedEnd, now)
				chosen = allocationsOf(l)
			}
			invRev = a.Index.InventoryRevision
			recheck = climate.AllocationFilter{ResourceIDs: resource.IDs(chosen), From: l.Start.Add(-c), To: l.End.Add(c), ExcludeLeaseID: l.ID}
			if climate.WritesTakeTurns(m.store) && err == nil {
				held = heldOn(a, recheck, now)
			}
			capacity = capacities(a, chosen)
			onHosts, onOthers = splitHosts(a, chosen)
			// Named now, as the commit re-checks this inventory: the answer needs no read.
			l.Names = namesIn(a, resource.IDs(chosen))
			return err
		})
		m.cfg.Observer.Planned(time.Since(planStart))
		if err != nil && trusted {
			continue // refused on the trusted index: plan again on a checked one
		}
		if err != nil || opts.dryRun {
			return err
		}
		if opts.prepare != nil {
			if err := opts.prepare(); err != nil {
				return err
			}
		}
		done := m.inFlight.add(chosen)
		err = m.commitChange(ctx, func(tx climate.Tx) error {
			// The chosen resources' allocations are read first: a store whose writers run
			// side by side (PostgreSQL) locks the resources there, so the inventory read
			// next sees a concurrent deletion of one of them. One whose writers take turns
			// (SQLite) gives them as the plan's index held them with the log since.
			var others []climate.Allocation
			c := m.cfg.Cleaning // hosts are kept free this long after each allocation
			if len(chosen) > 0 {
				var logged bool
				var err error
				if others, logged, err = held.asOf(ctx, tx); err != nil {
					return err
				}
				if !logged {
					if others, err = tx.ListAllocations(ctx, recheck); err != nil {
						return err
					}
				}
			}
			rev, err := tx.InventoryRevision(ctx)
			if err != nil {
				return err
			}
			if rev != invRev {
				return climate.ErrConflictRetry
			}
			if len(chosen) > 0 {
				if !l.Preemptible {
					if others, cutLeases, cutRemoved, cutAdded, err = m.reclaim(ctx, tx, l, onHosts, onOthers, others, capacity, now); err != nil {
						return err
					}
				}
				if !plan.Fits(onHosts, others, capacity, c) || !plan.Fits(onOthers, others, capacity, 0) {
					return climate.ErrConflictRetry
				}
			}
			if err := write(tx); err != nil {
				return err
			}
			return m.writeCuts(ctx, tx, l, cutLeases, now)
		}, func() []climate.Allocation { return append(allocationsOf(prev), cutRemoved...) },
			func() []climate.Allocation { return append(allocationsOf(l), cutAdded...) },
			prev == nil) // a new lease (or a waiting one booked): nothing of it to have changed meanwhile
		done()
		if err == nil && len(cutLeases) > 0 {
			m.eventsChanged(nil) // the leases cut got earlier events (a preemption notice, their end)
		}
		if !errors.Is(err, climate.ErrConflictRetry) {
			return err
		}
		m.cfg.Observer.Conflict()
	}
	return climate.Errorf(climate.CodeConflict, "Not enough hosts available: the hosts found were booked by concurrent requests %d times in a row; try again", commitAttempts)
}

// planLease fills in the allocations of l's reservations, each planned by its type on the
// same view (each seeing what the earlier ones were given), and returns them all. Host
// reservations avoid the hosts of avoid (what concurrent commits are writing) when they
// can do without them.
func (m *Manager) planLease(l, prev *climate.Lease, v *resource.View, rotate int, avoid []climate.Allocation) ([]climate.Allocation, error) {
	current := map[string][]climate.Allocation{}
	for _, a := range allocationsOf(prev) {
		current[a.ReservationID] = append(current[a.ReservationID], a)
	}
	var all []climate.Allocation
	for i := range l.Reservations {
		r := &l.Reservations[i]
		if r.Status == climate.ReservationDeleted {
			continue
		}
		t, err := m.cfg.Types.Get(r.ResourceType)
		if err != nil {
			return nil, err
		}
		had := current[r.ID]
		planFn := t.Plan
		if _, runs := t.(resource.Runs); l.Preemptible && !runs {
			planFn = func(v *resource.View, l *climate.Lease, r *climate.Reservation, had, planned []climate.Allocation, rotate int) ([]climate.Allocation, error) {
				return m.planShortened(t, v, l, r, had, planned, rotate)
			}
		}
		var chosen []climate.Allocation
		if len(avoid) > 0 && r.ResourceType == climate.ResourceTypeHost {
			chosen, err = planFn(v, l, r, had, append(avoid[:len(avoid):len(avoid)], all...), rotate)
		}
		if chosen == nil {
			chosen, err = planFn(v, l, r, had, all, rotate)
		}
		if err != nil {
			return nil, err
		}
		if r.Status == climate.ReservationActive {
			if lost := missing(resource.IDs(had), resource.IDs(chosen)); len(lost) > 0 {
				return nil, climate.Errorf(climate.CodeConflict,
					"Not enough resources available: reservation %s is active and would lose %s; an active reservation keeps what it holds",
					r.ID, strings.Join(lost, ", "))
			}
		}
		r.Allocations = allocationsFor(l, r, chosen)
		all = append(all, r.Allocations...)
	}
	return all, nil
}

// capacities returns the capacity of each host given slots in allocs, for the re-check.
func capacities(v *resource.View, allocs []climate.Allocation) map[string]climate.Size {
	out := map[string]climate.Size{}
	for _, a := range allocs {
		if h := v.Index.Host(a.ResourceID); h != nil && a.Shared() {
			out[a.ResourceID] = h.Capacity()
		}
	}
	return out
}

// allocationsFor completes r's planned allocations over l's window, keeping the ids of
// allocations r already had on the same resources.
func allocationsFor(l *climate.Lease, r *climate.Reservation, planned []climate.Allocation) []climate.Allocation {
	old := make(map[string]string, len(r.Allocations))
	for _, a := range r.Allocations {
		old[a.ResourceID] = a.ID
	}
	out := make([]climate.Allocation, 0, len(planned))
	for _, a := range planned {
		a.ID = old[a.ResourceID]
		if a.ID == "" {
			a.ID = climate.NewID()
		}
		if a.End.IsZero() { // a preemptible lease's host may end earlier (preemption.go)
			a.End = l.End
		}
		a.ReservationID, a.LeaseID, a.Start = r.ID, l.ID, l.Start
		out = append(out, a)
	}
	return out
}

// missing returns the elements of want that are absent from got.
func missing(want, got []string) []string {
	have := make(map[string]bool, len(got))
	for _, g := range got {
		have[g] = true
	}
	var out []string
	for _, w := range want {
		if !have[w] {
			out = append(out, w)
		}
	}
	return out
}

// UpdateLease changes a lease's name, dates, before_end date or reservations, following
// Blazar's rules, and re-plans its hosts over the new window. An event of the lease that
// fires while the update is planned (its status or an event's moved) makes the update
// start again from the lease as it is then, a few times before it gives up with a 409.
func (m *Manager) UpdateLease(ctx context.Context, who climate.Identity, id string, u climate.LeaseUpdate) (*climate.Lease, error) {
	for attempt := 1; ; attempt++ {
		l, err := m.updateLease(ctx, who, id, u)
		if !errors.Is(err, errChangedMeanwhile) || attempt == updateAttempts {
			return l, err
		}
	}
}

// updateAttempts bounds how often an update starts again after its lease changed.
const updateAttempts = 3

// errChangedMeanwhile marks the conflict of an update whose lease changed status, or saw
// an event fire, between its read and its write.
var errChangedMeanwhile = errors.New("the lease changed while it was being updated")

func (m *Manager) updateLease(ctx context.Context, who climate.Identity, id string, u climate.LeaseUpdate) (*climate.Lease, error) {
	if err := m.allow(who, "blazar:leases:put", who.OwnTarget()); err != nil {
		return nil, err
	}
	cur, err := m.GetLease(ctx, who, id)
	if err != nil {
		return nil, err
	}
	if err := m.allow(who, "blazar:leases:put", leaseTarget(cur)); err != nil {
		return nil, err
	}
	if !cur.Status.IsStable() {
		return nil, climate.Errorf(climate.CodeConflict, "Lease %s is %s; it can be updated once that finishes", id, cur.Status)
	}
	if u.Name == nil && !u.Start.IsSet() && !u.End.IsSet() && u.BeforeEnd == nil && u.BeforeStart == nil && len(u.Reservations) == 0 {
		return cur, nil // nothing to change: no write, no new updated_at
	}
	now := m.now()
	l := cloneLease(cur)
	l.UpdatedAt = now
	if u.Name != nil {
		if *u.Name == "" {
			return nil, invalid("Lease name must not be empty")
		}
		if err := climate.CheckText("Lease name", *u.Name, maxLeaseName); err != nil {
			return nil, err
		}
		l.Name = *u.Name
	}
	renameOnly := !u.Start.IsSet() && !u.End.IsSet() && u.BeforeEnd == nil && u.BeforeStart == nil && len(u.Reservations) == 0
	pr, err := m.rulesFor(ctx, cur.ProjectID, false)
	if err != nil {
		return nil, err
	}
	if renameOnly {
		return l, m.commitUpdate(ctx, who, pr, cur, l, false)
	}
	start, end := cur.Start, cur.End
	if u.Start.IsSet() {
		start = resolve(u.Start, now)
	}
	if u.End.IsSet() {
		end = resolve(u.End, now)
	}
	minuteNow := now.Truncate(time.Minute)
	started := cur.Event(climate.EventStartLease) == nil || cur.Event(climate.EventStartLease).Status != climate.EventUndone
	switch {
	case started && !start.Equal(cur.Start):
		return nil, invalid("Cannot modify the start date of already started leases")
	case !started && start.Before(minuteNow):
		return nil, invalid("Start date must be later than current date")
	case cur.Status == climate.LeaseTerminated || cur.End.Before(now):
		return nil, invalid("Terminated leases can only be renamed")
	case end.Before(minuteNow) || !end.After(start):
		return nil, invalid("End date must be later than current and start date")
	}
	if err := pr.checkDuration(start, end); err != nil {
		return nil, err
	}
	if err := m.checkExtension(pr, cur, end, now); err != nil {
		return nil, err
	}
	l.Start, l.End = start, end

	// Reservation changes.
	byID := make(map[string]*climate.Reservation, len(l.Reservations))
	for i := range l.Reservations {
		byID[l.Reservations[i].ID] = &l.Reservations[i]
	}
	var unknown []string
	for _, rr := range u.Reservations {
		if rr.ID == "" {
			return nil, invalid("Missing parameter reservation ID")
		}
		if byID[rr.ID] == nil {
			unknown = append(unknown, rr.ID)
		}
	}
	if len(unknown) > 0 {
		return nil, invalid("Please enter valid reservation IDs. Invalid reservation IDs are: %s", strings.Join(unknown, ", "))
	}
	for _, rr := range u.Reservations {
		r := byID[rr.ID]
		if rr.ResourceType != "" && rr.ResourceType != r.ResourceType {
			return nil, climate.Errorf(climate.CodeConflict, "resource_type cannot be updated")
		}
		t, err := m.cfg.Types.Get(r.ResourceType)
		if err != nil {
			return nil, err
		}
		if err := t.Update(ctx, r, rr); err != nil {
			return nil, err
		}
		r.UpdatedAt = now
	}

	// Events follow the new dates; the before_end event keeps its distance from the end
	// unless a new before_end_date is given.
	for i := range l.Events {
		e := &l.Events[i]
		prev := e.Time
		switch e.Type {
		case climate.EventStartLease:
			e.Time = start
		case climate.EventEndLease:
			e.Time = end
		case climate.EventBeforeEndLease:
			if u.BeforeEnd != nil {
				e.Time = u.BeforeEnd.UTC().Truncate(time.Microsecond)
			} else {
				e.Time = end.Add(-cur.End.Sub(e.Time))
			}
			if e.Time.Before(start) {
				e.Time = start
			}
			if e.Status == climate.EventDone && e.Time.After(now) {
				e.Status = climate.EventUndone
			}
		}
		if !e.Time.Equal(prev) {
			e.UpdatedAt = now
		}
	}
	if u.BeforeEnd != nil {
		t := u.BeforeEnd.UTC().Truncate(time.Microsecond)
		if !t.After(start) || !t.Before(end) {
			return nil, invalid("Datetime is out of lease limits")
		}
		if l.Event(climate.EventBeforeEndLease) == nil {
			l.Events = append(l.Events, climate.Event{ID: climate.NewID(), LeaseID: l.ID, Type: climate.EventBeforeEndLease, Time: t, Status: climate.EventUndone, CreatedAt: now})
		}
	}
	if err := m.moveBeforeStart(l, cur, u.BeforeStart, started, now); err != nil {
		return nil, err
	}
	return l, m.commitUpdate(ctx, who, pr, cur, l, true)
}

// moveBeforeStart keeps the before_start_lease heads-up with an updated lease: at the given
// time, or at its distance from the moved start (the server's lead for a lease without
// one). A heads-up that would now be in the past is dropped, unless it already fired.
func (m *Manager) moveBeforeStart(l, cur *climate.Lease, given *time.Time, started bool, now time.Time) error {
	if started {
		if given != nil {
			return invalid("before_start_date cannot be set on a lease that has started")
		}
		return nil
	}
	var t time.Time
	if e := cur.Event(climate.EventBeforeStartLease); e != nil && given == nil {
		t = l.Start.Add(-cur.Start.Sub(e.Time))
		if e.Status != climate.EventUndone && !t.After(now) {
			return nil // it fired, and would not fire again
		}
	} else {
		var err error
		if t, err = m.beforeStartTime(given, l.Start, now); err != nil {
			return err
		}
	}
	kept := l.Events[:0]
	for _, e := range l.Events {
		if e.Type != climate.EventBeforeStartLease {
			kept = append(kept, e)
		}
	}
	l.Events = kept
	if t.IsZero() || t.Before(now) {
		return nil
	}
	if e := cur.Event(climate.EventBeforeStartLease); e != nil {
		moved := *e
		if !moved.Time.Equal(t) || moved.Status != climate.EventUndone {
			moved.Time, moved.Status, moved.UpdatedAt = t, climate.EventUndone, now
		}
		l.Events = append(l.Events, moved)
		return nil
	}
	l.Events = append(l.Events, climate.Event{ID: climate.NewID(), LeaseID: l.ID, Type: climate.EventBeforeStartLease, Time: t, Status: climate.EventUndone, CreatedAt: now})
	return nil
}

// commitUpdate writes l over cur, re-planning hosts when replan is set. The write fails
// with a conflict if the lease changed status meanwhile (an event fired).
func (m *Manager) commitUpdate(ctx context.Context, who climate.Identity, r rules, cur, l *climate.Lease, replan bool) error {
	if err := m.checkExternal(ctx, r, who, cur, l); err != nil {
		return err
	}
	write := func(tx climate.Tx) error {
		now, err := tx.GetLease(ctx, l.ID)
		if err != nil {
			return err
		}
		if !sameProgress(now, cur) {
			return &climate.Error{Code: climate.CodeConflict, Err: errChangedMeanwhile,
				Message: fmt.Sprintf("Lease %s changed status (now %s) while it was being updated, %d times in a row; try again", l.ID, now.Status, updateAttempts)}
		}
		if err := tx.UpdateLease(ctx, l); err != nil {
			return err
		}
		if err := m.account(ctx, tx, now, l, l.UpdatedAt); err != nil {
			return err
		}
		if err := m.audit(ctx, tx, climate.ByUser(who), auditLeaseUpdate, climate.LeaseAuditTarget(l), climate.LeaseAuditSummary(now), climate.LeaseAuditSummary(l)); err != nil {
			return err
		}
		return notify.Add(ctx, tx, climate.NotifyLeaseUpdate, l, nil, l.UpdatedAt)
	}
	var err error
	if replan {
		err = m.planAndCommit(ctx, l, cur, planOptions{}, write)
	} else {
		err = m.store.Update(ctx, write)
	}
	if err != nil {
		return err
	}
	m.eventsChanged(l)
	m.WakeRetries() // what it held may let a waiting lease in
	m.notified()
	return nil
}

// DeleteLease deletes a lease with its reservations, allocations and events.
func (m *Manager) DeleteLease(ctx context.Context, who climate.Identity, id string) error {
	if err := m.allow(who, "blazar:leases:delete", who.OwnTarget()); err != nil {
		return err
	}
	var deleted *climate.Lease
	err := m.commitChange(ctx, func(tx climate.Tx) error {
		l, err := m.getOwnLease(ctx, tx, who, id, "blazar:leases:delete")
		if err != nil {
			return err
		}
		for _, e := range l.Events {
			if (e.Type == climate.EventStartLease || e.Type == climate.EventEndLease) && e.Status == climate.EventInProgress {
				return climate.Errorf(climate.CodeConflict, "Lease %s is %s; it can be deleted once that finishes", id, l.Status)
			}
		}
		deleted = l
		if _, err := usage.Sync(ctx, tx, l, usage.Deleted, m.now()); err != nil {
			return err
		}
		if err := tx.DeleteLease(ctx, id); err != nil {
			return err
		}
		if err := m.audit(ctx, tx, climate.ByUser(who), auditLeaseDelete, climate.LeaseAuditTarget(l), climate.LeaseAuditSummary(l), nil); err != nil {
			return err
		}
		return notify.Add(ctx, tx, climate.NotifyLeaseDelete, l, nil, m.now())
	}, func() []climate.Allocation { return allocationsOf(deleted) }, func() []climate.Allocation { return nil },
		true) // deleted was read in the transaction
	if err != nil {
		return err
	}
	m.deleteTrust(deleted)
	// Deleting can only put events off: an engine asleep until before the lease's
	// earliest event sleeps on (it used to be woken to claim nothing, after every deletion).
	m.eventsChanged(deleted)
	m.WakeRetries() // what it held may let a waiting lease in
	m.notified()
	return nil
}

// cloneLease deep-copies a lease so an update can be built without touching the original.
func cloneLease(l *climate.Lease) *climate.Lease {
	c := *l
	c.Events = append([]climate.Event(nil), l.Events...)
	c.Reservations = make([]climate.Reservation, len(l.Reservations))
	for i, r := range l.Reservations {
		r.Allocations = append([]climate.Allocation(nil), r.Allocations...)
		c.Reservations[i] = r
	}
	sort.SliceStable(c.Reservations, func(i, j int) bool { return c.Reservations[i].CreatedAt.Before(c.Reservations[j].CreatedAt) })
	return &c
}

// sameProgress reports whether no event fired on the lease between two reads of it.
func sameProgress(a, b *climate.Lease) bool {
	if a.Status != b.Status || len(a.Events) != len(b.Events) {
		return false
	}
	status := make(map[string]climate.EventStatus, len(a.Events))
	for _, e := range a.Events {
		status[e.ID] = e.Status
	}
	for _, e := range b.Events {
		if status[e.ID] != e.Status {
			return false
		}
	}
	return true
}

// deleteTrust deletes l's trust, if it has one; a failure is logged (the lease is gone
// either way, and Keystone's admins can remove the trust).
func (m *Manager) deleteTrust(l *climate.Lease) {
	if m.cfg.Trusts == nil || l == nil || l.TrustID == "" {
		return
	}
	// Not the request's context: the trust must go even if the caller hung up.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.cfg.Trusts.Delete(ctx, l.TrustID); err != nil {
		m.cfg.Log.Warn("a deleted lease's trust could not be deleted", "lease", l.ID, "trust", l.TrustID, "err", err)
	}
}
