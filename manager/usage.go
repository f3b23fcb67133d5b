package manager

import (
	"context"
	"time"

	"climate"
)

// usageBatch is how many usage records a listing reads per transaction.
const usageBatch = 1000

// ListUsage passes to fn, batch by batch, the usage of each reservation of q's project
// (admins: any project, or all of them; members: their own), with its figures clipped
// to q's window.
func (m *Manager) ListUsage(ctx context.Context, who climate.Identity, q climate.UsageQuery, fn func([]climate.ReservationUsage) error) error {
	if q.ProjectID == "" && !who.IsAdmin() {
		q.ProjectID = who.ProjectID
	}
	target := climate.Target{ProjectID: q.ProjectID}
	if q.ProjectID == "" {
		target = who.OwnTarget()
	}
	if err := m.allow(who, usageGetRule, target); err != nil {
		return err
	}
	if !q.From.IsZero() && !q.To.IsZero() && !q.From.Before(q.To) {
		return invalid("from must be earlier than to")
	}
	now := m.now()
	f := climate.UsageFilter{ProjectID: q.ProjectID, From: q.From, To: q.To, Limit: usageBatch}
	var cur *climate.ReservationUsage // the reservation being summed, which may go on in the next batch
	for {
		var rs []climate.UsageRecord
		if err := m.store.View(ctx, func(tx climate.Tx) error {
			var err error
			rs, err = tx.ListUsage(ctx, f)
			return err
		}); err != nil {
			return err
		}
		var out []climate.ReservationUsage
		for i := range rs {
			u := &rs[i]
			if cur != nil && cur.ReservationID != u.ReservationID {
				out = append(out, *cur)
				cur = nil
			}
			if cur == nil {
				cur = &climate.ReservationUsage{ProjectID: u.ProjectID, LeaseID: u.LeaseID, LeaseName: u.LeaseName,
					ReservationID: u.ReservationID, ResourceType: u.ResourceType, Class: u.Class, Start: u.Start, End: u.End}
			}
			addRecord(cur, u, q.From, q.To, now)
		}
		done := len(rs) < usageBatch
		if done && cur != nil {
			out = append(out, *cur)
		}
		if len(out) > 0 {
			if err := fn(out); err != nil {
				return err
			}
		}
		if done {
			return nil
		}
		last := rs[len(rs)-1]
		f.AfterLease, f.AfterReservation, f.AfterAllocation = last.LeaseID, last.ReservationID, last.AllocationID
	}
}

// addRecord adds one allocation's record to its reservation's usage, within [from, to)
// (zero: unbounded).
func addRecord(r *climate.ReservationUsage, u *climate.UsageRecord, from, to time.Time, now time.Time) {
	r.Start, r.End = climate.Earlier(r.Start, u.Start), climate.Later(r.End, u.End)
	r.ReservedHours += float64(u.Units) * overlap(u.Start, u.End, from, to).Hours()
	hf, hu := u.Held(now)
	held := overlap(hf, hu, from, to)
	r.HeldHours += float64(u.Units) * held.Hours()
	r.Cost += u.Rate * held.Hours()
	r.Charged += u.Cost
	r.Open = r.Open || !u.Closed
}

// overlap is the length of [a, b) within [from, to) (zero bounds: unbounded).
func overlap(a, b, from, to time.Time) time.Duration {
	if !from.IsZero() {
		a = climate.Later(a, from)
	}
	if !to.IsZero() {
		b = climate.Earlier(b, to)
	}
	if !b.After(a) {
		return 0
	}
	return b.Sub(a)
}
