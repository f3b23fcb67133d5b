package manager

import (
	"context"
	"slices"
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
	invRev, allocRev, err := m.revisions(ctx)
	if err != nil {
		return err
	}
	m.mu.RLock()
	if a := m.avail; a != nil && a.Index.InventoryRevision == invRev && a.Index.AllocationRevision == allocRev {
		defer m.mu.RUnlock()
		m.currentAt.Store(time.Now().UnixNano())
		return fn(a)
	}
	m.mu.RUnlock()
	if err := m.refresh(ctx, invRev, allocRev); err != nil {
		return err
	}
	m.currentAt.Store(time.Now().UnixNano())
	m.mu.RLock()
	defer m.mu.RUnlock()
	return fn(m.avail)
}

// KeepFresh checks the index against the store every period in which nothing else did
// (no request, no commit), until ctx ends. An idle replica's index then stays within a
// period of what the other replicas and processes wrote: its next request neither waits
// for a catch-up of all of it (a read the other planners queue behind, see refresh) nor
// for a rebuild once the log was pruned past it, and with a period under trustIndexFor
// it plans without the check's round trip (planView).
func (m *Manager) KeepFresh(ctx context.Context, period time.Duration) {
	ticker := time.NewTicker(period)
	defer ticker.Stop()
	m.keepFresh(ctx, ticker.C, period)
}

func (m *Manager) keepFresh(ctx context.Context, ticks <-chan time.Time, period time.Duration) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticks:
		}
		if time.Since(time.Unix(0, m.currentAt.Load())) < period {
			continue // a request or a commit found it current meanwhile
		}
		if _, err := m.Warm(ctx); err != nil && ctx.Err() == nil {
			m.cfg.Log.Debug("checking the availability index", "err", err) // the next request says so
		}
	}
}

// trustIndexFor is how long after the index was last known current a plan's first
// attempt uses it without a check: its own commits catch it up (commitGated).
// Under load every commit renews it, and the check's round trip is saved; an idle
// manager checks first, as other replicas may have written meanwhile.
const trustIndexFor = time.Second

// planView is view for a plan that its commit re-checks under the chosen resources'
// locks (the inventory revision, and their allocations): when trust is set, it plans on
// the index as it is while it was known current within trustIndexFor, and reports so.
// A plan it got wrong (another replica's commit since) fails the re-check and is
// planned again on a checked view; so must a refusal, which the caller does not answer
// from a trusted view.
func (m *Manager) planView(ctx context.Context, trust bool, fn func(*resource.View) error) (trusted bool, err error) {
	if trust && time.Since(time.Unix(0, m.currentAt.Load())) < trustIndexFor {
		m.mu.RLock()
		if a := m.avail; a != nil {
			defer m.mu.RUnlock()
			return true, fn(a)
		}
		m.mu.RUnlock()
	}
	return false, m.view(ctx, fn)
}

// revisions reads the store's inventory and allocation revisions, in one statement when
// the store can (RevisionReader). Such a store's statement also brings the allocation
// changes after the index's revision, which are applied at once: an index a few commits
// behind (on PostgreSQL, after every commit of this manager's own, whose revisions the
// store stamps at commit) is caught up in the same round trip.
func (m *Manager) revisions(ctx context.Context) (inventory, allocation int64, err error) {
	r, ok := m.store.(climate.RevisionReader)
	if !ok {
		err = m.store.View(ctx, func(tx climate.Tx) error {
			var err error
			if inventory, err = tx.InventoryRevision(ctx); err != nil {
				return err
			}
			allocation, err = tx.AllocationRevision(ctx)
			return err
		})
		return inventory, allocation, err
	}
	cur, since, invRev := m.indexAt()
	if cur == nil {
		return r.Revisions(ctx)
	}
	read := m.readsSent.Add(1) // a read too, for the commits that read nothing (awaitRead)
	inventory, allocation, changes, done, err := r.ChangesSince(ctx, since)
	if err != nil || !done || inventory != invRev {
		return inventory, allocation, err // refresh's to bring up to date
	}
	if allocation > since {
		m.caughtUp(cur, changes, allocation)
	}
	m.readApplied(read) // the index is current as of the read
	return inventory, allocation, nil
}

// indexAt returns the current view (nil before the first build) and its index's
// allocation and inventory revisions.
func (m *Manager) indexAt() (cur *resource.View, allocation, inventory int64) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if cur = m.avail; cur != nil {
		allocation, inventory = cur.Index.AllocationRevision, cur.Index.InventoryRevision
	}
	return cur, allocation, inventory
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
// otherwise (or when the store cannot say what changed) by a rebuild. refreshMu lets one
// refresh run at a time. Commits may land meanwhile: each index update says which
// revisions it covers (see advance), so none is applied twice or skipped, and a view left
// behind is caught up by the next request.
func (m *Manager) refresh(ctx context.Context, invRev, allocRev int64) error {
	m.refreshMu.Lock()
	defer m.refreshMu.Unlock()
	m.mu.RLock()
	cur := m.avail
	current := cur != nil && cur.Index.InventoryRevision >= invRev && cur.Index.AllocationRevision >= allocRev
	sameInventory := cur != nil && cur.Index.InventoryRevision == invRev
	m.mu.RUnlock()
	if current {
		return nil
	}
	if sameInventory {
		if done, err := m.catchUp(ctx, cur); err != nil || done {
			return err
		}
	}
	a, err := m.loadAvailability(ctx)
	if err != nil {
		return err
	}
	m.mu.Lock()
	if cur != nil {
		a.Index.KeepFilters(cur.Index) // the hosts other requests ask for stay spared
	}
	m.avail = a
	m.dropPendingBefore(a.Index.AllocationRevision)
	m.mu.Unlock()
	m.rebuilds.Add(1)
	m.cfg.Observer.Refreshed(true)
	m.freed.everything() // a rebuilt index may hide what was freed
	return nil
}

// catchUp applies to cur's index the allocation changes after its revision, read in one
// snapshot with the store's revisions, and moves the index to that snapshot. done is false
// when a rebuild is needed instead: the inventory moved, or the store keeps no log or its
// log no longer reaches back to the index's revision. The caller holds refreshMu.
func (m *Manager) catchUp(ctx context.Context, cur *resource.View) (done bool, err error) {
	m.mu.RLock()
	since, invRev := cur.Index.AllocationRevision, cur.Index.InventoryRevision
	m.mu.RUnlock()
	var rev int64
	var changes []climate.AllocationChange
	if r, ok := m.store.(climate.RevisionReader); ok {
		var storeInvRev int64
		storeInvRev, rev, changes, done, err = r.ChangesSince(ctx, since)
		done = done && storeInvRev == invRev
	} else {
		err = m.store.View(ctx, func(tx climate.Tx) error {
			log, ok := tx.(climate.AllocationLog)
			if !ok {
				return nil
			}
			storeInvRev, err := tx.InventoryRevision(ctx)
			if err != nil || storeInvRev != invRev {
				return err
			}
			if rev, err = tx.AllocationRevision(ctx); err != nil {
				return err
			}
			changes, done, err = log.AllocationChanges(ctx, since)
			return err
		})
	}
	if err != nil || !done || rev < since { // rev < since: not the same database's history
		return false, err
	}
	m.caughtUp(cur, changes, rev)
	return true, nil
}

// caughtUp applies to cur the changes read from the log up to revision rev; applyLocked
// skips what was applied meanwhile, and a view rebuilt meanwhile is left as it is.
func (m *Manager) caughtUp(cur *resource.View, changes []climate.AllocationChange, rev int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.applyLocked(cur, changes, rev)
	m.catchUps.Add(1)
	m.cfg.Observer.Refreshed(false)
}

// pendingCommit is a commit of this manager that reached the store before an earlier one
// reached the index: it waits in Manager.pending, keyed by the revision it starts from.
type pendingCommit struct {
	after   int64
	changes []climate.AllocationChange
}

// advance brings the index past a commit of this manager that moved the allocation
// revision from before to after with changes. Commits reach here in any order (SQLite
// commits a batch of them at once, PostgreSQL's writers run side by side), so one that
// starts past the index's revision waits in pending until the commits before it are
// applied; one the index already covers (a catch-up read it) is dropped. A commit whose
// predecessor never comes (another process wrote it) waits until a refresh reads the
// log past it. current reports whether the index is then as the store was at the
// commit: at or past after, with the inventory the commit saw.
func (m *Manager) advance(before, after, inventory int64, changes []climate.AllocationChange) (current bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	a := m.avail
	if a == nil {
		return false
	}
	if a.Index.AllocationRevision < after {
		if a.Index.AllocationRevision < before {
			if m.pending == nil {
				m.pending = map[int64]pendingCommit{}
			}
			m.pending[before] = pendingCommit{after, changes}
			return false
		}
		m.applyLocked(a, changes, after)
	}
	return a.Index.InventoryRevision == inventory
}

// applyLocked applies to x the changes it lacks, moves it to revision rev, then applies
// the pending commits that now follow on. The caller holds m.mu for writing.
func (m *Manager) applyLocked(x *resource.View, changes []climate.AllocationChange, rev int64) {
	for {
		have := x.Index.AllocationRevision
		if rev > have {
			i := 0
			for i < len(changes) && changes[i].Revision <= have {
				i++
			}
			applyChanges(x, changes[i:])
			m.freed.note(removedOf(changes[i:]))
			x.Index.AllocationRevision = rev
		}
		if x != m.avail {
			return
		}
		m.dropPendingBefore(x.Index.AllocationRevision)
		next, ok := m.pending[x.Index.AllocationRevision]
		if !ok {
			return
		}
		delete(m.pending, x.Index.AllocationRevision)
		changes, rev = next.changes, next.after
	}
}

// dropPendingBefore forgets the pending commits the index has passed. The caller holds
// m.mu for writing.
func (m *Manager) dropPendingBefore(rev int64) {
	for before := range m.pending {
		if before < rev {
			delete(m.pending, before)
		}
	}
}

// applyChanges applies logged changes to x in order. Apply removes before it adds, so a
// run of changes goes in one call only while no removal follows an addition (it may remove
// what was just added).
func applyChanges(x *resource.View, changes []climate.AllocationChange) {
	var removed []climate.Allocation
	added := make([]climate.Allocation, 0, len(changes)) // a commit's changes are mostly additions
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

// commitChange runs write in a write transaction, then brings the index up to date with
// what it changed (advance). Commits of this manager run side by side: the store orders
// them (SQLite batches them into one transaction, PostgreSQL locks what they touch), and
// the allocation revision each one moved says where its changes go in the index. The
// change is read from the store's allocation log in the same transaction when there is
// one; removed and added (the allocations the caller planned from and wrote) are the
// fallback, wrong when another writer changed the lease after the caller read it, so they
// are used only when nothing else was committed in between. With exact, the caller
// vouches that removed and added are what write changes, whatever was committed before
// (a new lease has no earlier allocations to have changed): then the log is not read,
// which spares the writer a query on every lease creation.
func (m *Manager) commitChange(ctx context.Context, write func(climate.Tx) error, removed, added func() []climate.Allocation, exact bool) error {
	defer func(start time.Time) { m.cfg.Observer.Committed(time.Since(start)) }(time.Now())
	m.commitGate.RLock()
	defer m.commitGate.RUnlock()
	m.committing.Add(1)
	defer m.committing.Add(-1)
	return m.commitGated(ctx, write, removed, added, exact)
}

// commitGated is commitChange for a caller that holds commitGate (shared, or exclusive to
// keep other commits out while it plans).
func (m *Manager) commitGated(ctx context.Context, write func(climate.Tx) error, removed, added func() []climate.Allocation, exact bool) error {
	if !climate.WritesTakeTurns(m.store) { // no revision to read in the transaction
		if cr, ok := m.store.(climate.CommitReader); ok {
			return m.commitThenCatchUp(ctx, cr, write, added)
		}
		return m.store.Update(ctx, write)
	}
	var before, after, inventory int64
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
		if rr, ok := tx.(climate.RevisionsReader); ok {
			after, inventory, err = rr.Revisions(ctx)
		} else if after, err = tx.AllocationRevision(ctx); err == nil {
			inventory, err = tx.InventoryRevision(ctx)
		}
		if err != nil {
			return err
		}
		if lg, ok := tx.(climate.AllocationLog); ok && !exact && after != before && m.indexAtOrBefore(before) {
			changes, logged, err = lg.AllocationChanges(ctx, before)
		}
		return err
	})
	if err != nil || after == before {
		return err
	}
	if !logged {
		m.mu.RLock()
		inOrder := m.avail != nil && m.avail.Index.AllocationRevision == before
		m.mu.RUnlock()
		if !inOrder && !exact { // the next request's refresh reads what changed
			return nil
		}
		changes = asChanges(removed(), added(), after)
	}
	if m.advance(before, after, inventory, changes) {
		m.currentAt.Store(time.Now().UnixNano()) // current as of this commit: planView trusts it
	}
	return nil
}

// commitThenCatchUp commits write and, in the commit's round trip, reads the changes after
// the index's revision, its own included, and applies them: the index is then current as
// of the commit, and the next plan need not check it (planView).
//
// One such read is in flight at a time (catchingUp): a commit sent while another's read
// is under way reads nothing, and the next commit's read brings its changes (or, if none
// comes, the next plan's check). Reads side by side would each bring the same changes,
// from the same index revision, as many times as there are commits in flight: with three
// replicas at 16 clients each change was read about 19 times, a third of PostgreSQL's
// and of the replicas' CPU a creation. Until a read sent after it is applied, what such
// a commit added stays in flight (awaitRead), so that plans meanwhile steer clear of it.
func (m *Manager) commitThenCatchUp(ctx context.Context, cr climate.CommitReader, write func(climate.Tx) error, added func() []climate.Allocation) error {
	cur, _, invRev := m.indexAt()
	if cur == nil {
		return m.store.Update(ctx, write)
	}
	var since, read int64              // read numbers this commit's read, when it has one
	sinceNow := func() (int64, bool) { // what other commits' reads caught up meanwhile is left out
		if read == 0 {
			if !m.catchingUp.CompareAndSwap(false, true) {
				return 0, false
			}
			read = m.readsSent.Add(1)
		}
		m.mu.RLock()
		defer m.mu.RUnlock()
		since = cur.Index.AllocationRevision
		return since, true
	}
	inventory, rev, changes, ok, err := cr.UpdateThenChanges(ctx, sinceNow, write)
	if read != 0 {
		defer m.catchingUp.Store(false) // once applied, so that the next read starts past it
	}
	if err == nil && !ok && read == 0 {
		m.awaitRead(added())
	}
	if err != nil || !ok || inventory != invRev || rev < since {
		return err // the next request's check brings the index up to date
	}
	m.mu.Lock()
	m.applyLocked(cur, changes, rev)
	current := cur == m.avail
	m.mu.Unlock()
	if current {
		m.currentAt.Store(time.Now().UnixNano())
	}
	if read != 0 {
		m.readApplied(read)
	}
	return nil
}

// unreadCommit is a commit that read no changes (commitThenCatchUp): its allocations are
// in flight until a read numbered after readsBefore is applied.
type unreadCommit struct {
	readsBefore int64
	done        func()
}

// awaitRead keeps allocs, a commit's that read no changes, in flight until a read sent
// after it is applied: another commit's, or a plan's check (revisions).
func (m *Manager) awaitRead(allocs []climate.Allocation) {
	c := unreadCommit{readsBefore: m.readsSent.Load(), done: m.inFlight.add(allocs)}
	m.unreadMu.Lock()
	defer m.unreadMu.Unlock()
	m.unread = append(m.unread, c)
}

// readApplied releases the commits that read number read, now applied, covers.
func (m *Manager) readApplied(read int64) {
	m.unreadMu.Lock()
	defer m.unreadMu.Unlock()
	m.unread = slices.DeleteFunc(m.unread, func(c unreadCommit) bool {
		if c.readsBefore < read {
			c.done()
			return true
		}
		return false
	})
}

// indexAtOrBefore reports whether the index could take a commit starting at revision
// before (it has not passed it already).
func (m *Manager) indexAtOrBefore(before int64) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.avail != nil && m.avail.Index.AllocationRevision <= before
}

// asChanges is removed then added as log entries of revision rev.
func asChanges(removed, added []climate.Allocation, rev int64) []climate.AllocationChange {
	out := make([]climate.AllocationChange, 0, len(removed)+len(added))
	for _, a := range removed {
		out = append(out, climate.AllocationChange{Revision: rev, Removed: true, Allocation: a})
	}
	for _, a := range added {
		out = append(out, climate.AllocationChange{Revision: rev, Allocation: a})
	}
	return out
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
