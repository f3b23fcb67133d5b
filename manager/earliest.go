package manager

import (
	"context"
	"time"

	"climate"
	"climate/plan"
	"climate/resource"
	"climate/resource/host"
)

// defaultSearchHorizon bounds an earliest-slot search without a deadline.
const defaultSearchHorizon = 365 * 24 * time.Hour

// maxSlots bounds how many windows one search returns.
const maxSlots = 20

// slotSearch is a lease request's start_date "earliest": the lease lasts duration and
// must end by deadline.
type slotSearch struct {
	duration        time.Duration
	after, deadline time.Time
	beforeEnd       *time.Time
	now             time.Time
}

func newSlotSearch(req climate.LeaseRequest, l *climate.Lease, now time.Time) (*slotSearch, error) {
	if req.Duration <= 0 {
		return nil, invalid("start_date \"earliest\" needs a positive duration (e.g. \"duration\": \"4h\")")
	}
	if req.End.IsSet() {
		return nil, invalid("start_date \"earliest\" takes a duration, not an end_date")
	}
	if req.BeforeEnd != nil {
		return nil, invalid("start_date \"earliest\" cannot be combined with before_end_date")
	}
	hosts := 0
	for _, r := range l.Reservations {
		if r.ResourceType == climate.ResourceTypeHost {
			hosts++
		}
	}
	if hosts != 1 || len(l.Reservations) != 1 {
		return nil, invalid("start_date \"earliest\" needs exactly one physical:host reservation")
	}
	s := &slotSearch{duration: req.Duration, after: now, deadline: req.Deadline, now: now}
	if s.deadline.IsZero() {
		s.deadline = now.Add(defaultSearchHorizon)
	}
	if s.deadline.Before(now.Add(req.Duration)) {
		return nil, invalid("deadline %s leaves no room for a lease of %s starting now", s.deadline.Format(time.RFC3339), req.Duration)
	}
	return s, nil
}

// placeEarliest sets l's window to the earliest one in which its reservation's minimum
// number of hosts is free, on the same view the hosts are then planned on.
func (m *Manager) placeEarliest(l *climate.Lease, a *resource.View, s *slotSearch) error {
	r := &l.Reservations[0]
	q, err := host.Filter(r, a.Properties)
	if err != nil {
		return err
	}
	slots := a.Index.EarliestSlots(plan.SlotRequest{
		Count: r.Min, Duration: s.duration, After: s.after, Deadline: s.deadline,
		Match: host.Matcher(q), FilterKey: q.String(), Limit: 1,
	})
	if len(slots) == 0 {
		return climate.Errorf(climate.CodeConflict, "Not enough hosts available: no window of %s with %d matching hosts free between %s and %s",
			s.duration, r.Min, s.after.Format(time.RFC3339), s.deadline.Format(time.RFC3339))
	}
	l.Start, l.End = slots[0].Start, slots[0].End
	return m.setEvents(l, nil, nil, s.now)
}

// EarliestSlots finds the earliest windows in which q.Count matching hosts are free. Any
// project member may ask: the answer holds counts and times, not whose leases they are.
func (m *Manager) EarliestSlots(ctx context.Context, who climate.Identity, q climate.SlotQuery) ([]climate.Slot, error) {
	if err := climate.RequireReader(who, "climate:availability:get"); err != nil {
		return nil, err
	}
	now := m.now()
	if q.Count <= 0 {
		return nil, invalid("count must be at least 1")
	}
	if q.Duration <= 0 {
		return nil, invalid("duration must be positive (e.g. 4h, 90m, 2d)")
	}
	if q.After.IsZero() || q.After.Before(now) {
		q.After = now
	}
	if q.Deadline.IsZero() {
		q.Deadline = q.After.Add(defaultSearchHorizon)
	}
	if q.Limit <= 0 {
		q.Limit = 3
	}
	if q.Limit > maxSlots {
		return nil, invalid("limit must be at most %d", maxSlots)
	}
	if !q.Deadline.After(q.After) {
		return nil, invalid("deadline must be later than after")
	}
	var out []climate.Slot
	err := m.view(ctx, func(a *resource.View) error {
		f, err := host.Queries(a.Properties, [2]string{"hypervisor_properties", q.HypervisorProperties}, [2]string{"resource_properties", q.ResourceProperties})
		if err != nil {
			return err
		}
		for _, s := range a.Index.EarliestSlots(plan.SlotRequest{Count: q.Count, Duration: q.Duration, After: q.After, Deadline: q.Deadline,
			Match: host.Matcher(f), FilterKey: f.String(), Limit: q.Limit}) {
			out = append(out, climate.Slot{Start: s.Start, End: s.End, Free: s.Free})
		}
		return nil
	})
	return out, err
}

// maxBuckets bounds a timeline's size.
const maxBuckets = 2000

// Timeline counts matching hosts free in each bucket of q's range.
func (m *Manager) Timeline(ctx context.Context, who climate.Identity, q climate.TimelineQuery) (*climate.Timeline, error) {
	if err := climate.RequireReader(who, "climate:availability:get"); err != nil {
		return nil, err
	}
	if q.From.IsZero() || q.To.IsZero() {
		return nil, invalid("from and to are required")
	}
	if !q.To.After(q.From) {
		return nil, invalid("to must be later than from")
	}
	if q.Step <= 0 {
		return nil, invalid("step must be positive (e.g. 1h, 1d)")
	}
	if n := plan.Buckets(q.From, q.To, q.Step); n > maxBuckets {
		return nil, invalid("%d buckets requested; at most %d: use a larger step", n, maxBuckets)
	}
	out := &climate.Timeline{}
	err := m.view(ctx, func(a *resource.View) error {
		f, err := host.Queries(a.Properties, [2]string{"hypervisor_properties", q.HypervisorProperties}, [2]string{"resource_properties", q.ResourceProperties})
		if err != nil {
			return err
		}
		buckets, matching := a.Index.Timeline(host.Matcher(f), f.String(), q.From, q.To, q.Step)
		out.Matching = matching
		for _, b := range buckets {
			out.Buckets = append(out.Buckets, climate.Slot{Start: b.Start, End: b.End, Free: b.Free})
		}
		return nil
	})
	return out, err
}
