package sqlite

import (
	"context"
	"database/sql"
	"strings"

	"climate"
)

// GetLease returns a lease with its children.
func (t *tx) GetLease(ctx context.Context, id string) (*climate.Lease, error) {
	leases, err := t.loadLeases(ctx, "id = ?", id)
	if err != nil {
		return nil, err
	}
	if len(leases) == 0 {
		return nil, climate.Errorf(climate.CodeNotFound, "Object with {'lease_id': '%s'} not found", id)
	}
	return &leases[0], nil
}

// ListLeases returns the leases matching f with their children.
func (t *tx) ListLeases(ctx context.Context, f climate.LeaseFilter) ([]climate.Lease, error) {
	if f.ProjectID != "" {
		return t.loadLeases(ctx, "project_id = ?", f.ProjectID)
	}
	return t.loadLeases(ctx, "1 = 1")
}

// loadLeases loads the leases matching where, then each kind of child with one query, so
// the cost is four queries whatever the number of leases.
func (t *tx) loadLeases(ctx context.Context, where string, args ...any) ([]climate.Lease, error) {
	rows, err := t.q.QueryContext(ctx, `SELECT id, name, user_id, project_id, trust_id, start_at, end_at, status, degraded, created_at, updated_at
		FROM leases WHERE `+where+` ORDER BY created_at, id`, args...)
	if err != nil {
		return nil, internal(err)
	}
	var leases []climate.Lease
	index := map[string]int{}
	for rows.Next() {
		var l climate.Lease
		var start, end, created int64
		var updated sql.NullInt64
		if err := rows.Scan(&l.ID, &l.Name, &l.UserID, &l.ProjectID, &l.TrustID, &start, &end, &l.Status, &l.Degraded, &created, &updated); err != nil {
			rows.Close()
			return nil, internal(err)
		}
		l.Start, l.End, l.CreatedAt, l.UpdatedAt = fromMicros(start), fromMicros(end), fromMicros(created), fromNullMicros(updated)
		index[l.ID] = len(leases)
		leases = append(leases, l)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, internal(err)
	}
	if len(leases) == 0 {
		return nil, nil
	}
	in := `lease_id IN (SELECT id FROM leases WHERE ` + where + `)`

	resIndex := map[string][2]int{} // reservation id → lease index, reservation index
	rows, err = t.q.QueryContext(ctx, `SELECT id, lease_id, resource_type, status, min_count, max_count, hypervisor_properties,
		resource_properties, before_end, missing_resources, resources_changed, created_at, updated_at
		FROM reservations WHERE `+in+` ORDER BY created_at, id`, args...)
	if err != nil {
		return nil, internal(err)
	}
	for rows.Next() {
		var r climate.Reservation
		var created int64
		var updated sql.NullInt64
		if err := rows.Scan(&r.ID, &r.LeaseID, &r.ResourceType, &r.Status, &r.Min, &r.Max, &r.HypervisorProperties,
			&r.ResourceProperties, &r.BeforeEnd, &r.MissingResources, &r.ResourcesChanged, &created, &updated); err != nil {
			rows.Close()
			return nil, internal(err)
		}
		r.CreatedAt, r.UpdatedAt = fromMicros(created), fromNullMicros(updated)
		li := index[r.LeaseID]
		resIndex[r.ID] = [2]int{li, len(leases[li].Reservations)}
		leases[li].Reservations = append(leases[li].Reservations, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, internal(err)
	}

	rows, err = t.q.QueryContext(ctx, `SELECT id, reservation_id, lease_id, resource_id, start_at, end_at
		FROM allocations WHERE `+in+` ORDER BY resource_id, start_at, id`, args...)
	if err != nil {
		return nil, internal(err)
	}
	for rows.Next() {
		a, err := scanAllocation(rows)
		if err != nil {
			rows.Close()
			return nil, err
		}
		if at, ok := resIndex[a.ReservationID]; ok {
			r := &leases[at[0]].Reservations[at[1]]
			r.Allocations = append(r.Allocations, a)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, internal(err)
	}

	rows, err = t.q.QueryContext(ctx, `SELECT id, lease_id, event_type, time, status, created_at, updated_at
		FROM events WHERE `+in+` ORDER BY created_at, id`, args...)
	if err != nil {
		return nil, internal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var e climate.Event
		var at, created int64
		var updated sql.NullInt64
		if err := rows.Scan(&e.ID, &e.LeaseID, &e.Type, &at, &e.Status, &created, &updated); err != nil {
			return nil, internal(err)
		}
		e.Time, e.CreatedAt, e.UpdatedAt = fromMicros(at), fromMicros(created), fromNullMicros(updated)
		li := index[e.LeaseID]
		leases[li].Events = append(leases[li].Events, e)
	}
	return leases, internal(rows.Err())
}

type scanner interface{ Scan(...any) error }

func scanAllocation(s scanner) (climate.Allocation, error) {
	var a climate.Allocation
	var start, end int64
	if err := s.Scan(&a.ID, &a.ReservationID, &a.LeaseID, &a.ResourceID, &start, &end); err != nil {
		return a, internal(err)
	}
	a.Start, a.End = fromMicros(start), fromMicros(end)
	return a, nil
}

// InsertLease writes a lease and all its children.
func (t *tx) InsertLease(ctx context.Context, l *climate.Lease) error {
	if err := t.writable(); err != nil {
		return err
	}
	_, err := t.q.ExecContext(ctx, `INSERT INTO leases (id, name, user_id, project_id, trust_id, start_at, end_at, status, degraded, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		l.ID, l.Name, l.UserID, l.ProjectID, l.TrustID, micros(l.Start), micros(l.End), l.Status, l.Degraded, micros(l.CreatedAt), nullMicros(l.UpdatedAt))
	if isUnique(err) {
		return climate.Errorf(climate.CodeConflict, "Lease %s already exists", l.ID)
	}
	if err != nil {
		return internal(err)
	}
	for i := range l.Reservations {
		if err := t.insertReservation(ctx, &l.Reservations[i]); err != nil {
			return err
		}
		for _, a := range l.Reservations[i].Allocations {
			if err := t.insertAllocation(ctx, a); err != nil {
				return err
			}
		}
	}
	for _, e := range l.Events {
		if err := t.insertEvent(ctx, e); err != nil {
			return err
		}
	}
	return nil
}

func (t *tx) insertReservation(ctx context.Context, r *climate.Reservation) error {
	_, err := t.q.ExecContext(ctx, `INSERT INTO reservations (id, lease_id, resource_type, status, min_count, max_count,
		hypervisor_properties, resource_properties, before_end, missing_resources, resources_changed, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.ID, r.LeaseID, r.ResourceType, r.Status, r.Min, r.Max, r.HypervisorProperties, r.ResourceProperties, r.BeforeEnd,
		r.MissingResources, r.ResourcesChanged, micros(r.CreatedAt), nullMicros(r.UpdatedAt))
	if isUnique(err) {
		return climate.Errorf(climate.CodeConflict, "Reservation %s already exists", r.ID)
	}
	return internal(err)
}

func (t *tx) insertAllocation(ctx context.Context, a climate.Allocation) error {
	_, err := t.q.ExecContext(ctx, `INSERT INTO allocations (id, reservation_id, lease_id, resource_id, start_at, end_at) VALUES (?, ?, ?, ?, ?, ?)`,
		a.ID, a.ReservationID, a.LeaseID, a.ResourceID, micros(a.Start), micros(a.End))
	if isUnique(err) {
		return climate.Errorf(climate.CodeConflict, "Allocation %s already exists", a.ID)
	}
	return internal(err)
}

func (t *tx) insertEvent(ctx context.Context, e climate.Event) error {
	_, err := t.q.ExecContext(ctx, `INSERT INTO events (id, lease_id, event_type, time, status, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		e.ID, e.LeaseID, e.Type, micros(e.Time), e.Status, micros(e.CreatedAt), nullMicros(e.UpdatedAt))
	if isUnique(err) {
		return climate.Errorf(climate.CodeConflict, "Event %s already exists", e.ID)
	}
	return internal(err)
}

// UpdateLease writes the lease row and syncs its children by id.
func (t *tx) UpdateLease(ctx context.Context, l *climate.Lease) error {
	if err := t.writable(); err != nil {
		return err
	}
	cur, err := t.GetLease(ctx, l.ID)
	if err != nil {
		return err
	}
	_, err = t.q.ExecContext(ctx, `UPDATE leases SET name = ?, user_id = ?, project_id = ?, trust_id = ?, start_at = ?, end_at = ?,
		status = ?, degraded = ?, created_at = ?, updated_at = ? WHERE id = ?`,
		l.Name, l.UserID, l.ProjectID, l.TrustID, micros(l.Start), micros(l.End), l.Status, l.Degraded, micros(l.CreatedAt), nullMicros(l.UpdatedAt), l.ID)
	if err != nil {
		return internal(err)
	}

	// Reservations (deleting one cascades to its allocations).
	oldRes := map[string]bool{}
	oldAlloc := map[string]climate.Allocation{}
	for _, r := range cur.Reservations {
		oldRes[r.ID] = true
		for _, a := range r.Allocations {
			oldAlloc[a.ID] = a
		}
	}
	keepRes, keepAlloc := map[string]bool{}, map[string]bool{}
	for _, r := range l.Reservations {
		keepRes[r.ID] = true
		for _, a := range r.Allocations {
			keepAlloc[a.ID] = true
		}
	}
	for id := range oldAlloc {
		if !keepAlloc[id] {
			if _, err := t.q.ExecContext(ctx, `DELETE FROM allocations WHERE id = ?`, id); err != nil {
				return internal(err)
			}
		}
	}
	for id := range oldRes {
		if !keepRes[id] {
			if _, err := t.q.ExecContext(ctx, `DELETE FROM reservations WHERE id = ?`, id); err != nil {
				return internal(err)
			}
		}
	}
	for i := range l.Reservations {
		r := &l.Reservations[i]
		r.LeaseID = l.ID
		if !oldRes[r.ID] {
			if err := t.insertReservation(ctx, r); err != nil {
				return err
			}
		} else if _, err := t.q.ExecContext(ctx, `UPDATE reservations SET resource_type = ?, status = ?, min_count = ?, max_count = ?,
			hypervisor_properties = ?, resource_properties = ?, before_end = ?, missing_resources = ?, resources_changed = ?,
			created_at = ?, updated_at = ? WHERE id = ?`,
			r.ResourceType, r.Status, r.Min, r.Max, r.HypervisorProperties, r.ResourceProperties, r.BeforeEnd,
			r.MissingResources, r.ResourcesChanged, micros(r.CreatedAt), nullMicros(r.UpdatedAt), r.ID); err != nil {
			return internal(err)
		}
		for _, a := range r.Allocations {
			old, had := oldAlloc[a.ID]
			switch {
			case !had:
				if err := t.insertAllocation(ctx, a); err != nil {
					return err
				}
			case old != a:
				if _, err := t.q.ExecContext(ctx, `UPDATE allocations SET reservation_id = ?, lease_id = ?, resource_id = ?, start_at = ?, end_at = ? WHERE id = ?`,
					a.ReservationID, a.LeaseID, a.ResourceID, micros(a.Start), micros(a.End), a.ID); err != nil {
					return internal(err)
				}
			}
		}
	}

	// Events: a status other than IN_PROGRESS ends any claim.
	oldEv := map[string]climate.Event{}
	for _, e := range cur.Events {
		oldEv[e.ID] = e
	}
	keepEv := map[string]bool{}
	for _, e := range l.Events {
		keepEv[e.ID] = true
		old, had := oldEv[e.ID]
		if !had {
			if err := t.insertEvent(ctx, e); err != nil {
				return err
			}
			continue
		}
		if old == e {
			continue
		}
		claim := `claimed_until`
		if e.Status != climate.EventInProgress {
			claim = `NULL`
		}
		if _, err := t.q.ExecContext(ctx, `UPDATE events SET event_type = ?, time = ?, status = ?, claimed_until = `+claim+`,
			created_at = ?, updated_at = ? WHERE id = ?`,
			e.Type, micros(e.Time), e.Status, micros(e.CreatedAt), nullMicros(e.UpdatedAt), e.ID); err != nil {
			return internal(err)
		}
	}
	for id := range oldEv {
		if !keepEv[id] {
			if _, err := t.q.ExecContext(ctx, `DELETE FROM events WHERE id = ?`, id); err != nil {
				return internal(err)
			}
		}
	}
	return nil
}

// DeleteLease deletes a lease; foreign keys cascade to its children in this transaction.
func (t *tx) DeleteLease(ctx context.Context, id string) error {
	if err := t.writable(); err != nil {
		return err
	}
	res, err := t.q.ExecContext(ctx, `DELETE FROM leases WHERE id = ?`, id)
	if err != nil {
		return internal(err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return climate.Errorf(climate.CodeNotFound, "Object with {'lease_id': '%s'} not found", id)
	}
	return nil
}

// ListAllocations returns the allocations matching f.
func (t *tx) ListAllocations(ctx context.Context, f climate.AllocationFilter) ([]climate.Allocation, error) {
	var where []string
	var args []any
	if f.ResourceIDs != nil {
		if len(f.ResourceIDs) == 0 {
			return nil, nil
		}
		where = append(where, "resource_id IN ("+placeholders(len(f.ResourceIDs))+")")
		for _, id := range f.ResourceIDs {
			args = append(args, id)
		}
	}
	if f.LeaseID != "" {
		where, args = append(where, "lease_id = ?"), append(args, f.LeaseID)
	}
	if f.ReservationID != "" {
		where, args = append(where, "reservation_id = ?"), append(args, f.ReservationID)
	}
	if f.ExcludeLeaseID != "" {
		where, args = append(where, "lease_id != ?"), append(args, f.ExcludeLeaseID)
	}
	if !f.From.IsZero() {
		where, args = append(where, "end_at > ?"), append(args, micros(f.From))
	}
	if !f.To.IsZero() {
		where, args = append(where, "start_at < ?"), append(args, micros(f.To))
	}
	q := `SELECT id, reservation_id, lease_id, resource_id, start_at, end_at FROM allocations`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	rows, err := t.q.QueryContext(ctx, q+" ORDER BY resource_id, start_at, id", args...)
	if err != nil {
		return nil, internal(err)
	}
	defer rows.Close()
	var out []climate.Allocation
	for rows.Next() {
		a, err := scanAllocation(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, internal(rows.Err())
}
