package manager

import (
	"context"
	"time"

	"climate"
	"climate/plan"
)

// availability is the planner's view: the availability index and the known property names,
// as of the store's inventory and allocation revisions.
type availability struct {
	index      *plan.Index
	properties map[string]climate.ResourceProperty
}

// historyKept is how far back a rebuilt index keeps allocations: windows being planned
// start no earlier than now, except an active lease's own window, which the index ignores.
const historyKept = 24 * time.Hour

// view runs fn with a current availability view under the read lock. The view is reused
// while the store's revisions match it, so a request costs one small read transaction;
// after another process (or a host change) moved the store on, it is rebuilt from one
// snapshot.
func (m *Manager) view(ctx context.Context, fn func(*availability) error) error {
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
	if a := m.avail; a != nil && a.index.InventoryRevision == invRev && a.index.AllocationRevision == allocRev {
		defer m.mu.RUnlock()
		return fn(a)
	}
	m.mu.RUnlock()
	if err := m.rebuild(ctx, invRev, allocRev); err != nil {
		return err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	return fn(m.avail)
}

// rebuild replaces the view unless another request already brought it to (at least) the
// given revisions. It holds commitMu, so only one rebuild runs at a time and no commit of
// this manager lands between the snapshot and its publication (which would leave the new
// view stale at once).
func (m *Manager) rebuild(ctx context.Context, invRev, allocRev int64) error {
	m.commitMu.Lock()
	defer m.commitMu.Unlock()
	m.mu.RLock()
	cur := m.avail
	m.mu.RUnlock()
	if cur != nil && cur.index.InventoryRevision >= invRev && cur.index.AllocationRevision >= allocRev {
		return nil
	}
	a, err := m.loadAvailability(ctx)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.avail = a
	m.mu.Unlock()
	return nil
}

// loadAvailability builds a view from one consistent snapshot of the store.
func (m *Manager) loadAvailability(ctx context.Context) (*availability, error) {
	var a *availability
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
		props, err := tx.ListResourceProperties(ctx, climate.ResourceTypeHost)
		if err != nil {
			return err
		}
		allocs, err := tx.ListAllocations(ctx, climate.AllocationFilter{From: m.now().Add(-historyKept)})
		if err != nil {
			return err
		}
		a = &availability{index: plan.NewIndex(hosts, allocs), properties: make(map[string]climate.ResourceProperty, len(props))}
		a.index.InventoryRevision, a.index.AllocationRevision = invRev, allocRev
		for _, p := range props {
			a.properties[p.Name] = p
		}
		return nil
	})
	return a, err
}

// commitChange runs write in a write transaction and then applies the allocations it
// removed and added to the index, if the index was current when the transaction began;
// otherwise the next view rebuilds it. commitMu keeps commits and their index updates in
// the same order (the store has one writer anyway), so concurrent requests never leave
// the index behind.
func (m *Manager) commitChange(ctx context.Context, write func(climate.Tx) error, removed, added func() []climate.Allocation) error {
	m.commitMu.Lock()
	defer m.commitMu.Unlock()
	var before, after int64
	err := m.store.Update(ctx, func(tx climate.Tx) error {
		var err error
		if before, err = tx.AllocationRevision(ctx); err != nil {
			return err
		}
		if err := write(tx); err != nil {
			return err
		}
		after, err = tx.AllocationRevision(ctx)
		return err
	})
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if a := m.avail; a != nil && a.index.AllocationRevision == before && after != before {
		a.index.Apply(removed(), added())
		a.index.AllocationRevision = after
	}
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
