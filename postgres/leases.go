package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"climate"
)

// GetLease returns a lease with its children.
func (t *tx) GetLease(ctx context.Context, id string) (*climate.Lease, error) {
	leases, err := t.loadLeases(ctx, leaseSelect+" WHERE id = $1", []any{id}, false)
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
	add := func(cond string, as ...any) {
		for _, a := range as {
			args = append(args, a)
			cond = strings.Replace(cond, "?", "$"+strconv.Itoa(len(args)), 1)
		}
		where = append(where, cond)
	}
	if f.ProjectID != "" {
		add("project_id = ?", f.ProjectID)
	}
	if f.Name != "" {
		add("name = ?", f.Name)
	}
	if len(f.Statuses) > 0 {
		statuses := make([]string, len(f.Statuses))
		for i, st := range f.Statuses {
			statuses[i] = string(st)
		}
		add("status = ANY(?)", statuses)
	}
	if f.After != nil {
		// Keyset paging: the (created_at, id) indexes seek to the page's start.
		add("(created_at, id) > (?, ?)", ts(f.After.CreatedAt), f.After.ID)
	}
	q := leaseSelect
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY created_at, id"
	if f.Limit > 0 {
		args = append(args, f.Limit)
		q += " LIMIT $" + strconv.Itoa(len(args))
	}
	return q, args
}

// loadLeases loads the leases q selects (leaseSelect's columns), then each kind of child
// with one query, so the cost is four queries whatever the number of leases. every says q
// selects every lease: children are then read by a plain scan, which beats one index probe
// per lease.
func (t *tx) loadLeases(ctx context.Context, q string, args []any, every bool) ([]climate.Lease, error) {
	rows, err := t.q.Query(ctx, q, args...)
	if err != nil {
		return nil, dbError(err)
	}
	var leases []climate.Lease
	index := map[string]int{}
	for rows.Next() {
		var l climate.Lease
		var updated, retryUntil *time.Time
		if err := rows.Scan(&l.ID, &l.Name, &l.UserID, &l.ProjectID, &l.TrustID, &l.Start, &l.End, &l.Status, &l.Degraded, &l.CreatedAt, &updated,
			&l.Type, &retryUntil, &l.Priority, &l.MaxRetries, &l.Retries, &l.Preemptible, &l.OnPreempt); err != nil {
			rows.Close()
			return nil, dbError(err)
		}
		l.Start, l.End, l.CreatedAt, l.UpdatedAt = fromTS(l.Start), fromTS(l.End), fromTS(l.CreatedAt), fromNullTS(updated)
		l.RetryUntil = fromNullTS(retryUntil)
		index[l.ID] = len(leases)
		leases = append(leases, l)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, dbError(err)
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
		in, childArgs = " WHERE lease_id = ANY($1)", []any{ids}
	}
	resIndex := map[string][2]int{} // reservation id → lease index, reservation index
	rows, err = t.q.Query(ctx, `SELECT id, lease_id, resource_type, status, min_count, max_count, hypervisor_properties,
		resource_properties, before_end, network_id, amount, required_floatingips, vcpus, memory_mb, disk_gb, affinity,
		server_group_id, missing_resources, resources_changed, created_at, updated_at
		FROM reservations`+in+` ORDER BY created_at, id`, childArgs...)
	if err != nil {
		return nil, dbError(err)
	}
	for rows.Next() {
		var r climate.Reservation
		var updated *time.Time
		var required string
		if err := rows.Scan(&r.ID, &r.LeaseID, &r.ResourceType, &r.Status, &r.Min, &r.Max, &r.HypervisorProperties,
			&r.ResourceProperties, &r.BeforeEnd, &r.NetworkID, &r.Amount, &required,
			&r.Size.VCPUs, &r.Size.MemoryMB, &r.Size.DiskGB, &r.Affinity, &r.ServerGroupID,
			&r.MissingResources, &r.ResourcesChanged, &r.CreatedAt, &updated); err != nil {
			rows.Close()
			return nil, dbError(err)
		}
		if r.RequiredFloatingIPs, err = decodeAddresses(required); err != nil {
			rows.Close()
			return nil, err
		}
		r.CreatedAt, r.UpdatedAt = fromTS(r.CreatedAt), fromNullTS(updated)
		li := index[r.LeaseID]
		resIndex[r.ID] = [2]int{li, len(leases[li].Reservations)}
		leases[li].Reservations = append(leases[li].Reservations, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, dbError(err)
	}

	rows, err = t.q.Query(ctx, `SELECT `+allocationColumns+`
		FROM allocations`+in+` ORDER BY resource_id, start_at, id`, childArgs...)
	if err != nil {
		return nil, dbError(err)
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
		return nil, dbError(err)
	}

	rows, err = t.q.Query(ctx, `SELECT `+eventColumns+`
		FROM events`+in+` ORDER BY created_at, id`, childArgs...)
	if err != nil {
		return nil, dbError(err)
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
	return leases, dbError(rows.Err())
}

type scanner interface{ Scan(...any) error }

// allocationColumns are what scanAllocation reads.
const allocationColumns = `id, reservation_id, lease_id, resource_id, start_at, end_at, slots, vcpus, memory_mb, disk_gb, preemptible`

func scanAllocation(s scanner) (climate.Allocation, error) {
	var a climate.Allocation
	if err := s.Scan(&a.ID, &a.ReservationID, &a.LeaseID, &a.ResourceID, &a.Start, &a.End,
		&a.Slots, &a.Size.VCPUs, &a.Size.MemoryMB, &a.Size.DiskGB, &a.Preemptible); err != nil {
		return a, dbError(err)
	}
	a.Start, a.End = fromTS(a.Start), fromTS(a.End)
	return a, nil
}

// InsertLease writes a lease and all its children. Children are written under their
// enclosing lease and reservation, whatever their own LeaseID and ReservationID say.
func (t *tx) InsertLease(ctx context.Context, l *climate.Lease) error {
	if err := t.writable(); err != nil {
		return err
	}
	// One round trip for the lease and all its children (a pgx batch; the first error
	// stops it). ON CONFLICT DO NOTHING reports a duplicate without aborting the
	// transaction, as the SQLite store leaves it usable.
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO leases (id, name, user_id, project_id, trust_id, start_at, end_at, status, degraded, created_at, updated_at,
		lease_type, retry_until, priority, max_retries, retries, preemptible, on_preempt)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18) ON CONFLICT (id) DO NOTHING`,
		l.ID, l.Name, l.UserID, l.ProjectID, l.TrustID, ts(l.Start), ts(l.End), l.Status, l.Degraded, ts(l.CreatedAt), nullTS(l.UpdatedAt),
		l.Type, nullTS(l.RetryUntil), l.Priority, l.MaxRetries, l.Retries, l.Preemptible, l.OnPreempt).Exec(inserted("Lease", l.ID))
	for _, r := range l.Reservations {
		queueReservation(b, l.ID, r)
		for _, a := range r.Allocations {
			queueAllocation(b, l.ID, r.ID, a)
		}
	}
	for _, e := range l.Events {
		queueEvent(b, l.ID, e)
	}
	return t.send(ctx, b)
}

// send runs a batch and returns its first error (a callback's included).
func (t *tx) send(ctx context.Context, b *pgx.Batch) error {
	return dbError(t.q.SendBatch(ctx, b).Close())
}

// inserted is the callback of an INSERT … ON CONFLICT DO NOTHING: no row means the id
// was taken.
func inserted(what, id string) func(pgconn.CommandTag) error {
	return func(tag pgconn.CommandTag) error {
		if tag.RowsAffected() == 0 {
			return climate.Errorf(climate.CodeConflict, "%s %s already exists", what, id)
		}
		return nil
	}
}

func queueReservation(b *pgx.Batch, leaseID string, r climate.Reservation) {
	b.Queue(`INSERT INTO reservations (id, lease_id, resource_type, status, min_count, max_count,
		hypervisor_properties, resource_properties, before_end, network_id, amount, required_floatingips,
		vcpus, memory_mb, disk_gb, affinity, server_group_id,
		missing_resources, resources_changed, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21)
		ON CONFLICT (id) DO NOTHING`,
		r.ID, leaseID, r.ResourceType, r.Status, r.Min, r.Max, r.HypervisorProperties, r.ResourceProperties, r.BeforeEnd,
		r.NetworkID, r.Amount, encodeAddresses(r.RequiredFloatingIPs),
		r.Size.VCPUs, r.Size.MemoryMB, r.Size.DiskGB, r.Affinity, r.ServerGroupID,
		r.MissingResources, r.ResourcesChanged, ts(r.CreatedAt), nullTS(r.UpdatedAt)).Exec(inserted("Reservation", r.ID))
}

// queueAllocation names its conflict target: ON CONFLICT without one would make the
// deferred exclusion constraints arbiters, which PostgreSQL refuses.
func queueAllocation(b *pgx.Batch, leaseID, reservationID string, a climate.Allocation) {
	b.Queue(`INSERT INTO allocations (`+allocationColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT (id) DO NOTHING`,
		a.ID, reservationID, leaseID, a.ResourceID, ts(a.Start), ts(a.End),
		a.Slots, a.Size.VCPUs, a.Size.MemoryMB, a.Size.DiskGB, a.Preemptible).Exec(inserted("Allocation", a.ID))
}

func queueEvent(b *pgx.Batch, leaseID string, e climate.Event) {
	b.Queue(`INSERT INTO events (id, lease_id, event_type, time, status, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (id) DO NOTHING`,
		e.ID, leaseID, e.Type, ts(e.Time), e.Status, ts(e.CreatedAt), nullTS(e.UpdatedAt)).Exec(inserted("Event", e.ID))
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
	// The writes go in one batch, in the order they were made one by one before: one
	// round trip after the read.
	b := &pgx.Batch{}
	b.Queue(`UPDATE leases SET name = $1, user_id = $2, project_id = $3, trust_id = $4, start_at = $5, end_at = $6,
		status = $7, degraded = $8, created_at = $9, updated_at = $10, lease_type = $11, retry_until = $12, priority = $13,
		max_retries = $14, retries = $15, preemptible = $16, on_preempt = $17 WHERE id = $18`,
		l.Name, l.UserID, l.ProjectID, l.TrustID, ts(l.Start), ts(l.End), l.Status, l.Degraded, ts(l.CreatedAt), nullTS(l.UpdatedAt),
		l.Type, nullTS(l.RetryUntil), l.Priority, l.MaxRetries, l.Retries, l.Preemptible, l.OnPreempt, l.ID)

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
			queueReservation(b, l.ID, r)
		} else if !reflect.DeepEqual(old, r) { // both normalized, Allocations nil
			b.Queue(`UPDATE reservations SET resource_type = $1, status = $2, min_count = $3, max_count = $4,
				hypervisor_properties = $5, resource_properties = $6, before_end = $7, network_id = $8, amount = $9,
				required_floatingips = $10, vcpus = $11, memory_mb = $12, disk_gb = $13, affinity = $14, server_group_id = $15,
				missing_resources = $16, resources_changed = $17, created_at = $18, updated_at = $19 WHERE id = $20`,
				r.ResourceType, r.Status, r.Min, r.Max, r.HypervisorProperties, r.ResourceProperties, r.BeforeEnd,
				r.NetworkID, r.Amount, encodeAddresses(r.RequiredFloatingIPs),
				r.Size.VCPUs, r.Size.MemoryMB, r.Size.DiskGB, r.Affinity, r.ServerGroupID,
				r.MissingResources, r.ResourcesChanged, r.CreatedAt, nullTS(r.UpdatedAt), r.ID)
		}
		delete(oldRes, r.ID)
		for _, a := range allocs {
			a = normAllocation(l.ID, r.ID, a)
			if old, had := oldAlloc[a.ID]; !had {
				queueAllocation(b, l.ID, r.ID, a)
			} else if old != a {
				b.Queue(`UPDATE allocations SET reservation_id = $1, resource_id = $2, start_at = $3, end_at = $4,
					slots = $5, vcpus = $6, memory_mb = $7, disk_gb = $8, preemptible = $9 WHERE id = $10`,
					a.ReservationID, a.ResourceID, a.Start, a.End,
					a.Slots, a.Size.VCPUs, a.Size.MemoryMB, a.Size.DiskGB, a.Preemptible, a.ID)
			}
			delete(oldAlloc, a.ID)
		}
	}
	for _, e := range l.Events {
		e = normEvent(l.ID, e)
		old, had := oldEv[e.ID]
		e.ClaimedBy = old.ClaimedBy // the claim is written by the claimer only
		if !had {
			queueEvent(b, l.ID, e)
		} else if old != e {
			// The claim belongs to whoever holds the event; it ends only when the event
			// leaves IN_PROGRESS.
			endClaim := ``
			if e.Status != climate.EventInProgress {
				endClaim = `, claimed_by = NULL, claimed_until = NULL`
			}
			b.Queue(`UPDATE events SET event_type = $1, time = $2, status = $3,
				created_at = $4, updated_at = $5`+endClaim+` WHERE id = $6`,
				e.Type, e.Time, e.Status, e.CreatedAt, nullTS(e.UpdatedAt), e.ID)
		}
		delete(oldEv, e.ID)
	}

	// What is left in the old maps is absent from l.
	queueDeletes(b, "allocations", keys(oldAlloc))
	queueDeletes(b, "reservations", keys(oldRes))
	queueDeletes(b, "events", keys(oldEv))
	return t.send(ctx, b)
}

// queueDeletes deletes rows of table by id with one statement.
func queueDeletes(b *pgx.Batch, table string, ids []string) {
	if len(ids) > 0 {
		b.Queue(`DELETE FROM `+table+` WHERE id = ANY($1)`, ids)
	}
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
	r.CreatedAt, r.UpdatedAt = ts(r.CreatedAt), normTS(r.UpdatedAt)
	if len(r.RequiredFloatingIPs) == 0 {
		r.RequiredFloatingIPs = nil
	}
	return r
}

// encodeAddresses is a reservation's required floating IPs as stored: a JSON array, "[]"
// for none (nil included).
func encodeAddresses(addrs []string) string {
	if len(addrs) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(addrs) // cannot fail for strings
	return string(b)
}

// decodeAddresses reads what encodeAddresses wrote; none comes back nil.
func decodeAddresses(s string) ([]string, error) {
	var addrs []string
	if err := json.Unmarshal([]byte(s), &addrs); err != nil {
		return nil, dbError(fmt.Errorf("required_floatingips %q: %w", s, err))
	}
	if len(addrs) == 0 {
		return nil, nil
	}
	return addrs, nil
}

func normAllocation(leaseID, reservationID string, a climate.Allocation) climate.Allocation {
	a.LeaseID, a.ReservationID = leaseID, reservationID
	a.Start, a.End = ts(a.Start), ts(a.End)
	return a
}

func normEvent(leaseID string, e climate.Event) climate.Event {
	e.LeaseID = leaseID
	e.Time, e.CreatedAt, e.UpdatedAt = ts(e.Time), ts(e.CreatedAt), normTS(e.UpdatedAt)
	return e
}

// normTS is ts for a nullable time: the zero time stays zero.
func normTS(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return ts(t)
}

// DeleteLease deletes a lease; foreign keys cascade to its children in this transaction.
func (t *tx) DeleteLease(ctx context.Context, id string) error {
	if err := t.writable(); err != nil {
		return err
	}
	tag, err := t.q.Exec(ctx, `DELETE FROM leases WHERE id = $1`, id)
	if err != nil {
		return dbError(err)
	}
	if tag.RowsAffected() == 0 {
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
	var rows pgx.Rows
	var err error
	if t.write && len(f.ResourceIDs) > 0 {
		// A write transaction reads a resource's allocations to re-check it: it locks the
		// resource first, in the same round trip, and holds it to commit (see doc.go).
		b := &pgx.Batch{}
		b.Queue(lockResources, f.ResourceIDs, t.schema+"/")
		b.Queue(q, args...)
		br := t.q.SendBatch(ctx, b)
		defer br.Close()
		if _, err := br.Exec(); err != nil {
			return nil, dbError(err)
		}
		rows, err = br.Query()
	} else {
		rows, err = t.q.Query(ctx, q, args...)
	}
	if err != nil {
		return nil, dbError(err)
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
	return out, dbError(rows.Err())
}

// lockResources takes a transaction-scoped advisory lock on each resource ($1), keyed by
// the installation's schema ($2) and the id, in key order so that two writers never wait
// for each other crosswise. The sorted subquery (DISTINCT keeps it from being flattened)
// fixes the order the locks are taken in.
const lockResources = `SELECT count(pg_advisory_xact_lock(k)) FROM
	(SELECT DISTINCT hashtextextended($2 || r, 0) AS k FROM unnest($1::text[]) AS r ORDER BY k) AS locks`

// allocationQuery builds ListAllocations' query for f (whose ResourceIDs is not empty).
func allocationQuery(f climate.AllocationFilter) (string, []any) {
	var where []string
	var args []any
	add := func(cond string, arg any) {
		args = append(args, arg)
		where = append(where, strings.ReplaceAll(cond, "?", "$"+strconv.Itoa(len(args))))
	}
	if f.ResourceIDs != nil {
		add("resource_id = ANY(?)", f.ResourceIDs) // one parameter however many ids
	}
	if f.LeaseID != "" {
		add("lease_id = ?", f.LeaseID)
	}
	if f.ReservationID != "" {
		add("reservation_id = ?", f.ReservationID)
	}
	if f.ExcludeLeaseID != "" {
		add("lease_id <> ?", f.ExcludeLeaseID)
	}
	if !f.From.IsZero() {
		add("end_at > ?", ts(f.From))
	}
	if !f.To.IsZero() {
		add("start_at < ?", ts(f.To))
	}
	q := `SELECT ` + allocationColumns + ` FROM allocations`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	return q + " ORDER BY resource_id, start_at, id", args
}
