package sqlite

import (
	"context"

	"climate"
	"climate/sqlcore"
)

// The lease reads, ListAllocations and DeleteLease are sqlcore's.

// InsertLease writes a lease and all its children. Children are written under their
// enclosing lease and reservation, whatever their own LeaseID and ReservationID say.
func (t *tx) InsertLease(ctx context.Context, l *climate.Lease) error {
	if err := t.Writable(); err != nil {
		return err
	}
	_, err := t.q.ExecContext(ctx, sqlcore.InsertLease, dialect.LeaseArgs(l)...)
	if isUnique(err) {
		return climate.Errorf(climate.CodeConflict, "Lease %s already exists", l.ID)
	}
	if err != nil {
		return internal(err)
	}
	for i := range l.Reservations {
		r := &l.Reservations[i]
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
// per rowsPerInsert rows, a statement costing about as much as a row, binding what the
// rows share once (sharedValues).
func (t *tx) insertRows(ctx context.Context, table, columns string, width int, args []any) error {
	for len(args) > 0 {
		n := min(len(args)/width, rowsPerInsert)
		values, bound := sharedValues(width, n, args[:n*width])
		if _, err := t.q.ExecContext(ctx, `INSERT INTO `+table+` (`+columns+`) VALUES `+values, bound...); err != nil {
			return err
		}
		args = args[n*width:]
	}
	return nil
}

func (t *tx) insertReservation(ctx context.Context, leaseID string, r *climate.Reservation) error {
	_, err := t.q.ExecContext(ctx, sqlcore.InsertReservation, dialect.ReservationArgs(leaseID, r)...)
	if isUnique(err) {
		return climate.Errorf(climate.CodeConflict, "Reservation %s already exists", r.ID)
	}
	return internal(err)
}

// insertAllocations inserts a reservation's allocations.
func (t *tx) insertAllocations(ctx context.Context, leaseID, reservationID string, as []climate.Allocation) error {
	args := make([]any, 0, 11*len(as))
	for i := range as {
		args = dialect.AppendAllocationArgs(args, leaseID, reservationID, &as[i])
	}
	err := t.insertRows(ctx, "allocations", sqlcore.AllocationColumns, 11, args)
	if isUnique(err) {
		return climate.Errorf(climate.CodeConflict, "An allocation of reservation %s already exists", reservationID)
	}
	return internal(err)
}

// insertEvents inserts a lease's events.
func (t *tx) insertEvents(ctx context.Context, leaseID string, es []climate.Event) error {
	args := make([]any, 0, 7*len(es))
	for i := range es {
		args = dialect.AppendEventArgs(args, leaseID, &es[i])
	}
	err := t.insertRows(ctx, "events", sqlcore.EventInsertColumns, 7, args)
	if isUnique(err) {
		return climate.Errorf(climate.CodeConflict, "An event of lease %s already exists", leaseID)
	}
	return internal(err)
}

// UpdateLease writes the lease row and syncs its children by id, writing only those that
// changed (sqlcore.SyncLease), each statement at once.
func (t *tx) UpdateLease(ctx context.Context, l *climate.Lease) error {
	if err := t.Writable(); err != nil {
		return err
	}
	cur, err := t.GetLease(ctx, l.ID)
	if err != nil {
		return err
	}
	return dialect.SyncLease(cur, l, leaseWriter{t, ctx})
}

// leaseWriter runs SyncLease's writes as they come.
type leaseWriter struct {
	t   *tx
	ctx context.Context
}

func (w leaseWriter) Exec(query string, args ...any) error {
	_, err := w.t.q.ExecContext(w.ctx, query, args...)
	return internal(err)
}

func (w leaseWriter) InsertReservation(leaseID string, r *climate.Reservation) error {
	return w.t.insertReservation(w.ctx, leaseID, r)
}

func (w leaseWriter) InsertAllocation(leaseID, reservationID string, a *climate.Allocation) error {
	return w.t.insertAllocations(w.ctx, leaseID, reservationID, []climate.Allocation{*a})
}

func (w leaseWriter) InsertEvent(leaseID string, e *climate.Event) error {
	return w.t.insertEvents(w.ctx, leaseID, []climate.Event{*e})
}

func (w leaseWriter) DeleteIDs(table string, ids []string) error {
	q, arg := dialect.DeleteIDs(table, ids)
	return w.Exec(q, arg)
}
