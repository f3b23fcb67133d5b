package manager

import (
	"context"
	"math"
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

// heldOn takes what v holds where f asks (its resources over its window, its excluded
// lease aside), or nil when the index may not hold all of it: no window start, or one
// reaching back past what a rebuilt index keeps (an active lease's update).
func heldOn(v *resource.View, f climate.AllocationFilter, now time.Time) *heldAt {
	if len(f.ResourceIDs) == 0 || f.From.IsZero() || f.From.Before(now.Add(-historyKept)) {
		return nil
	}
	to := f.To
	if to.IsZero() {
		to = time.UnixMicro(math.MaxInt64)
	}
	return &heldAt{revision: v.Index.AllocationRevision, ids: f.ResourceIDs, from: f.From, to: to, skip: f.ExcludeLeaseID,
		holds: v.Holds(f.ResourceIDs, f.From, to, f.ExcludeLeaseID)}
}

// holdsOn is heldOn on the current view, for a transaction about to list f's allocations
// (f.ResourceIDs set); nil on a store whose transactions do not run one at a time
// (climate.CommitStamped), which keeps an index by resource and locks what it reads.
func (m *Manager) holdsOn(ctx context.Context, f climate.AllocationFilter) (*heldAt, error) {
	if !climate.WritesTakeTurns(m.store) || len(f.ResourceIDs) == 0 || f.From.IsZero() {
		return nil, nil // nothing heldOn would take
	}
	var held *heldAt
	err := m.view(ctx, func(v *resource.View) error {
		held = heldOn(v, f, m.now())
		return nil
	})
	return held, err
}

// allocationsOn returns what tx.ListAllocations(f) does, f.ResourceIDs set. With held
// (holdsOn, taken before the transaction) on a store that has no index by resource
// (climate.SerialLog, SQLite), it asks for the allocations of the leases that held and
// the log since say are on those resources, through the index by lease.
func allocationsOn(ctx context.Context, tx climate.Tx, held *heldAt, f climate.AllocationFilter) ([]climate.Allocation, error) {
	if !held.covers(f) {
		return tx.ListAllocations(ctx, f)
	}
	holds, ok, err := held.asOf(ctx, tx)
	if err != nil {
		return nil, err
	}
	if !ok {
		return tx.ListAllocations(ctx, f)
	}
	f.LeaseIDs = []string{}
	seen := map[string]bool{}
	for _, a := range holds {
		if !seen[a.LeaseID] {
			seen[a.LeaseID] = true
			f.LeaseIDs = append(f.LeaseIDs, a.LeaseID)
		}
	}
	return tx.ListAllocations(ctx, f)
}

// covers reports whether h holds at least what f asks for: its resources, its window, and
// no lease left out that f keeps.
func (h *heldAt) covers(f climate.AllocationFilter) bool {
	if h == nil || f.From.Before(h.from) || h.skip != "" && h.skip != f.ExcludeLeaseID {
		return false
	}
	if to := f.To; to.IsZero() && h.to.UnixMicro() != math.MaxInt64 || !to.IsZero() && to.After(h.to) {
		return false
	}
	ids := make(map[string]bool, len(h.ids))
	for _, id := range h.ids {
		ids[id] = true
	}
	for _, id := range f.ResourceIDs {
		if !ids[id] {
			return false
		}
	}
	return true
}

// asOf returns the allocations on h's resources over its window as tx sees them (as
// plan.Index.Holds gives them). ok is false when it cannot tell: no holds taken, a store
// without a SerialLog, or a log pruned past h's revision; the caller then reads them.
func (h *heldAt) asOf(ctx context.Context, tx climate.Tx) (_ []climate.Allocation, ok bool, _ error) {
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
