package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"climate"
)

// GetLease returns a lease with its children.
func (t *tx) GetLease(ctx context.Context, id string) (*climate.Lease, error) {
	leases, err := t.loadLeases(ctx, leaseSelect+" WHERE id = ?", []any{id}, false)
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
	q, args := leaseQuery(f)
	every := f.ProjectID == "" && f.Name == "" && len(f.Statuses) == 0 && f.After == nil && f.Limit == 0
	return t.loadLeases(ctx, q, args, every)
}

const leaseSelect = `SELECT id, name, user_id, project_id, trust_id, start_at, end_at, status, degraded, created_at, updated_at,
	lease_type, retry_until, priority, max_retries, retries, preemptible, on_preempt FROM leases`

// leaseQuery builds ListLeases' query for f.
func leaseQuery(f climate.LeaseFilter) (string, []any) {
	var where []string
	var args []any
	if f.ProjectID != "" {
		where, args = append(where, "project_id = ?"), append(args, f.ProjectID)
	}
	if f.Name != "" {
		where, args = append(where, "name = ?"), append(args, f.Name)
	}
	if len(f.Statuses) > 0 {
		statuses := make([]string, len(f.Statuses))
		for i, st := range f.Statuses {
			statuses[i] = string(st)
		}
		where, args = append(where, "status IN (SELECT value FROM json_each(?))"), append(args, jsonList(statuses))
	}
	if f.After != nil {
		// Keyset paging: the (created_at, id) indexes seek to the page's start.
		where, args = append(where, "(created_at, id) > (?, ?)"), append(args, micros(f.After.CreatedAt), f.After.ID)
	}
	q := leaseSelect
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY created_at, id"
	if f.Limit > 0 {
		q, args = q+" LIMIT ?", append(args, f.Limit)
	}
	return q, args
}

// loadLeases loads the leases q selects (leaseSelect's columns), then each kind of child
// with one query, so the cost is four queries whatever the number of leases. every says q
// selects every lease: children are then read by a plain scan, which beats one index probe
// per lease.
func (t *tx) loadLeases(ctx context.Context, q string, args []any, every bool) ([]climate.Lease, error) {
	rows, err := t.q.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, internal(err)
	}
	var leases []climate.Lease
	index := map[string]int{}
	for rows.Next() {
		var l climate.Lease
		var start, end, created int64
		var updated, retryUntil sql.NullInt64
		if err := rows.Scan(&l.ID, &l.Name, &l.UserID, &l.ProjectID, &l.TrustID, &start, &end, &l.Status, &l.Degraded, &created, &updated,
			&l.Type, &retryUntil, &l.Priority, &l.MaxRetries, &l.Retries, &l.Preemptible, &l.OnPreempt); err != nil {
			rows.Close()
			return nil, internal(err)
		}
		l.Start, l.End, l.CreatedAt, l.UpdatedAt = fromMicros(start), fromMicros(end), fromMicros(created), fromNullMicros(updated)
		l.RetryUntil = fromNullMicros(retryUntil)
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

	in, childArgs := "", []any(nil)
	if !every { // one parameter however many ids
		ids := make([]string, len(leases))
		for i, l := range leases {
			ids[i] = l.ID
		}
		in, childArgs = " WHERE lease_id IN (SELECT value FROM json_each(?))", []any{jsonList(ids)}
	}
	resIndex := map[string][2]int{} // reservation id → lease index, reservation index
	rows, err = t.q.QueryContext(ctx, `SELECT id, lease_id, resource_type, status, min_count, max_count, hypervisor_properties,
		resource_properties, before_end, network_id, amount, required_floatingips, vcpus, memory_mb, disk_gb, affinity,
		server_group_id, missing_resources, resources_changed, created_at, updated_at
		FROM reservations`+in+` ORDER BY created_at, id`, childArgs...)
	if err != nil {
		return nil, internal(err)
	}
	for rows.Next() {
		var r climate.Reservation
		var created int64
		var updated sql.NullInt64
		var required string
		var affinity sql.NullBool
		if err := rows.Scan(&r.ID, &r.LeaseID, &r.ResourceType, &r.Status, &r.Min, &r.Max, &r.HypervisorProperties,
			&r.ResourceProperties, &r.BeforeEnd, &r.NetworkID, &r.Amount, &required,
			&r.Size.VCPUs, &r.Size.MemoryMB, &r.Size.DiskGB, &affinity, &r.ServerGroupID,
			&r.MissingResources, &r.ResourcesChanged, &created, &updated); err != nil {
			rows.Close()
			return nil, internal(err)
		}
		if r.RequiredFloatingIPs, err = decodeAddresses(required); err != nil {
			rows.Close()
			return nil, err
		}
		if affinity.Valid {
			r.Affinity = &affinity.Bool
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

	rows, err = t.q.QueryContext(ctx, `SELECT `+allocationColumns+`
		FROM allocations`+in+` ORDER BY resource_id, start_at, id`, childArgs...)
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

	rows, err = t.q.QueryContext(ctx, `SELECT `+eventColumns+`
		FROM events`+in+` ORDER BY created_at, id`, childArgs...)
	if err != nil {
		return nil, internal(err)
	}
	defer rows.Close()
	for rows.Next() {
		e, err := scanEvent(rows)
		if err != nil {
			return nil, err
		}
		li := index[e.LeaseID]
		leases[li].Events = append(leases[li].Events, e)
	}
	return leases, internal(rows.Err())
}

type scanner interface{ Scan(...any) error }

// allocationColumns are what scanAllocation reads.
const allocationColumns = `id, reservation_id, lease_id, resource_id, start_at, end_at, slots, vcpus, memory_mb, disk_gb, preemptible`

func scanAllocation(s scanner) (climate.Allocation, error) {
	var a climate.Allocation
	var start, end int64
	if err := s.Scan(&a.ID, &a.ReservationID, &a.LeaseID, &a.ResourceID, &start, &end,
		&a.Slots, &a.Size.VCPUs, &a.Size.MemoryMB, &a.Size.DiskGB, &a.Preemptible); err != nil {
		return a, internal(err)
	}
	a.Start, a.End = fromMicros(start), fromMicros(end)
	return a, nil
}

// InsertLease writes a lease and all its children. Children are written under their
// enclosing lease and reservation, whatever their own LeaseID and ReservationID say.
func (t *tx) InsertLease(ctx context.Context, l *climate.Lease) error {
	if err := t.writable(); err != nil {
		return err
	}
	_, err := t.q.ExecContext(ctx, `INSERT INTO leases (id, name, user_id, project_id, trust_id, start_at, end_at, status, degraded, created_at, updated_at,
		lease_type, retry_until, priority, max_retries, retries, preemptible, on_preempt)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		l.ID, l.Name, l.UserID, l.ProjectID, l.TrustID, micros(l.Start), micros(l.End), l.Status, l.Degraded, micros(l.CreatedAt), nullMicros(l.UpdatedAt),
		l.Type, nullMicros(l.RetryUntil), l.Priority, l.MaxRetries, l.Retries, l.Preemptible, l.OnPreempt)
	if isUnique(err) {
		return climate.Errorf(climate.CodeConflict, "Lease %s already exists", l.ID)
	}
	if err != nil {
		return internal(err)
	}
	for _, r := range l.Reservations {
		if err := t.insertReservation(ctx, l.ID, r); err != nil {
			return err
		}
		if err := t.insertAllocations(ctx, l.ID, r.ID, r.Allocations); err != nil {
			return err
		}
	}
	return t.insertEvents(ctx, l.ID, l.Events)
}

// rowsPerInsert bounds a multi-row INSERT (its text is cached per row count).
const rowsPerInsert = 16

// insertRows inserts rows (each of width values) into table's columns with one INSERT
// per rowsPerInsert rows: a statement costs about as much as a row.
func (t *tx) insertRows(ctx context.Context, table, columns string, width int, args []any) error {
	one := "(" + strings.TrimSuffix(strings.Repeat("?, ", width), ", ") + ")"
	for len(args) > 0 {
		n := min(len(args)/width, rowsPerInsert)
		q := `INSERT INTO ` + table + ` (` + columns + `) VALUES ` + strings.TrimSuffix(strings.Repeat(one+", ", n), ", ")
		if _, err := t.q.ExecContext(ctx, q, args[:n*width]...); err != nil {
			return err
		}
		args = args[n*width:]
	}
	return nil
}

// insertAllocations inserts a reservation's allocations.
func (t *tx) insertAllocations(ctx context.Context, leaseID, reservationID string, as []climate.Allocation) error {
	args := make([]any, 0, 11*len(as))
	for _, a := range as {
		args = append(args, a.ID, reservationID, leaseID, a.ResourceID, micros(a.Start), micros(a.End),
			a.Slots, a.Size.VCPUs, a.Size.MemoryMB, a.Size.DiskGB, a.Preemptible)
	}
	err := t.insertRows(ctx, "allocations", allocationColumns, 11, args)
	if isUnique(err) {
		return climate.Errorf(climate.CodeConflict, "An allocation of reservation %s already exists", reservationID)
	}
	return internal(err)
}

// insertEvents inserts a lease's events.
func (t *tx) insertEvents(ctx context.Context, leaseID string, es []climate.Event) error {
	args := make([]any, 0, 7*len(es))
	for _, e := range es {
		args = append(args, e.ID, leaseID, e.Type, micros(e.Time), e.Status, micros(e.CreatedAt), nullMicros(e.UpdatedAt))
	}
	err := t.insertRows(ctx, "events", "id, lease_id, event_type, time, status, created_at, updated_at", 7, args)
	if isUnique(err) {
		return climate.Errorf(climate.CodeConflict, "An event of lease %s already exists", leaseID)
	}
	return internal(err)
}

func (t *tx) insertReservation(ctx context.Context, leaseID string, r climate.Reservation) error {
	_, err := t.q.ExecContext(ctx, `INSERT INTO reservations (id, lease_id, resource_type, status, min_count, max_count,
		hypervisor_properties, resource_properties, before_end, network_id, amount, required_floatingips,
		vcpus, memory_mb, disk_gb, affinity, server_group_id,
		missing_resources, resources_changed, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.ID, leaseID, r.ResourceType, r.Status, r.Min, r.Max, r.HypervisorProperties, r.ResourceProperties, r.BeforeEnd,
		r.NetworkID, r.Amount, encodeAddresses(r.RequiredFloatingIPs),
		r.Size.VCPUs, r.Size.MemoryMB, r.Size.DiskGB, nullBool(r.Affinity), r.ServerGroupID,
		r.MissingResources, r.ResourcesChanged, micros(r.CreatedAt), nullMicros(r.UpdatedAt))
	if isUnique(err) {
		return climate.Errorf(climate.CodeConflict, "Reservation %s already exists", r.ID)
	}
	return internal(err)
}

// UpdateLease writes the lease row and syncs its children by id. It compares l with what
// is stored and writes only children that changed: the engine rewrites a lease on every
// event, and most of a large lease (its allocations) is then unchanged.
func (t *tx) UpdateLease(ctx context.Context, l *climate.Lease) error {
	if err := t.writable(); err != nil {
		return err
	}
	cur, err := t.GetLease(ctx, l.ID)
	if err != nil {
		return err
	}
	_, err = t.q.ExecContext(ctx, `UPDATE leases SET name = ?, user_id = ?, project_id = ?, trust_id = ?, start_at = ?, end_at = ?,
		status = ?, degraded = ?, created_at = ?, updated_at = ?, lease_type = ?, retry_until = ?, priority = ?,
		max_retries = ?, retries = ?, preemptible = ?, on_preempt = ? WHERE id = ?`,
		l.Name, l.UserID, l.ProjectID, l.TrustID, micros(l.Start), micros(l.End), l.Status, l.Degraded, micros(l.CreatedAt), nullMicros(l.UpdatedAt),
		l.Type, nullMicros(l.RetryUntil), l.Priority, l.MaxRetries, l.Retries, l.Preemptible, l.OnPreempt, l.ID)
	if err != nil {
		return internal(err)
	}

	oldRes := map[string]climate.Reservation{}
	oldAlloc := map[string]climate.Allocation{}
	for _, r := range cur.Reservations {
		for _, a := range r.Allocations {
			oldAlloc[a.ID] = a
		}
		r.Allocations = nil
		oldRes[r.ID] = r
	}
	oldEv := map[string]climate.Event{}
	for _, e := range cur.Events {
		oldEv[e.ID] = e
	}

	// Insert and update first, delete last: an allocation that moves from a removed
	// reservation to a kept one must be re-pointed before the removal cascades.
	for _, r := range l.Reservations {
		allocs := r.Allocations
		r = normReservation(l.ID, r)
		if old, had := oldRes[r.ID]; !had {
			if err := t.insertReservation(ctx, l.ID, r); err != nil {
				return err
			}
		} else if !reflect.DeepEqual(old, r) { // both normalized, Allocations nil
			if _, err := t.q.ExecContext(ctx, `UPDATE reservations SET resource_type = ?, status = ?, min_count = ?, max_count = ?,
				hypervisor_properties = ?, resource_properties = ?, before_end = ?, network_id = ?, amount = ?,
				required_floatingips = ?, vcpus = ?, memory_mb = ?, disk_gb = ?, affinity = ?, server_group_id = ?,
				missing_resources = ?, resources_changed = ?, created_at = ?, updated_at = ? WHERE id = ?`,
				r.ResourceType, r.Status, r.Min, r.Max, r.HypervisorProperties, r.ResourceProperties, r.BeforeEnd,
				r.NetworkID, r.Amount, encodeAddresses(r.RequiredFloatingIPs),
				r.Size.VCPUs, r.Size.MemoryMB, r.Size.DiskGB, nullBool(r.Affinity), r.ServerGroupID,
				r.MissingResources, r.ResourcesChanged, micros(r.CreatedAt), nullMicros(r.UpdatedAt), r.ID); err != nil {
				return internal(err)
			}
		}
		delete(oldRes, r.ID)
		for _, a := range allocs {
			a = normAllocation(l.ID, r.ID, a)
			if old, had := oldAlloc[a.ID]; !had {
				if err := t.insertAllocations(ctx, l.ID, r.ID, []climate.Allocation{a}); err != nil {
					return err
				}
			} else if old != a {
				if _, err := t.q.ExecContext(ctx, `UPDATE allocations SET reservation_id = ?, resource_id = ?, start_at = ?, end_at = ?,
					slots = ?, vcpus = ?, memory_mb = ?, disk_gb = ?, preemptible = ? WHERE id = ?`,
					a.ReservationID, a.ResourceID, micros(a.Start), micros(a.End),
					a.Slots, a.Size.VCPUs, a.Size.MemoryMB, a.Size.DiskGB, a.Preemptible, a.ID); err != nil {
					return internal(err)
				}
			}
			delete(oldAlloc, a.ID)
		}
	}
	for _, e := range l.Events {
		e = normEvent(l.ID, e)
		old, had := oldEv[e.ID]
		e.ClaimedBy = old.ClaimedBy // the claim is written by the claimer only
		if !had {
			if err := t.insertEvents(ctx, l.ID, []climate.Event{e}); err != nil {
				return err
			}
		} else if old != e {
			// The claim belongs to whoever holds the event; it ends only when the event
			// leaves IN_PROGRESS.
			endClaim := ``
			if e.Status != climate.EventInProgress {
				endClaim = `, claimed_by = NULL, claimed_until = NULL`
			}
			if _, err := t.q.ExecContext(ctx, `UPDATE events SET event_type = ?, time = ?, status = ?,
				created_at = ?, updated_at = ?`+endClaim+` WHERE id = ?`,
				e.Type, micros(e.Time), e.Status, micros(e.CreatedAt), nullMicros(e.UpdatedAt), e.ID); err != nil {
				return internal(err)
			}
		}
		delete(oldEv, e.ID)
	}

	// What is left in the old maps is absent from l.
	if err := t.deleteIDs(ctx, "allocations", keys(oldAlloc)); err != nil {
		return err
	}
	if err := t.deleteIDs(ctx, "reservations", keys(oldRes)); err != nil {
		return err
	}
	return t.deleteIDs(ctx, "events", keys(oldEv))
}

// deleteIDs deletes rows of table by id with one statement.
func (t *tx) deleteIDs(ctx context.Context, table string, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := t.q.ExecContext(ctx, `DELETE FROM `+table+` WHERE id IN (SELECT value FROM json_each(?))`, jsonList(ids))
	return internal(err)
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// normReservation, normAllocation and normEvent return a child as the store would give it
// back, so that comparing it with the stored one tells whether it changed.
func normReservation(leaseID string, r climate.Reservation) climate.Reservation {
	r.LeaseID, r.Allocations = leaseID, nil
	r.CreatedAt, r.UpdatedAt = fromMicros(micros(r.CreatedAt)), fromNullMicros(nullInt(r.UpdatedAt))
	if len(r.RequiredFloatingIPs) == 0 {
		r.RequiredFloatingIPs = nil
	}
	return r
}

// nullBool is a nullable boolean as stored: NULL for nil, else 0 or 1.
func nullBool(b *bool) any {
	if b == nil {
		return nil
	}
	return *b
}

// encodeAddresses is a reservation's required floating IPs as stored: a JSON array, "[]"
// for none (nil included).
func encodeAddresses(addrs []string) string {
	if len(addrs) == 0 {
		return "[]"
	}
	return jsonList(addrs)
}

// decodeAddresses reads what encodeAddresses wrote; none comes back nil.
func decodeAddresses(s string) ([]string, error) {
	var addrs []string
	if err := json.Unmarshal([]byte(s), &addrs); err != nil {
		return nil, internal(fmt.Errorf("required_floatingips %q: %w", s, err))
	}
	if len(addrs) == 0 {
		return nil, nil
	}
	return addrs, nil
}

func normAllocation(leaseID, reservationID string, a climate.Allocation) climate.Allocation {
	a.LeaseID, a.ReservationID = leaseID, reservationID
	a.Start, a.End = fromMicros(micros(a.Start)), fromMicros(micros(a.End))
	return a
}

func normEvent(leaseID string, e climate.Event) climate.Event {
	e.LeaseID = leaseID
	e.Time, e.CreatedAt, e.UpdatedAt = fromMicros(micros(e.Time)), fromMicros(micros(e.CreatedAt)), fromNullMicros(nullInt(e.UpdatedAt))
	return e
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
	if f.ResourceIDs != nil && len(f.ResourceIDs) == 0 {
		return nil, nil
	}
	q, args := allocationQuery(f)
	rows, err := t.q.QueryContext(ctx, q, args...)
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

// allocationQuery builds ListAllocations' query for f (whose ResourceIDs is not empty).
func allocationQuery(f climate.AllocationFilter) (string, []any) {
	var where []string
	var args []any
	if f.ResourceIDs != nil {
		// One parameter however many ids (no SQLITE_MAX_VARIABLE_NUMBER limit).
		where, args = append(where, "resource_id IN (SELECT value FROM json_each(?))"), append(args, jsonList(f.ResourceIDs))
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
	q := `SELECT ` + allocationColumns + ` FROM allocations`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	// The unary + stops SQLite from walking the whole resource index merely to skip a
	// sort: over all resources, searching the end_at index for the window is about twice
	// as fast (see BenchmarkListAllocationsWindow), and with a resource filter the
	// resource index still serves the lookup.
	return q + " ORDER BY +resource_id, start_at, id", args
}
