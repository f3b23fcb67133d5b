package manager

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"climate"
	"climate/notify"
	"climate/resource"
	"climate/resource/builtin"
)

// defaultRetryFor is how long a retry or best-effort lease waits when it names no
// retry_until: a day after its requested start.
const defaultRetryFor = 24 * time.Hour

// maxRetries bounds a lease's max_retries.
const maxRetries = 10000

// checkLeaseType validates a create request's lease type and sets l's from it.
func checkLeaseType(req climate.LeaseRequest, l *climate.Lease) error {
	types := []climate.LeaseType{climate.LeaseImmediate, climate.LeaseRetry, climate.LeaseBestEffort, climate.LeaseScheduled}
	if req.Type != "" && !slices.Contains(types, req.Type) {
		names := make([]string, len(types))
		for i, t := range types {
			names[i] = string(t)
		}
		return invalid("Unknown lease_type %q (accepted: %s)", req.Type, strings.Join(names, ", "))
	}
	l.Type, l.Priority, l.MaxRetries = req.Type, req.Priority, req.MaxRetries
	switch {
	case req.Type == climate.LeaseImmediate && !req.Start.Now:
		return invalid("An immediate lease starts now: give start_date \"now\"")
	case req.Type.Waits() && req.Start.Earliest:
		return invalid("A %s lease waits for capacity by itself: give start_date (or \"now\") and end_date, not \"earliest\"", req.Type)
	case !req.Type.Waits() && (!req.RetryUntil.IsZero() || req.Priority != 0 || req.MaxRetries != 0):
		return invalid("retry_until, max_retries and priority go with lease_type retry or best_effort")
	case req.MaxRetries < 0 || req.MaxRetries > maxRetries:
		return invalid("max_retries %d: want 0 (until retry_until only) to %d", req.MaxRetries, maxRetries)
	case req.Priority < 0 || req.Priority > 1000:
		return invalid("priority %d: want 0 to 1000 (higher goes first)", req.Priority)
	}
	return nil
}

// setRetryUntil gives a waiting lease type its deadline, once its window is known.
func setRetryUntil(req climate.LeaseRequest, l *climate.Lease) error {
	if !l.Type.Waits() {
		return nil
	}
	l.RetryUntil = req.RetryUntil.UTC().Truncate(time.Microsecond)
	if req.RetryUntil.IsZero() {
		l.RetryUntil = l.Start.Add(defaultRetryFor)
	}
	if !l.RetryUntil.After(l.Start) {
		return invalid("retry_until must be later than the start date")
	}
	return nil
}

// insertWaiting stores l, which does not fit now, as waiting for capacity: no
// allocations, and one event, its deadline. Its dates are the window it asked for; it
// keeps their length when it starts.
func (m *Manager) insertWaiting(ctx context.Context, who climate.Identity, l *climate.Lease, now time.Time) error {
	l.Status = l.Type.WaitingStatus()
	for i := range l.Reservations {
		l.Reservations[i].Allocations = nil
	}
	l.Events = []climate.Event{{ID: climate.NewID(), LeaseID: l.ID, Type: climate.EventRetryDeadline, Time: l.RetryUntil,
		Status: climate.EventUndone, CreatedAt: now}}
	return m.store.Update(ctx, func(tx climate.Tx) error {
		if err := tx.InsertLease(ctx, l); err != nil {
			return err
		}
		if err := m.audit(ctx, tx, climate.ByUser(who), auditLeaseCreate, climate.LeaseAuditTarget(l), nil, climate.LeaseAuditSummary(l)); err != nil {
			return err
		}
		return notify.Add(ctx, tx, climate.NotifyLeaseCreate, l, nil, now)
	})
}

// WakeRetries asks the retry worker (RunRetries) to re-plan the waiting leases: capacity
// may have freed (a lease deleted, shortened or ended, a host added or back).
func (m *Manager) WakeRetries() {
	select {
	case m.retryWake <- struct{}{}:
	default: // a wake-up is already pending
	}
}

// RunRetries re-plans the waiting leases whenever WakeRetries is called, and when a
// maintenance window ends by itself (the host is back: waiting leases may fit, and the
// leases it degraded are healed), until ctx ends.
func (m *Manager) RunRetries(ctx context.Context) {
	for {
		var ended <-chan time.Time
		var timer climate.Timer
		if next := m.nextWindowEnd(ctx); !next.IsZero() {
			timer = m.clock.NewTimer(max(next.Sub(m.now()), 0))
			ended = timer.C()
		}
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return
		case <-m.retryWake:
		case <-ended:
			if _, err := m.heal(ctx, maintenanceChange{}); err != nil {
				m.cfg.Log.Warn("healing after a maintenance window ended", "err", err)
			}
		}
		if timer != nil {
			timer.Stop()
		}
		if n, err := m.RetryWaiting(ctx); err != nil {
			m.cfg.Log.Warn("re-planning waiting leases", "err", err)
		} else if n > 0 {
			m.cfg.Log.Info("waiting leases fit now", "started", n)
		}
	}
}

// nextWindowEnd returns when the next maintenance window ends, or zero for none.
func (m *Manager) nextWindowEnd(ctx context.Context) time.Time {
	var next time.Time
	now := m.now()
	err := m.store.View(ctx, func(tx climate.Tx) error {
		ws, err := tx.ListMaintenances(ctx, climate.MaintenanceFilter{From: now})
		for _, w := range ws {
			if !w.UntilFurtherNotice() && (next.IsZero() || w.End.Before(next)) {
				next = w.End
			}
		}
		return err
	})
	if err != nil {
		m.cfg.Log.Warn("reading maintenance windows", "err", err)
	}
	return next
}

// RetryWaiting plans every waiting lease, highest priority first, then first come, first
// served, at its requested start or now if that has passed, keeping its length; each that
// fits is booked (PENDING, its events replacing its deadline). A later lease may take what
// an earlier one could not use. It returns how many were booked.
//
// Refusals are cheap: the queue is planned on one view (a booking takes a new one);
// identical requests are refused once; and a lease refused over a fixed window (its start
// still ahead) is skipped until an allocation overlapping that window is freed or the
// inventory changes (the freed log).
func (m *Manager) RetryWaiting(ctx context.Context) (int, error) {
	m.waitMu.Lock()
	defer m.waitMu.Unlock()
	waiting, err := m.waitingQueue(ctx)
	if err != nil {
		return 0, err
	}
	now := m.now()
	// Bookings in this pass only take capacity, so a request that did not fit in a window
	// will not fit in it later in the pass: identical requests are refused at once.
	refused := map[string]bool{}
	booked := 0
	var retried []string // leases with max_retries refused in this pass
	for i := 0; i < len(waiting); {
		fit := -1
		var fitStart time.Time
		err := m.view(ctx, func(v *resource.View) error {
			mark := m.freed.mark() // what this view has seen freed (changes apply under m.mu)
			v = m.planningView(v, now, false)
			for ; i < len(waiting) && fit < 0; i++ {
				w := &waiting[i]
				if !w.RetryUntil.After(now) {
					continue
				}
				fixed := !w.Start.Before(now)
				key := requestKey(w, now)
				if refused[key] {
					if fixed {
						m.refusedAt[w.ID] = mark
					}
					if w.MaxRetries > 0 {
						retried = append(retried, w.ID)
					}
					continue
				}
				if at, ok := m.refusedAt[w.ID]; ok && fixed && !m.freed.since(at, w.Start, w.End) {
					continue // nothing it could use was freed since it was refused
				}
				start, err := m.hunt(v, w, now)
				switch {
				case err == nil:
					fit, fitStart = i, start
				case climate.ErrorCode(err) == climate.CodeConflict:
					refused[key] = true
					if fixed {
						m.refusedAt[w.ID] = mark
					}
					if w.MaxRetries > 0 {
						retried = append(retried, w.ID)
					}
				default:
					m.cfg.Log.Warn("re-planning a waiting lease", "lease", w.ID, "err", err)
				}
			}
			return nil
		})
		if err != nil {
			return booked, err
		}
		if fit < 0 {
			break
		}
		ok, err := m.bookWaiting(ctx, &waiting[fit], fitStart)
		if err != nil {
			m.cfg.Log.Warn("booking a waiting lease", "lease", waiting[fit].ID, "err", err)
		}
		if ok {
			booked++
			delete(m.refusedAt, waiting[fit].ID)
		}
	}
	gaveUp, err := m.countRetries(ctx, retried, now)
	if err != nil {
		m.cfg.Log.Warn("counting the re-plans of waiting leases", "err", err)
	}
	if booked > 0 || gaveUp > 0 {
		m.eventsChanged(nil)
		m.notified()
	}
	return booked, nil
}

// hunt returns when waiting lease w can start if it fits on v now: at its asked start
// (or now, if that has passed). A best-effort lease that does not also hunts for hosts to
// take back from preemptible leases, which it may from a notice (and the cleaning time)
// ahead: it then starts then, if that is before its retry_until.
func (m *Manager) hunt(v *resource.View, w *climate.Lease, now time.Time) (time.Time, error) {
	start := climate.Later(w.Start, now)
	_, err := m.planLease(windowed(w, start, now), nil, v, 0, nil)
	if climate.ErrorCode(err) == climate.CodeConflict && w.Type == climate.LeaseBestEffort && start.Before(v.ReclaimFrom) && v.ReclaimFrom.Before(w.RetryUntil) {
		if _, herr := m.planLease(windowed(w, v.ReclaimFrom, now), nil, v, 0, nil); herr == nil {
			return v.ReclaimFrom, nil
		}
	}
	return start, err
}

// countRetries counts one more re-plan that did not fit for each lease in ids, and gives
// up those that reached their max_retries: they end as when their retry_until passes.
// It returns how many gave up.
func (m *Manager) countRetries(ctx context.Context, ids []string, now time.Time) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	gaveUp := 0
	err := m.store.Update(ctx, func(tx climate.Tx) error {
		gaveUp = 0
		for _, id := range ids {
			l, err := tx.GetLease(ctx, id)
			if climate.ErrorCode(err) == climate.CodeNotFound {
				continue
			}
			if err != nil {
				return err
			}
			if l.Status != l.Type.WaitingStatus() {
				continue // booked or ended meanwhile
			}
			l.Retries++
			if l.Retries < l.MaxRetries {
				if err := tx.UpdateLease(ctx, l); err != nil {
					return err
				}
				continue
			}
			before := climate.LeaseAuditSummary(l)
			giveUp(l, now)
			gaveUp++
			if err := tx.UpdateLease(ctx, l); err != nil {
				return err
			}
			why := fmt.Errorf("gave up after %d re-plans that did not fit (max_retries)", l.Retries)
			if err := m.audit(ctx, tx, climate.BySystem(why.Error()), auditLeaseGaveUp, climate.LeaseAuditTarget(l), before, climate.LeaseAuditSummary(l)); err != nil {
				return err
			}
			if err := notify.Add(ctx, tx, climate.NotifyEvent(climate.EventRetryDeadline), l, why, now); err != nil {
				return err
			}
			m.cfg.Log.Info("a waiting lease gave up", "lease", l.ID, "retries", l.Retries)
		}
		return nil
	})
	return gaveUp, err
}

// giveUp ends waiting lease l as its retry_deadline event does: the event done, the
// reservations deleted, the lease in its type's end status.
func giveUp(l *climate.Lease, now time.Time) {
	for i := range l.Events {
		if ev := &l.Events[i]; ev.Type == climate.EventRetryDeadline && ev.Status == climate.EventUndone {
			ev.Status, ev.Time, ev.UpdatedAt = climate.EventDone, now, now
		}
	}
	for i := range l.Reservations {
		l.Reservations[i].Status, l.Reservations[i].UpdatedAt = climate.ReservationDeleted, now
	}
	l.Status, l.UpdatedAt = l.Type.GaveUpStatus(), now
}

// waitingQueue returns the waiting leases, highest priority first, then first come. It
// keeps them in memory and follows the outbox: every change of a lease writes a
// notification in its transaction (on any replica), so the leases notified since the last
// pass are the only ones to read again. The first pass, or one after a burst of changes,
// reads them all. The caller holds waitMu.
func (m *Manager) waitingQueue(ctx context.Context) ([]climate.Lease, error) {
	statuses := []climate.LeaseStatus{climate.LeaseWaiting, climate.LeaseInProgress}
	err := m.store.View(ctx, func(tx climate.Tx) error {
		if m.queue != nil {
			changed := map[string]bool{}
			for after := m.queueSeq; ; {
				ns, err := tx.Notifications(ctx, after, 1000)
				if err != nil {
					return err
				}
				for _, n := range ns {
					changed[n.LeaseID], after = true, n.Seq
				}
				m.queueSeq = after
				if len(ns) < 1000 || len(changed) > maxQueueRefresh {
					break
				}
			}
			if len(changed) <= maxQueueRefresh {
				for id := range changed {
					l, err := tx.GetLease(ctx, id)
					switch {
					case climate.ErrorCode(err) == climate.CodeNotFound:
						delete(m.queue, id)
					case err != nil:
						return err
					case slices.Contains(statuses, l.Status):
						m.queue[id] = *l
					default:
						delete(m.queue, id)
					}
				}
				return nil
			}
		}
		seq, err := tx.LastNotificationSeq(ctx) // with the list: one snapshot
		if err != nil {
			return err
		}
		all, err := tx.ListLeases(ctx, climate.LeaseFilter{Statuses: statuses})
		if err != nil {
			return err
		}
		m.queue, m.queueSeq = make(map[string]climate.Lease, len(all)), seq
		for _, l := range all {
			m.queue[l.ID] = l
		}
		return nil
	})
	if err != nil {
		m.queue = nil // read them all next time
		return nil, err
	}
	waiting := make([]climate.Lease, 0, len(m.queue))
	for _, l := range m.queue {
		waiting = append(waiting, l)
	}
	slices.SortFunc(waiting, func(a, b climate.Lease) int {
		if a.Priority != b.Priority {
			return b.Priority - a.Priority
		}
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return waiting, nil
}

// maxQueueRefresh bounds the leases re-read one by one; more changed: read them all.
const maxQueueRefresh = 500

// windowed returns a copy of waiting lease w as it would be booked from start (its asked
// start, or later), for its length, PENDING.
func windowed(w *climate.Lease, start, now time.Time) *climate.Lease {
	l := cloneLease(w)
	l.Start = start
	l.End = l.Start.Add(w.End.Sub(w.Start))
	l.Status, l.UpdatedAt = climate.LeasePending, now
	return l
}

// requestKey identifies what a waiting lease asks for, as planned now: its reservations
// (by their types' wire keys) and the window it would get.
func requestKey(l *climate.Lease, now time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s/%d/%d", l.Type, climate.Later(l.Start, now).UnixMicro(), l.End.Sub(l.Start).Microseconds())
	for i := range l.Reservations {
		r := &l.Reservations[i]
		f := builtin.Fields(r)
		for _, id := range []string{"flavor_id", "server_group_id", "aggregate_id"} {
			delete(f, id) // the reservation's own ids: not what it asks for
		}
		fields, _ := json.Marshal(f) // map keys are sorted
		b.WriteString("|" + r.ResourceType + string(fields))
	}
	return b.String()
}

// bookWaiting books w from start (its asked start or now, or a best-effort hunt's) if it
// fits; false when it does not (it keeps waiting) or it is no longer waiting (another
// replica booked it, or it gave up).
func (m *Manager) bookWaiting(ctx context.Context, w *climate.Lease, start time.Time) (bool, error) {
	now := m.now()
	if !w.RetryUntil.After(now) {
		return false, nil // its deadline event ends it
	}
	l := windowed(w, climate.Later(start, now), now)
	if err := m.setEvents(l, nil, nil, now); err != nil {
		return false, err
	}
	err := m.planAndCommit(ctx, l, nil, planOptions{}, func(tx climate.Tx) error {
		cur, err := tx.GetLease(ctx, l.ID)
		if err != nil {
			return err
		}
		if cur.Status != w.Status {
			return errNoLongerWaiting
		}
		if err := tx.UpdateLease(ctx, l); err != nil {
			return err
		}
		if err := m.account(ctx, tx, nil, l, now); err != nil {
			return err // over a limit now: it waits on
		}
		if err := m.audit(ctx, tx, climate.BySystem("a waiting lease fits: booked"), auditLeaseBooked, climate.LeaseAuditTarget(l), climate.LeaseAuditSummary(cur), climate.LeaseAuditSummary(l)); err != nil {
			return err
		}
		return notify.Add(ctx, tx, climate.NotifyLeaseUpdate, l, nil, now)
	})
	switch {
	case err == nil:
		m.cfg.Log.Info("a waiting lease fits", "lease", l.ID, "type", l.Type, "start", l.Start, "end", l.End)
		return true, nil
	case err == errNoLongerWaiting, climate.ErrorCode(err) == climate.CodeConflict, climate.ErrorCode(err) == climate.CodeNotFound,
		climate.ErrorCode(err) == climate.CodeForbidden:
		return false, nil
	}
	return false, err
}

// errNoLongerWaiting stops booking a lease that changed status meanwhile.
var errNoLongerWaiting = climate.Errorf(climate.CodeConflict, "the lease is no longer waiting")

// freedLog remembers the spans of allocations removed from the index (deleted, moved or
// shortened), so that a waiting lease refused over a fixed window is planned again only
// when something was freed in that window. A rebuilt index (inventory changed, or a log
// gap) may hide any change: it counts as freeing everything.
type freedLog struct {
	mu    sync.Mutex
	seq   int64       // spans recorded so far
	all   int64       // seq of the last "everything may have changed"
	spans []freedSpan // the newest, at most maxFreedSpans
}

type freedSpan struct {
	seq        int64
	start, end time.Time
}

const maxFreedSpans = 4096

func (f *freedLog) note(removed []climate.Allocation) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range removed {
		f.seq++
		f.spans = append(f.spans, freedSpan{f.seq, a.Start, a.End})
	}
	if over := len(f.spans) - maxFreedSpans; over > 0 {
		f.all = f.spans[over-1].seq // forgotten spans: as if everything was freed
		f.spans = slices.Delete(f.spans, 0, over)
	}
}

func (f *freedLog) everything() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	f.all = f.seq
	f.spans = f.spans[:0]
}

func (f *freedLog) mark() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seq
}

// since reports whether something overlapping [s, e) may have been freed after mark.
func (f *freedLog) since(mark int64, s, e time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.all > mark {
		return true
	}
	for i := len(f.spans) - 1; i >= 0 && f.spans[i].seq > mark; i-- {
		if climate.Overlaps(f.spans[i].start, f.spans[i].end, s, e) {
			return true
		}
	}
	return false
}

// removedOf returns the allocations changes removed.
func removedOf(changes []climate.AllocationChange) []climate.Allocation {
	var out []climate.Allocation
	for _, c := range changes {
		if c.Removed {
			out = append(out, c.Allocation)
		}
	}
	return out
}
