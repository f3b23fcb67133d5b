package manager

import (
	"context"
	"time"

	"climate"
	"climate/plan"
	"climate/resource"
)

// historyKept is how far back a rebuilt index keeps allocations: windows being planned
// start no earlier than now, except an active lease's own window, which the index ignores.
const historyKept = 24 * time.Hour

// view runs fn with a current availability view under the read lock. The view is reused
// while the store's revisions match it, so a request costs one small read transaction;
// after another process (or a host change) moved the store on, it is brought up to date
// from one snapshot (see refresh).
func (m *Manager) view(ctx context.Context, fn func(*resource.View) error) error {
	var invRev, allocRev int64
	err := m.store.View(ctx, func(tx climate.Tx) error {
		var err error
		if invRev, err = tx.InventoryRevision(ctx); err != nil {
			return err
		}
		allocRev, err = tx.AllocationRevision(ctx)
		return err
	})
	if err != nil {
		return err
	}
	m.mu.RLock()
	if a := m.avail; a != nil && a.Index.InventoryRevision == invRev && a.Index.AllocationRevision == allocRev {
		defer m.mu.RUnlock()
		return fn(a)
	}
	m.mu.RUnlock()
	if err := m.refresh(ctx, invRev, allocRev); err != nil {
		return err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	return fn(m.avail)
}

// Warm builds the availability index now (a server calls it at start, so the first
// request does not wait for it), and reports how long that took.
func (m *Manager) Warm(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	err := m.view(ctx, func(*resource.View) error { return nil })
	return time.Since(start), err
}

// refresh brings the view to (at least) the given revisions, unless another request already
// did: when only allocations moved, by applying the store's allocation log to the index,
// otherwise (or when the store cannot say what changed) by a rebuild. It holds commitMu, so
// only one refresh runs at a time, no commit of this manager lands between the snapshot and
// its publication (which would leave the view stale at once), and the index's revisions,
// which change only under commitMu, say exactly which changes it lacks.
func (m *Manager) refresh(ctx context.Context, invRev, allocRev int64) error {
	m.commitMu.Lock()
	defer m.commitMu.Unlock()
	m.mu.RLock()
	cur := m.avail
	m.mu.RUnlock()
	if cur != nil && cur.Index.InventoryRevision >= invRev && cur.Index.AllocationRevision >= allocRev {
		return nil
	}
	if cur != nil && cur.Index.InventoryRevision == invRev {
		if done, err := m.catchUp(ctx, cur); err != nil || done {
			return err
		}
	}
	a, err := m.loadAvailability(ctx)
	if err != nil {
		return err
	}
	if cur != nil {
		a.Index.KeepFilters(cur.Index) // the hosts other requests ask for stay spared
	}
	m.mu.Lock()
	m.avail = a
	m.mu.Unlock()
	m.rebuilds.Add(1)
	m.freed.everything() // a rebuilt index may hide what was freed
	return nil
}

// catchUp applies to cur's index the allocation changes after its revision, read in one
// snapshot with the store's revisions, and moves the index to that snapshot. done is false
// when a rebuild is needed instead: the inventory moved, or the store keeps no log or its
// log no longer reaches back to the index's revision. The caller holds commitMu.
func (m *Manager) catchUp(ctx context.Context, cur *resource.View) (done bool, err error) {
	since := cur.Index.AllocationRevision
	var rev int64
	var changes []climate.AllocationChange
	err = m.store.View(ctx, func(tx climate.Tx) error {
		log, ok := tx.(climate.AllocationLog)
		if !ok {
			return nil
		}
		invRev, err := tx.InventoryRevision(ctx)
		if err != nil || invRev != cur.Index.InventoryRevision {
			return err
		}
		if rev, err = tx.AllocationRevision(ctx); err != nil {
			return err
		}
		changes, done, err = log.AllocationChanges(ctx, since)
		return err
	})
	if err != nil || !done || rev < since { // rev < since: not the same database's history
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	applyChanges(cur, changes)
	m.freed.note(removedOf(changes))
	cur.Index.AllocationRevision = rev
	m.catchUps.Add(1)
	return true, nil
}

// applyChanges applies logged changes to x in order. Apply removes before it adds, so a
// run of changes goes in one call only while no removal follows an addition (it may remove
// what was just added).
func applyChanges(x *resource.View, changes []climate.AllocationChange) {
	var removed, added []climate.Allocation
	for _, c := range changes {
		if c.Removed && len(added) > 0 {
			x.Apply(removed, added)
			removed, added = removed[:0], added[:0]
		}
		if c.Removed {
			removed = append(removed, c.Allocation)
		} else {
			added = append(added, c.Allocation)
		}
	}
	x.Apply(removed, added)
}

// loadAvailability builds a view from one consistent snapshot of the store.
func (m *Manager) loadAvailability(ctx context.Context) (*resource.View, error) {
	return m.loadView(ctx, nil)
}

// loadView is loadAvailability; a hook, when set, changes the maintenance windows the
// view holds (and reads more of the snapshot): healing plans on a view with the window it
// writes.
func (m *Manager) loadView(ctx context.Context, hook maintenanceHook) (*resource.View, error) {
	var a *resource.View
	err := m.store.View(ctx, func(tx climate.Tx) error {
		invRev, err := tx.InventoryRevision(ctx)
		if err != nil {
			return err
		}
		allocRev, err := tx.AllocationRevision(ctx)
		if err != nil {
			return err
		}
		hosts, err := tx.ListHosts(ctx)
		if err != nil {
			return err
		}
		fips, err := tx.ListFloatingIPs(ctx)
		if err != nil {
			return err
		}
		props, err := tx.ListResourceProperties(ctx, climate.ResourceTypeHost)
		if err != nil {
			return err
		}
		allocs, err := tx.ListAllocations(ctx, climate.AllocationFilter{From: m.now().Add(-historyKept - m.cfg.Cleaning)})
		if err != nil {
			return err
		}
		if allocs, err = m.withMaintenance(ctx, tx, allocs, hook); err != nil { // hosts in maintenance are busy
			return err
		}
		a = resource.NewView(hosts, fips, props, allocs, plan.WithCleaning(m.cfg.Cleaning))
		a.Index.InventoryRevision, a.Index.AllocationRevision = invRev, allocRev
		return nil
	})
	return a, err
}

// commitChange runs write in a write transaction and then applies what it changed to the
// index, if the index was current when the transaction began; otherwise the next view
// catches up (or rebuilds). commitMu keeps commits and their index updates in the same
// order (the store has one writer anyway), so concurrent requests never leave the index
// behind. The change is read from the store's allocation log in the same transaction when
// there is one; removed and added (the allocations the caller planned from and wrote) are
// the fallback, wrong when another writer changed the lease after the caller read it.
func (m *Manager) commitChange(ctx context.Context, write func(climate.Tx) error, removed, added func() []climate.Allocation) error {
	defer func(start time.Time) { m.cfg.Observer.Committed(time.Since(start)) }(time.Now())
	m.commitMu.Lock()
	defer m.commitMu.Unlock()
	return m.commitLocked(ctx, write, removed, added)
}

// commitLocked is commitChange for a caller that holds commitMu.
func (m *Manager) commitLocked(ctx context.Context, write func(climate.Tx) error, removed, added func() []climate.Allocation) error {
	// Only holders of commitMu replace the view or move its revision: both stay put here.
	m.mu.RLock()
	a := m.avail
	m.mu.RUnlock()
	var before, after int64
	var changes []climate.AllocationChange
	logged := false
	err := m.store.Update(ctx, func(tx climate.Tx) error {
		var err error
		if before, err = tx.AllocationRevision(ctx); err != nil {
			return err
		}
		if err := write(tx); err != nil {
			return err
		}
		if after, err = tx.AllocationRevision(ctx); err != nil {
			return err
		}
		if lg, ok := tx.(climate.AllocationLog); ok && a != nil && a.Index.AllocationRevision == before && after != before {
			changes, logged, err = lg.AllocationChanges(ctx, before) // one writer: all ours
		}
		return err
	})
	if err != nil || a == nil || a.Index.AllocationRevision != before || after == before {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if logged {
		applyChanges(a, changes)
		m.freed.note(removedOf(changes))
	} else {
		a.Apply(removed(), added())
		m.freed.note(removed())
	}
	a.Index.AllocationRevision = after
	return nil
}

// allocationsOf lists a lease's allocations.
func allocationsOf(l *climate.Lease) []climate.Allocation {
	if l == nil {
		return nil
	}
	var out []climate.Allocation
	for _, r := range l.Reservations {
		out = append(out, r.Allocations...)
	}
	return out
}
