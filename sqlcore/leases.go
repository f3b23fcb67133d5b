package sqlcore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"climate"
)

// LeaseColumns are the columns of a lease row, in the order LeaseArgs gives them.
const LeaseColumns = `id, name, user_id, project_id, trust_id, start_at, end_at, status, degraded, created_at, updated_at,
	lease_type, retry_until, priority, max_retries, retries, preemptible, on_preempt`

// ReservationColumns are the columns of a reservation row, in ReservationArgs' order.
const ReservationColumns = `id, lease_id, resource_type, status, min_count, max_count,
	hypervisor_properties, resource_properties, before_end, network_id, amount, required_floatingips,
	vcpus, memory_mb, disk_gb, affinity, server_group_id,
	missing_resources, resources_changed, created_at, updated_at`

// AllocationColumns are the columns of an allocation row, in AllocationArgs' order.
const AllocationColumns = `id, reservation_id, lease_id, resource_id, start_at, end_at, slots, vcpus, memory_mb, disk_gb, preemptible`

// EventColumns are the columns ScanEvent reads, in order.
const EventColumns = `id, lease_id, event_type, time, status, claimed_by, created_at, updated_at`

// EventInsertColumns are the columns of a new event row, in EventArgs' order.
const EventInsertColumns = `id, lease_id, event_type, time, status, created_at, updated_at`

// Inserts of one row of each, with '?' placeholders.
var (
	InsertLease       = `INSERT INTO leases (` + LeaseColumns + `) VALUES ` + Placeholders(18)
	InsertReservation = `INSERT INTO reservations (` + ReservationColumns + `) VALUES ` + Placeholders(21)
	InsertAllocation  = `INSERT INTO allocations (` + AllocationColumns + `) VALUES ` + Placeholders(11)
	InsertEvent       = `INSERT INTO events (` + EventInsertColumns + `) VALUES ` + Placeholders(7)
)

// Placeholders is a row of n '?' placeholders: "(?, ?, …)".
func Placeholders(n int) string {
	return "(" + strings.TrimSuffix(strings.Repeat("?, ", n), ", ") + ")"
}

// ValuesRows is the VALUES list of a multi-row insert: rows groups of width placeholders.
func ValuesRows(width, rows int) string {
	one := Placeholders(width)
	return one + strings.Repeat(", "+one, rows-1)
}

// LeaseArgs are l's LeaseColumns.
func (d *Dialect) LeaseArgs(l *climate.Lease) []any {
	return []any{l.ID, l.Name, l.UserID, l.ProjectID, l.TrustID, d.Time(l.Start), d.Time(l.End), l.Status, l.Degraded,
		d.Time(l.CreatedAt), d.NullTime(l.UpdatedAt),
		l.Type, d.NullTime(l.RetryUntil), l.Priority, l.MaxRetries, l.Retries, l.Preemptible, l.OnPreempt}
}

// ReservationArgs are r's ReservationColumns, under lease leaseID.
func (d *Dialect) ReservationArgs(leaseID string, r *climate.Reservation) []any {
	return []any{r.ID, leaseID, r.ResourceType, r.Status, r.Min, r.Max, r.HypervisorProperties, r.ResourceProperties, r.BeforeEnd,
		r.NetworkID, r.Amount, EncodeAddresses(r.RequiredFloatingIPs),
		r.Size.VCPUs, r.Size.MemoryMB, r.Size.DiskGB, nullBool(r.Affinity), r.ServerGroupID,
		r.MissingResources, r.ResourcesChanged, d.Time(r.CreatedAt), d.NullTime(r.UpdatedAt)}
}

// AppendAllocationArgs appends a's AllocationColumns, under the given lease and
// reservation, to args.
func (d *Dialect) AppendAllocationArgs(args []any, leaseID, reservationID string, a *climate.Allocation) []any {
	return append(args, a.ID, reservationID, leaseID, a.ResourceID, d.Time(a.Start), d.Time(a.End),
		a.Slots, a.Size.VCPUs, a.Size.MemoryMB, a.Size.DiskGB, a.Preemptible)
}

// AppendEventArgs appends e's EventInsertColumns, under lease leaseID, to args.
func (d *Dialect) AppendEventArgs(args []any, leaseID string, e *climate.Event) []any {
	return append(args, e.ID, leaseID, e.Type, d.Time(e.Time), e.Status, d.Time(e.CreatedAt), d.NullTime(e.UpdatedAt))
}

// nullBool is a nullable boolean parameter: NULL for nil.
func nullBool(b *bool) any {
	if b == nil {
		return nil
	}
	return *b
}

// EncodeAddresses is a reservation's required floating IPs as stored: a JSON array, "[]"
// for none (nil included).
func EncodeAddresses(addrs []string) string {
	if len(addrs) == 0 {
		return "[]"
	}
	return JSONList(addrs)
}

// JSONList encodes strings as a JSON array.
func JSONList(s []string) string {
	b, _ := json.Marshal(s) // cannot fail for strings
	return string(b)
}

// decodeAddresses reads what EncodeAddresses wrote; none comes back nil.
func decodeAddresses(s string) ([]string, error) {
	var addrs []string
	if err := json.Unmarshal([]byte(s), &addrs); err != nil {
		return nil, fmt.Errorf("required_floatingips %q: %w", s, err)
	}
	if len(addrs) == 0 {
		return nil, nil
	}
	return addrs, nil
}

const leaseSelect = `SELECT ` + LeaseColumns + ` FROM leases`

// LeaseNotFound is the error for lease id missing, in Blazar's words.
func LeaseNotFound(id string) error {
	return climate.Errorf(climate.CodeNotFound, "Object with {'lease_id': '%s'} not found", id)
}

// GetLease returns a lease with its children.
func (t *Tx) GetLease(ctx context.Context, id string) (*climate.Lease, error) {
	leases, err := t.loadLeases(ctx, leaseSelect+" WHERE id = ?", []any{id}, false)
	return first(leases, err, func() error { return LeaseNotFound(id) })
}

// LeaseQueries are GetLease's queries, each with the lease's id as its one argument: the
// lease row, then its reservations, allocations and events. A store that can send them in
// one round trip (PostgreSQL's batch) does, and reads their rows with LoadLease.
var LeaseQueries = [4]string{leaseSelect + " WHERE id = ?", reservationSelect + " WHERE lease_id = ?" + childOrder,
	allocationSelect + " WHERE lease_id = ?" + allocationOrder, eventSelect + " WHERE lease_id = ?" + childOrder}

// LoadLease reads lease id from the rows of LeaseQueries' queries, which next returns in
// their order; CodeNotFound when there is no such lease.
func (d *Dialect) LoadLease(id string, next func() (Rows, error)) (*climate.Lease, error) {
	var b leaseBuilder
	for _, read := range []func(Rows) error{
		func(rows Rows) error { return Each(d, rows, leaseRow, b.lease) },
		func(rows Rows) error { return Each(d, rows, reservationRow, b.reservation) },
		func(rows Rows) error { return Each(d, rows, AllocationRow, b.allocation) },
		func(rows Rows) error { return Each(d, rows, EventRow, b.event) },
	} {
		rows, err := next()
		if err != nil {
			return nil, d.Err(err)
		}
		if err := read(rows); err != nil {
			return nil, err
		}
	}
	return first(b.leases, nil, func() error { return LeaseNotFound(id) })
}

// ListLeases returns the leases matching f with their children.
func (t *Tx) ListLeases(ctx context.Context, f climate.LeaseFilter) ([]climate.Lease, error) {
	q, args := t.D.LeaseQuery(f)
	every := f.ProjectID == "" && f.Name == "" && len(f.Statuses) == 0 && f.After == nil && f.Limit == 0
	return t.loadLeases(ctx, q, args, every)
}

// LeaseQuery builds ListLeases' query for f.
func (d *Dialect) LeaseQuery(f climate.LeaseFilter) (string, []any) {
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
		where, args = append(where, "status"+d.InList), append(args, d.List(statuses))
	}
	if f.After != nil {
		// Keyset paging: the (created_at, id) indexes seek to the page's start.
		where, args = append(where, "(created_at, id) > (?, ?)"), append(args, d.Time(f.After.CreatedAt), f.After.ID)
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

// The children's queries: loadLeases and LeaseQueries add their WHERE, then the order.
const (
	reservationSelect = `SELECT id, lease_id, resource_type, status, min_count, max_count, hypervisor_properties,
		resource_properties, before_end, network_id, amount, required_floatingips, vcpus, memory_mb, disk_gb, affinity,
		server_group_id, missing_resources, resources_changed, created_at, updated_at
		FROM reservations`
	allocationSelect = `SELECT ` + AllocationColumns + ` FROM allocations`
	eventSelect      = `SELECT ` + EventColumns + ` FROM events`
	childOrder       = ` ORDER BY created_at, id`
	allocationOrder  = ` ORDER BY resource_id, start_at, id`
)

// loadLeases loads the leases q selects (leaseSelect's columns), then each kind of child
// with one query, so the cost is four queries whatever the number of leases. every says q
// selects every lease: children are then read by a plain scan, which beats one index probe
// per lease.
func (t *Tx) loadLeases(ctx context.Context, q string, args []any, every bool) ([]climate.Lease, error) {
	d := t.D
	var b leaseBuilder
	if err := each(ctx, t, leaseRow, b.lease, q, args...); err != nil || len(b.leases) == 0 {
		return nil, err
	}
	in, childArgs := "", []any(nil)
	if !every { // one parameter however many ids
		ids := make([]string, len(b.leases))
		for i, l := range b.leases {
			ids[i] = l.ID
		}
		in, childArgs = " WHERE lease_id"+d.InList, []any{d.List(ids)}
	}
	if err := each(ctx, t, reservationRow, b.reservation, reservationSelect+in+childOrder, childArgs...); err != nil {
		return nil, err
	}
	if err := each(ctx, t, AllocationRow, b.allocation, allocationSelect+in+allocationOrder, childArgs...); err != nil {
		return nil, err
	}
	if err := each(ctx, t, EventRow, b.event, eventSelect+in+childOrder, childArgs...); err != nil {
		return nil, err
	}
	return b.leases, nil
}

// leaseBuilder puts leases together from their rows: the leases first, then their
// children, each kind in its query's order.
type leaseBuilder struct {
	leases   []climate.Lease
	index    map[string]int    // lease id → index
	resIndex map[string][2]int // reservation id → lease index, reservation index
}

func (b *leaseBuilder) lease(l *climate.Lease) {
	if b.index == nil {
		b.index, b.resIndex = map[string]int{}, map[string][2]int{}
	}
	b.index[l.ID] = len(b.leases)
	b.leases = append(b.leases, *l)
}

func (b *leaseBuilder) reservation(r *climate.Reservation) {
	li, ok := b.index[r.LeaseID]
	if !ok {
		return
	}
	b.resIndex[r.ID] = [2]int{li, len(b.leases[li].Reservations)}
	b.leases[li].Reservations = append(b.leases[li].Reservations, *r)
}

func (b *leaseBuilder) allocation(a *climate.Allocation) {
	if at, ok := b.resIndex[a.ReservationID]; ok {
		r := &b.leases[at[0]].Reservations[at[1]]
		r.Allocations = append(r.Allocations, *a)
	}
}

func (b *leaseBuilder) event(e *climate.Event) {
	if li, ok := b.index[e.LeaseID]; ok {
		b.leases[li].Events = append(b.leases[li].Events, *e)
	}
}

// leaseRow maps a row of LeaseColumns.
func leaseRow(l *climate.Lease) ([]any, func() error) {
	return []any{&l.ID, &l.Name, &l.UserID, &l.ProjectID, &l.TrustID, ScanTime(&l.Start), ScanTime(&l.End), &l.Status,
		&l.Degraded, ScanTime(&l.CreatedAt), ScanTime(&l.UpdatedAt),
		&l.Type, ScanTime(&l.RetryUntil), &l.Priority, &l.MaxRetries, &l.Retries, &l.Preemptible, &l.OnPreempt}, nil
}

// reservationRow maps a row of ReservationColumns (as loadLeases selects them).
func reservationRow(r *climate.Reservation) ([]any, func() error) {
	var required string
	return []any{&r.ID, &r.LeaseID, &r.ResourceType, &r.Status, &r.Min, &r.Max, &r.HypervisorProperties,
			&r.ResourceProperties, &r.BeforeEnd, &r.NetworkID, &r.Amount, &required,
			&r.Size.VCPUs, &r.Size.MemoryMB, &r.Size.DiskGB, &r.Affinity, &r.ServerGroupID,
			&r.MissingResources, &r.ResourcesChanged, ScanTime(&r.CreatedAt), ScanTime(&r.UpdatedAt)},
		func() (err error) {
			r.RequiredFloatingIPs, err = decodeAddresses(required)
			return err
		}
}

// AllocationRow maps a row of AllocationColumns.
func AllocationRow(a *climate.Allocation) ([]any, func() error) {
	return []any{&a.ID, &a.ReservationID, &a.LeaseID, &a.ResourceID, ScanTime(&a.Start), ScanTime(&a.End),
		&a.Slots, &a.Size.VCPUs, &a.Size.MemoryMB, &a.Size.DiskGB, &a.Preemptible}, nil
}

// EventRow maps a row of EventColumns.
func EventRow(e *climate.Event) ([]any, func() error) {
	var claimedBy sql.NullString
	return []any{&e.ID, &e.LeaseID, &e.Type, ScanTime(&e.Time), &e.Status, &claimedBy, ScanTime(&e.CreatedAt), ScanTime(&e.UpdatedAt)},
		func() error {
			e.ClaimedBy = claimedBy.String
			return nil
		}
}

// LeaseWriter receives the writes that bring a stored lease to its new state, in order
// (SyncLease): the SQLite store runs each at once, the PostgreSQL one queues them in one
// batch. Queries use '?' placeholders.
type LeaseWriter interface {
	// Exec runs (or queues) an UPDATE.
	Exec(query string, args ...any) error
	InsertReservation(leaseID string, r *climate.Reservation) error
	InsertAllocation(leaseID, reservationID string, a *climate.Allocation) error
	InsertEvent(leaseID string, e *climate.Event) error
	// DeleteIDs deletes the rows of table with these ids (not empty).
	DeleteIDs(table string, ids []string) error
}

// SyncLease writes to w what brings cur, the lease as stored, to l: the lease row, then
// only the children that changed. The engine rewrites a lease on every event, and most
// of a large lease (its allocations) is then unchanged.
func (d *Dialect) SyncLease(cur, l *climate.Lease, w LeaseWriter) error {
	err := w.Exec(`UPDATE leases SET name = ?, user_id = ?, project_id = ?, trust_id = ?, start_at = ?, end_at = ?,
		status = ?, degraded = ?, created_at = ?, updated_at = ?, lease_type = ?, retry_until = ?, priority = ?,
		max_retries = ?, retries = ?, preemptible = ?, on_preempt = ? WHERE id = ?`,
		l.Name, l.UserID, l.ProjectID, l.TrustID, d.Time(l.Start), d.Time(l.End), l.Status, l.Degraded, d.Time(l.CreatedAt), d.NullTime(l.UpdatedAt),
		l.Type, d.NullTime(l.RetryUntil), l.Priority, l.MaxRetries, l.Retries, l.Preemptible, l.OnPreempt, l.ID)
	if err != nil {
		return err
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
			if err := w.InsertReservation(l.ID, &r); err != nil {
				return err
			}
		} else if !reflect.DeepEqual(old, r) { // both normalized, Allocations nil
			if err := w.Exec(`UPDATE reservations SET resource_type = ?, status = ?, min_count = ?, max_count = ?,
				hypervisor_properties = ?, resource_properties = ?, before_end = ?, network_id = ?, amount = ?,
				required_floatingips = ?, vcpus = ?, memory_mb = ?, disk_gb = ?, affinity = ?, server_group_id = ?,
				missing_resources = ?, resources_changed = ?, created_at = ?, updated_at = ? WHERE id = ?`,
				r.ResourceType, r.Status, r.Min, r.Max, r.HypervisorProperties, r.ResourceProperties, r.BeforeEnd,
				r.NetworkID, r.Amount, EncodeAddresses(r.RequiredFloatingIPs),
				r.Size.VCPUs, r.Size.MemoryMB, r.Size.DiskGB, nullBool(r.Affinity), r.ServerGroupID,
				r.MissingResources, r.ResourcesChanged, d.Time(r.CreatedAt), d.NullTime(r.UpdatedAt), r.ID); err != nil {
				return err
			}
		}
		delete(oldRes, r.ID)
		for _, a := range allocs {
			a = normAllocation(l.ID, r.ID, a)
			if old, had := oldAlloc[a.ID]; !had {
				if err := w.InsertAllocation(l.ID, r.ID, &a); err != nil {
					return err
				}
			} else if old != a {
				if err := w.Exec(`UPDATE allocations SET reservation_id = ?, resource_id = ?, start_at = ?, end_at = ?,
					slots = ?, vcpus = ?, memory_mb = ?, disk_gb = ?, preemptible = ? WHERE id = ?`,
					a.ReservationID, a.ResourceID, d.Time(a.Start), d.Time(a.End),
					a.Slots, a.Size.VCPUs, a.Size.MemoryMB, a.Size.DiskGB, a.Preemptible, a.ID); err != nil {
					return err
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
			if err := w.InsertEvent(l.ID, &e); err != nil {
				return err
			}
		} else if old != e {
			// The claim belongs to whoever holds the event; it ends only when the event
			// leaves IN_PROGRESS.
			endClaim := ``
			if e.Status != climate.EventInProgress {
				endClaim = `, claimed_by = NULL, claimed_until = NULL`
			}
			if err := w.Exec(`UPDATE events SET event_type = ?, time = ?, status = ?,
				created_at = ?, updated_at = ?`+endClaim+` WHERE id = ?`,
				e.Type, d.Time(e.Time), e.Status, d.Time(e.CreatedAt), d.NullTime(e.UpdatedAt), e.ID); err != nil {
				return err
			}
		}
		delete(oldEv, e.ID)
	}

	// What is left in the old maps is absent from l.
	for _, del := range []struct {
		table string
		ids   []string
	}{{"allocations", keys(oldAlloc)}, {"reservations", keys(oldRes)}, {"events", keys(oldEv)}} {
		if len(del.ids) > 0 {
			if err := w.DeleteIDs(del.table, del.ids); err != nil {
				return err
			}
		}
	}
	return nil
}

// DeleteIDs is the statement and parameter of a deletion of table's rows by id.
func (d *Dialect) DeleteIDs(table string, ids []string) (string, any) {
	return `DELETE FROM ` + table + ` WHERE id` + d.InList, d.List(ids)
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
	r.CreatedAt, r.UpdatedAt = Norm(r.CreatedAt), Norm(r.UpdatedAt)
	if len(r.RequiredFloatingIPs) == 0 {
		r.RequiredFloatingIPs = nil
	}
	return r
}

func normAllocation(leaseID, reservationID string, a climate.Allocation) climate.Allocation {
	a.LeaseID, a.ReservationID = leaseID, reservationID
	a.Start, a.End = Norm(a.Start), Norm(a.End)
	return a
}

func normEvent(leaseID string, e climate.Event) climate.Event {
	e.LeaseID = leaseID
	e.Time, e.CreatedAt, e.UpdatedAt = Norm(e.Time), Norm(e.CreatedAt), Norm(e.UpdatedAt)
	return e
}

// DeleteLease deletes a lease; foreign keys cascade to its children in this transaction.
func (t *Tx) DeleteLease(ctx context.Context, id string) error {
	if err := t.Writable(); err != nil {
		return err
	}
	n, err := t.Q.Exec(ctx, `DELETE FROM leases WHERE id = ?`, id)
	return t.affected(n, err, func() error { return LeaseNotFound(id) })
}

// ListAllocations returns the allocations matching f.
func (t *Tx) ListAllocations(ctx context.Context, f climate.AllocationFilter) ([]climate.Allocation, error) {
	if f.ResourceIDs != nil && len(f.ResourceIDs) == 0 || f.LeaseIDs != nil && len(f.LeaseIDs) == 0 {
		return nil, nil
	}
	q, args := t.D.AllocationQuery(f)
	rows, err := t.Q.Query(ctx, q, args...)
	if err != nil {
		return nil, t.D.Err(err)
	}
	return t.D.ScanAllocations(rows)
}

// ScanAllocations reads rows of AllocationColumns and closes them.
func (d *Dialect) ScanAllocations(rows Rows) ([]climate.Allocation, error) {
	return Collect(d, rows, AllocationRow)
}

// AllocationQuery builds ListAllocations' query for f (whose ResourceIDs and LeaseIDs are
// not empty).
func (d *Dialect) AllocationQuery(f climate.AllocationFilter) (string, []any) {
	var where []string
	var args []any
	if f.ResourceIDs != nil {
		// One parameter however many ids.
		where, args = append(where, "resource_id"+d.InList), append(args, d.List(f.ResourceIDs))
	}
	if f.LeaseIDs != nil {
		where, args = append(where, "lease_id"+d.InList), append(args, d.List(f.LeaseIDs))
	}
	if f.LeaseID != "" {
		where, args = append(where, "lease_id = ?"), append(args, f.LeaseID)
	}
	if f.ReservationID != "" {
		where, args = append(where, "reservation_id = ?"), append(args, f.ReservationID)
	}
	if f.ExcludeLeaseID != "" {
		where, args = append(where, "lease_id <> ?"), append(args, f.ExcludeLeaseID)
	}
	if !f.From.IsZero() {
		where, args = append(where, "end_at > ?"), append(args, d.Time(f.From))
	}
	if !f.To.IsZero() {
		where, args = append(where, "start_at < ?"), append(args, d.Time(f.To))
	}
	q := `SELECT ` + AllocationColumns + ` FROM allocations`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	return q + " ORDER BY " + d.AllocationOrder, args
}
