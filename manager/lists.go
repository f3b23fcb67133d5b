package manager

import (
	"context"
	"slices"
	"strings"

	"climate"
	"climate/usage"
)

// listBatch is how many leases, or hosts with their allocations, a list reads per
// transaction: enough to amortize the transaction, few enough that a list's memory stays
// small whatever the number of leases.
const listBatch = 500

func markerNotFound(kind, id string) error {
	return climate.Errorf(climate.CodeInvalid, "marker %s not found: it must be the id of a %s in the list (the last of the previous page)", id, kind)
}

// ListLeases passes the leases the caller may see that match q to fn, batch by batch
// (climate.LeaseService). Admins see every project's leases, others their project's only.
// Each batch is its own read transaction, so no transaction stays open while a client
// reads: a lease created or deleted meanwhile may or may not be listed, but every lease
// that exists throughout is listed once.
func (m *Manager) ListLeases(ctx context.Context, who climate.Identity, q climate.LeaseQuery, fn func([]climate.Lease) error) (more bool, err error) {
	if err := m.allow(who, "blazar:leases:get", who.OwnTarget()); err != nil {
		return false, err
	}
	f := climate.LeaseFilter{ProjectID: q.ProjectID, Name: q.Name, Statuses: q.Statuses}
	if !who.IsAdmin() {
		if q.ProjectID != "" && q.ProjectID != who.ProjectID {
			return false, climate.Errorf(climate.CodeForbidden, "Only admins may list the leases of another project")
		}
		f.ProjectID = who.ProjectID
	}
	for _, st := range q.Statuses {
		if !slices.Contains(climate.LeaseStatuses, st) {
			names := make([]string, len(climate.LeaseStatuses))
			for i, s := range climate.LeaseStatuses {
				names[i] = string(s)
			}
			return false, invalid("Invalid lease status %q: expected one of %s", st, strings.Join(names, ", "))
		}
	}
	if q.Limit < 0 {
		return false, invalid("Invalid limit %d: expected a positive number", q.Limit)
	}
	if q.Marker != "" {
		err := m.store.View(ctx, func(tx climate.Tx) error {
			l, err := tx.GetLease(ctx, q.Marker)
			// Another project's lease is as unknown as a missing one.
			if climate.ErrorCode(err) == climate.CodeNotFound || (err == nil && f.ProjectID != "" && l.ProjectID != f.ProjectID) {
				return markerNotFound("lease", q.Marker)
			}
			if err == nil {
				f.After = &climate.Lease{ID: l.ID, CreatedAt: l.CreatedAt}
			}
			return err
		})
		if err != nil {
			return false, err
		}
	}
	return pages(q.Limit, func(n int) ([]climate.Lease, error) {
		f.Limit = n
		var batch []climate.Lease
		err := m.store.View(ctx, func(tx climate.Tx) error {
			var err error
			if batch, err = tx.ListLeases(ctx, f); err != nil {
				return err
			}
			return usage.FillCosts(ctx, tx, batch)
		})
		if len(batch) > 0 {
			last := batch[len(batch)-1]
			f.After = &climate.Lease{ID: last.ID, CreatedAt: last.CreatedAt}
		}
		return batch, err
	}, fn)
}

// pages passes to fn, batch by batch, what read returns, at most limit items (0: all),
// and reports whether more follow the limit. read(n) returns the next n items at most
// (fewer: the last batch) and moves its own position past them; asking one more than
// the limit leaves tells whether more follow.
func pages[T any](limit int, read func(n int) ([]T, error), fn func([]T) error) (more bool, err error) {
	left := limit
	for {
		n := listBatch
		if limit > 0 && left <= listBatch {
			n = left + 1
		}
		batch, err := read(n)
		if err != nil {
			return false, err
		}
		more := limit > 0 && len(batch) > left
		if more {
			batch = batch[:left]
		}
		if len(batch) > 0 {
			if err := fn(batch); err != nil {
				return false, err
			}
		}
		if more || len(batch) < n {
			return more, nil
		}
		left -= len(batch)
	}
}

// HostAllocations passes, for every host in list order (or q.HostID only), the
// reservations holding it to fn, batch by batch (admins only, by Blazar's default). A
// caller refused by blazar:oshosts:get_allocations but allowed climate:oshosts:get_busy
// (project readers and members, by default) gets the same listing with other projects'
// reservations redacted: their reservation and lease ids are empty, only the busy
// window is left. The host ids are read once; each batch's allocations are read in
// their own transaction.
func (m *Manager) HostAllocations(ctx context.Context, who climate.Identity, q climate.AllocationQuery, fn func([]climate.HostAllocation) error) (more bool, err error) {
	var own map[string]bool // redacted listing: the caller's project's lease ids
	if err := m.allow(who, "blazar:oshosts:get_allocations", who.OwnTarget()); err != nil {
		if m.allow(who, "climate:oshosts:get_busy", who.OwnTarget()) != nil {
			return false, err
		}
		own = map[string]bool{}
	}
	if !q.From.IsZero() && !q.To.IsZero() && !q.To.After(q.From) {
		return false, invalid("The end of the window (to) must be later than its start (from)")
	}
	if q.Limit < 0 {
		return false, invalid("Invalid limit %d: expected a positive number", q.Limit)
	}
	f := climate.AllocationFilter{LeaseID: q.LeaseID, ReservationID: q.ReservationID, From: q.From, To: q.To}
	if f.From.IsZero() && q.LeaseID == "" && q.ReservationID == "" {
		f.From = m.now()
	}
	var ids []string
	err = m.store.View(ctx, func(tx climate.Tx) error {
		if q.HostID != "" {
			h, err := tx.GetHost(ctx, q.HostID)
			if err != nil {
				return err
			}
			ids = []string{h.ID}
			return nil
		}
		hosts, err := tx.ListHosts(ctx)
		for _, h := range hosts {
			ids = append(ids, h.ID)
		}
		return err
	})
	if err != nil {
		return false, err
	}
	if own != nil && who.ProjectID != "" {
		err = m.store.View(ctx, func(tx climate.Tx) error {
			leases, err := tx.ListLeases(ctx, climate.LeaseFilter{ProjectID: who.ProjectID})
			for _, l := range leases {
				own[l.ID] = true
			}
			return err
		})
	}
	if err != nil {
		return false, err
	}
	if q.Marker != "" && q.HostID == "" {
		i := slices.Index(ids, q.Marker)
		if i < 0 {
			return false, markerNotFound("host", q.Marker)
		}
		ids = ids[i+1:]
	}
	if q.Limit > 0 && len(ids) > q.Limit {
		ids, more = ids[:q.Limit], true
	}
	for len(ids) > 0 {
		f.ResourceIDs = ids[:min(listBatch, len(ids))]
		ids = ids[len(f.ResourceIDs):]
		held, err := m.holdsOn(ctx, f)
		if err != nil {
			return false, err
		}
		var allocs []climate.Allocation
		err = m.store.View(ctx, func(tx climate.Tx) error {
			var err error
			allocs, err = allocationsOn(ctx, tx, held, f)
			return err
		})
		if err != nil {
			return false, err
		}
		byHost := make(map[string][]climate.AllocatedReservation, len(f.ResourceIDs))
		for _, a := range allocs {
			ar := climate.AllocatedReservation{ID: a.ReservationID, LeaseID: a.LeaseID, Start: a.Start, End: a.End, Slots: a.Slots}
			if own != nil && !own[a.LeaseID] {
				if q.LeaseID != "" || q.ReservationID != "" {
					continue // which hosts another project's lease holds is not for the caller
				}
				ar.ID, ar.LeaseID = "", "" // another project's: busy, nothing more
			}
			byHost[a.ResourceID] = append(byHost[a.ResourceID], ar)
		}
		batch := make([]climate.HostAllocation, len(f.ResourceIDs))
		for i, id := range f.ResourceIDs {
			batch[i] = climate.HostAllocation{HostID: id, Reservations: byHost[id]}
		}
		if err := fn(batch); err != nil {
			return false, err
		}
	}
	return more, nil
}
