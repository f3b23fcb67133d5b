package manager

import (
	"context"
	"slices"
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
	if len(l.Reservations) == 0 {
		return nil, invalid("start_date \"earliest\" needs at least one reservation")
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

// placeEarliest sets l's window to the earliest one in which all its reservations fit,
// on the same view they are then planned on.
func (m *Manager) placeEarliest(l *climate.Lease, a *resource.View, s *slotSearch) error {
	slots, err := m.windows(l, a, s.after, s.deadline, s.duration, 1)
	if err != nil {
		return err
	}
	if len(slots) == 0 {
		return climate.Errorf(climate.CodeConflict, "Not enough resources available: no window of %s in which the lease's reservations fit between %s and %s",
			s.duration, s.after.Format(time.RFC3339), s.deadline.Format(time.RFC3339))
	}
	l.Start, l.End = slots[0].Start, slots[0].End
	return m.setEvents(l, nil, nil, s.now)
}

// maxCandidateStarts bounds how many starts a search of a mixed lease tries.
const maxCandidateStarts = 2000

// windows returns up to limit windows of length d in [after, deadline), earliest first,
// in which every reservation of l fits. A lease of one reservation whose type can
// search (resource.Searcher: hosts) is answered by its sweep; any other is planned
// whole at each candidate start: after, then each instant something becomes free (only
// then can what did not fit start to fit). A lease that does not fit even once every
// booking has ended never will: that is checked first, with one plan.
func (m *Manager) windows(l *climate.Lease, v *resource.View, after, deadline time.Time, d time.Duration, limit int) ([]climate.Slot, error) {
	if len(l.Reservations) == 1 {
		t, err := m.cfg.Types.Get(l.Reservations[0].ResourceType)
		if err != nil {
			return nil, err
		}
		if s, ok := t.(resource.Searcher); ok {
			return s.Earliest(v, &l.Reservations[0], after, deadline, d, limit)
		}
	}
	ends := append(v.Index.Ends(after, endOfTime), v.FloatingIPs.Ends(after, endOfTime)...)
	slices.SortFunc(ends, time.Time.Compare)
	ends = slices.CompactFunc(ends, time.Time.Equal)
	fits := func(t time.Time) (bool, error) {
		l.Start, l.End = t, t.Add(d)
		_, err := m.planLease(l, nil, v, 0, nil)
		if climate.ErrorCode(err) == climate.CodeConflict {
			return false, nil
		}
		return err == nil, err
	}
	free := after // from when nothing is booked
	if len(ends) > 0 {
		free = ends[len(ends)-1]
	}
	if ok, err := fits(free); !ok {
		return nil, err // too big for the inventory, whenever
	}
	last := deadline.Add(-d)
	starts := append([]time.Time{after}, ends...)
	var out []climate.Slot
	for i, t := range starts {
		if t.After(last) || len(out) == limit {
			break
		}
		if i == maxCandidateStarts {
			if len(out) == 0 {
				return nil, climate.Errorf(climate.CodeConflict, "Not enough resources available: no window among the first %d instants at which resources free up (up to %s); give a later start to search from or a nearer deadline",
					maxCandidateStarts, t.Format(time.RFC3339))
			}
			break
		}
		ok, err := fits(t)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, climate.Slot{Start: t, End: t.Add(d)})
		}
	}
	return out, nil
}

// endOfTime is later than any booking.
var endOfTime = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// EarliestSlots finds the earliest windows in which q.Count matching hosts are free. Any
// project member may ask: the answer holds counts and times, not whose leases they are.
func (m *Manager) EarliestSlots(ctx context.Context, who climate.Identity, q climate.SlotQuery) ([]climate.Slot, error) {
	if err := m.allow(who, "climate:availability:get", who.OwnTarget()); err != nil {
		return nil, err
	}
	now := m.now()
	if q.Count < 0 {
		return nil, invalid("count must not be negative")
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
	l := &climate.Lease{ID: climate.NewID()}
	if q.Count > 0 {
		hp, rp := q.HypervisorProperties, q.ResourceProperties
		l.Reservations = append(l.Reservations, climate.Reservation{ResourceType: climate.ResourceTypeHost, Min: q.Count, Max: q.Count,
			HypervisorProperties: hp, ResourceProperties: rp})
	}
	for _, rr := range q.Reservations {
		t, err := m.cfg.Types.Get(rr.ResourceType)
		if err != nil {
			return nil, err
		}
		r, err := t.New(ctx, rr)
		if err != nil {
			return nil, err
		}
		r.ResourceType = t.Name()
		l.Reservations = append(l.Reservations, r)
	}
	if len(l.Reservations) == 0 {
		return nil, invalid("nothing to search for: give count (hosts), slots or floatingips")
	}
	var out []climate.Slot
	err := m.view(ctx, func(a *resource.View) error {
		var err error
		out, err = m.windows(l, a, q.After, q.Deadline, q.Duration, q.Limit)
		return err
	})
	return out, err
}

// maxBuckets bounds a timeline's size.
const maxBuckets = 2000

// Timeline counts matching hosts free in each bucket of q's range.
func (m *Manager) Timeline(ctx context.Context, who climate.Identity, q climate.TimelineQuery) (*climate.Timeline, error) {
	if err := m.allow(who, "climate:availability:get", who.OwnTarget()); err != nil {
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
	if s := q.SlotSize; s != nil && (s.VCPUs <= 0 || s.MemoryMB <= 0 || s.DiskGB < 0) {
		return nil, invalid("A slot's vcpus and memory_mb must be at least 1 and its disk_gb at least 0")
	}
	out := &climate.Timeline{}
	err := m.view(ctx, func(a *resource.View) error {
		f, err := host.Queries(a.Properties, [2]string{"hypervisor_properties", q.HypervisorProperties}, [2]string{"resource_properties", q.ResourceProperties})
		if err != nil {
			return err
		}
		buckets, matching := a.Index.Timeline(host.Matcher(f), f.String(), q.From, q.To, q.Step)
		out.Matching = matching
		var slots, fips []int
		if q.SlotSize != nil {
			slots = a.Index.SlotTimeline(*q.SlotSize, host.Matcher(f), f.String(), q.From, q.To, q.Step)
		}
		if q.NetworkID != "" {
			net := q.NetworkID
			free, _ := a.FloatingIPs.Timeline(func(h *climate.Host) bool { return h.Extra[resource.NetworkProperty] == net }, "network "+net, q.From, q.To, q.Step)
			for _, b := range free {
				fips = append(fips, b.Free)
			}
		}
		for i, b := range buckets {
			s := climate.Slot{Start: b.Start, End: b.End, Free: b.Free}
			if slots != nil {
				s.FreeSlots = &slots[i]
			}
			if fips != nil {
				s.FreeFloatingIPs = &fips[i]
			}
			out.Buckets = append(out.Buckets, s)
		}
		return nil
	})
	return out, err
}
