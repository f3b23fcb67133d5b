package manager

import (
	"context"
	"slices"
	"time"

	"climate"
	"climate/resource"
)

// heldAt is what a plan's index held on the resources it chose, over the lease's window
// padded by the cleaning time, and the index's allocation revision: with the changes the
// log has after that revision, it is what the commit's re-check would read from the
// allocations (climate.SerialLog), without the store needing an index by resource.
type heldAt struct {
	revision int64
	ids      []string
	from, to time.Time
	skip     string // the lease planned: its own allocations are not in the way
	holds    []climate.Allocation
}

// heldOn takes what v holds on ids for lease l, or nil when the index may not hold all of
// it: a window reaching back past what a rebuilt index keeps (an active lease's update).
func heldOn(v *resource.View, l *climate.Lease, ids []string, cleaning time.Duration, now time.Time) *heldAt {
	from, to := l.Start.Add(-cleaning), l.End.Add(cleaning)
	if len(ids) == 0 || from.Before(now.Add(-historyKept)) {
		return nil
	}
	return &heldAt{revision: v.Index.AllocationRevision, ids: ids, from: from, to: to, skip: l.ID,
		holds: v.Holds(ids, from, to, l.ID)}
}

// now returns the allocations on h's resources over its window as tx sees them (as
// plan.Index.Holds gives them). ok is false when it cannot tell: no holds taken, a store
// without a SerialLog, or a log pruned past h's revision; the caller then reads them.
func (h *heldAt) now(ctx context.Context, tx climate.Tx) (_ []climate.Allocation, ok bool, _ error) {
	lg, serial := tx.(climate.SerialLog)
	if h == nil || !serial {
		return nil, false, nil
	}
	changes, ok, err := lg.AllocationChangesOn(ctx, h.revision, h.ids, h.from, h.to)
	if err != nil || !ok {
		return nil, false, err
	}
	out := append(make([]climate.Allocation, 0, len(h.holds)+len(changes)), h.holds...)
	for _, c := range changes {
		a := c.Allocation
		if a.LeaseID == h.skip {
			continue
		}
		a.ID, a.ReservationID = "", "" // as Holds gives them
		if a.Shared() {
			a.Size, a.Slots = a.Size.Times(a.Slots), 1
		}
		if !c.Removed {
			out = append(out, a)
		} else if i := slices.IndexFunc(out, func(o climate.Allocation) bool { return sameHold(o, a) }); i >= 0 {
			out = slices.Delete(out, i, i+1)
		}
	}
	return out, true, nil
}

// sameHold reports whether a and b hold the same: two equal holds of one lease are
// interchangeable for a re-check.
func sameHold(a, b climate.Allocation) bool {
	return a.LeaseID == b.LeaseID && a.ResourceID == b.ResourceID && a.Start.Equal(b.Start) && a.End.Equal(b.End) &&
		a.Slots == b.Slots && a.Size == b.Size && a.Preemptible == b.Preemptible
}
