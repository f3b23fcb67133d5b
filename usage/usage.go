// Package usage keeps the accounting of leases: one record per allocation of what was
// reserved, what was held and what it charges the project's budget. Every write of a
// lease calls Sync in its own transaction, so the records follow the lease through its
// events and a change that rolls back leaves them as they were.
package usage

import (
	"context"
	"time"

	"climate"
)

// Class returns the usage class of an allocation of a reservation of resourceType, and
// how many of it the allocation holds: instance slots count their vCPUs.
func Class(resourceType string, a *climate.Allocation) (class string, units int) {
	switch {
	case a.Slots > 0:
		return climate.ClassVCPU, a.Slots * a.Size.VCPUs
	case resourceType == "virtual:floatingip":
		return climate.ClassFloatingIP, 1
	default:
		return climate.ClassHost, 1
	}
}

// Charge is what a Sync changed in the project's charge.
type Charge struct {
	// Delta is the change of the project's charge; Project its totals after it (only
	// read when the lease's records changed and the caller checks limits).
	Delta   float64
	Project climate.ProjectCharge
	// Rate is what the lease's open records cost per hour; LeaseCost what all its
	// records charge.
	Rate, LeaseCost float64
}

// Change is what the transaction calling Sync does to the lease.
type Change int

// Changes.
const (
	// Created: the lease is new, so it has no records yet (none are read).
	Created Change = iota
	// Updated: the lease was changed (by a caller, an event, healing, …).
	Updated
	// Deleted: the lease is being deleted; its records stay.
	Deleted
)

// Sync brings the usage records of lease l up to date in tx, the transaction that
// makes change to l, and charges the project the difference.
//
// An allocation begins to be held when its lease is ACTIVE, and stops when the lease is
// over (TERMINATED, ERROR, FAILED, TIMEDOUT or deleted) or the allocation is taken away
// (healing, an update): its record is then closed. An open record charges its whole
// reserved window, a closed one what was held: ending early refunds the rest.
//
// The project's prices are read only when an allocation is new (its rate is fixed then).
func Sync(ctx context.Context, tx climate.Tx, l *climate.Lease, change Change, now time.Time) (Charge, error) {
	var prices *climate.Prices
	return syncRecords(ctx, tx, l, change, now, false, func() (climate.Prices, error) {
		if prices == nil {
			lim, ok, err := tx.GetProjectLimits(ctx, l.ProjectID)
			if err != nil {
				return climate.Prices{}, err
			}
			prices = &climate.Prices{}
			if ok {
				prices = &lim.Prices
			}
		}
		return *prices, nil
	})
}

// SyncPriced is Sync for a caller that has read the project's limits (nil: none) and,
// with check, checks them on the project's totals after the change (Charge.Project).
func SyncPriced(ctx context.Context, tx climate.Tx, l *climate.Lease, change Change, now time.Time, limits *climate.ProjectLimits, check bool) (Charge, error) {
	var prices climate.Prices
	if limits != nil {
		prices = limits.Prices
	}
	return syncRecords(ctx, tx, l, change, now, check, func() (climate.Prices, error) { return prices, nil })
}

func syncRecords(ctx context.Context, tx climate.Tx, l *climate.Lease, change Change, now time.Time, totals bool, pricesOf func() (climate.Prices, error)) (Charge, error) {
	var c Charge
	var err error
	var old []climate.UsageRecord
	if change != Created {
		if old, err = tx.ListUsage(ctx, climate.UsageFilter{LeaseID: l.ID}); err != nil {
			return c, err
		}
	}
	deleted := change == Deleted
	had := make(map[string]climate.UsageRecord, len(old))
	for _, u := range old {
		had[u.AllocationID] = u
	}
	holding := l.Status == climate.LeaseActive
	over := deleted || isOver(l.Status)
	allocations := 0
	for i := range l.Reservations {
		allocations += len(l.Reservations[i].Allocations)
	}
	// Sized once: grown record by record, they were a tenth of a creation's garbage.
	changed := make([]climate.UsageRecord, 0, allocations+len(old))
	var d climate.ProjectCharge // the change of the project's totals
	keep := func(u, before climate.UsageRecord, existed bool) {
		u.Cost = cost(&u)
		if !u.Closed {
			c.Rate += u.Rate
		}
		if existed && u == before {
			return
		}
		u.UpdatedAt = now
		d.Charged += u.Cost - before.Cost
		if existed && !before.Closed {
			d.AddOpen(before.Class, -before.Units)
		}
		if !u.Closed {
			d.AddOpen(u.Class, u.Units)
		}
		changed = append(changed, u)
	}
	seen := make(map[string]bool, allocations)
	if !deleted {
		for i := range l.Reservations {
			r := &l.Reservations[i]
			for j := range r.Allocations {
				a := &r.Allocations[j]
				seen[a.ID] = true
				before, existed := had[a.ID]
				if existed && before.Closed {
					continue // over: it stays as it ended
				}
				u := before
				if !existed {
					prices, err := pricesOf()
					if err != nil {
						return c, err
					}
					if u, err = newRecord(ctx, tx, l, r, a, prices, now); err != nil {
						return c, err
					}
				}
				u.LeaseName, u.Start, u.End = l.Name, a.Start, a.End
				if holding && u.HeldFrom.IsZero() {
					u.HeldFrom = clamp(now, a.Start, a.End)
				}
				if over {
					closeRecord(&u, now)
				}
				keep(u, before, existed)
			}
		}
	}
	for _, u := range old {
		if !seen[u.AllocationID] && !u.Closed {
			before := u
			closeRecord(&u, now) // taken away, or the lease is deleted
			keep(u, before, true)
		}
	}
	c.LeaseCost = 0
	for _, u := range had {
		c.LeaseCost += u.Cost
	}
	for _, u := range changed {
		c.LeaseCost += u.Cost - had[u.AllocationID].Cost
	}
	if len(changed) == 0 {
		return c, nil
	}
	if err := tx.PutUsage(ctx, changed); err != nil {
		return c, err
	}
	switch wasOpen, isOpen := anyOpen(old, nil), anyOpen(old, changed); {
	case !wasOpen && isOpen:
		d.OpenLeases = 1
	case wasOpen && !isOpen:
		d.OpenLeases = -1
	}
	c.Delta = d.Charged
	c.Project, err = tx.ChargeProject(ctx, l.ProjectID, d, totals)
	return c, err
}

// anyOpen reports whether a lease whose records were old, and then changed, has any
// record open.
func anyOpen(old, changed []climate.UsageRecord) bool {
	closed := make(map[string]bool, len(changed))
	for _, u := range changed {
		if !u.Closed {
			return true
		}
		closed[u.AllocationID] = true
	}
	for _, u := range old {
		if !u.Closed && !closed[u.AllocationID] {
			return true
		}
	}
	return false
}

// isOver reports whether a lease in status s holds nothing any more.
func isOver(s climate.LeaseStatus) bool {
	switch s {
	case climate.LeaseTerminated, climate.LeaseError, climate.LeaseFailed, climate.LeaseTimedOut:
		return true
	}
	return false
}

func newRecord(ctx context.Context, tx climate.Tx, l *climate.Lease, r *climate.Reservation, a *climate.Allocation, prices climate.Prices, now time.Time) (climate.UsageRecord, error) {
	class, units := Class(r.ResourceType, a)
	rate := float64(units) * prices.Price(class)
	if len(prices.Multipliers) > 0 && class != climate.ClassFloatingIP {
		h, err := tx.GetHost(ctx, a.ResourceID)
		switch {
		case err == nil:
			rate *= prices.Multiplier(h)
		case climate.ErrorCode(err) != climate.CodeNotFound:
			return climate.UsageRecord{}, err
		}
	}
	return climate.UsageRecord{
		AllocationID: a.ID, ReservationID: r.ID, LeaseID: l.ID, ProjectID: l.ProjectID,
		ResourceType: r.ResourceType, ResourceID: a.ResourceID, Class: class, Units: units,
		Rate: rate, CreatedAt: now,
	}, nil
}

// closeRecord ends u at now: what was held stops then (or at the reserved end, if that
// came first).
func closeRecord(u *climate.UsageRecord, now time.Time) {
	u.Closed = true
	if !u.HeldFrom.IsZero() && u.HeldUntil.IsZero() {
		u.HeldUntil = clamp(now, u.HeldFrom, u.End)
	}
}

// cost is what u charges: its reserved window while open, what was held once closed.
func cost(u *climate.UsageRecord) float64 {
	if !u.Closed {
		return u.Rate * u.End.Sub(u.Start).Hours()
	}
	from, until := u.Held(u.HeldUntil)
	return u.Rate * until.Sub(from).Hours()
}

func clamp(t, lo, hi time.Time) time.Time {
	if t.Before(lo) {
		return lo
	}
	if t.After(hi) {
		return hi
	}
	return t
}

// FillCosts sets what each of leases charges its project's budget, from their records.
func FillCosts(ctx context.Context, tx climate.Tx, leases []climate.Lease) error {
	if len(leases) == 0 {
		return nil
	}
	ids := make([]string, len(leases))
	for i := range leases {
		ids[i] = leases[i].ID
	}
	rs, err := tx.ListUsage(ctx, climate.UsageFilter{LeaseIDs: ids})
	if err != nil {
		return err
	}
	sum := make(map[string]float64, len(leases))
	for _, u := range rs {
		sum[u.LeaseID] += u.Cost
	}
	for i := range leases {
		c := sum[leases[i].ID]
		leases[i].Cost = &c
	}
	return nil
}
