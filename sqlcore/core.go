// Package sqlcore is what Climate's two SQL stores, sqlite and postgres, have in common:
// the row mapping (which columns a record reads and writes, how a row becomes a record),
// the query shapes (filters, orders, the four queries that load leases with all their
// children, the diff that writes only a lease's changed children) and the reads and
// writes whose SQL is the same on both databases.
//
// It is written against a Querier, a transaction's Query, QueryRow and Exec over
// database/sql or pgx, and a Dialect, which holds what the two SQL dialects write
// differently: placeholders ('?' or '$n'), times (integer microseconds or timestamptz),
// list parameters (a JSON array read by json_each or an array read by ANY) and how a
// database error is reported. Queries here are written once with '?' placeholders; the
// PostgreSQL querier numbers them (Rebind), once per query text.
//
// Each store keeps what truly differs: its dialect, its concurrency (SQLite's single
// writer, group commit and prepared statement cache; PostgreSQL's advisory locks, pgx
// batches and deferred revision triggers), its own statements where the databases
// differ, and its migrations. A store's transaction embeds Tx, so the methods here serve
// climate.Tx unless the store defines its own.
package sqlcore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Rows is a query's result set, as database/sql and pgx both have it.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// Row is QueryRow's result: its Scan returns an error matching sql.ErrNoRows when there
// is no row (pgx.ErrNoRows does).
type Row interface {
	Scan(dest ...any) error
}

// Querier runs statements in one transaction. Query texts use '?' placeholders.
type Querier interface {
	Query(ctx context.Context, query string, args ...any) (Rows, error)
	QueryRow(ctx context.Context, query string, args ...any) Row
	// Exec returns the number of rows the statement changed.
	Exec(ctx context.Context, query string, args ...any) (int64, error)
}

// Dialect is what the two SQL dialects write differently.
type Dialect struct {
	// Time and NullTime encode a time parameter; NullTime gives NULL for the zero time.
	// Times are read back with ScanTime, whatever their encoding.
	Time     func(time.Time) any
	NullTime func(time.Time) any
	// List encodes a list parameter for the condition InList writes.
	List func([]string) any
	// InList follows a column to say "is in the list parameter" (one '?').
	InList string
	// False is the condition "boolean column is false", with %s for the column.
	False string
	// AllocationOrder orders ListAllocations' rows (resource, start, id).
	AllocationOrder string
	// Err reports an unexpected database error (a *climate.Error is returned as it is).
	Err func(error) error
	// ErrReadOnly is the error of a write in a read-only transaction.
	ErrReadOnly error
	// BumpInventory is run after an inventory change when the database does not count
	// them itself ("" when triggers do).
	BumpInventory string
}

// Tx is the shared part of a store's transaction.
type Tx struct {
	Q     Querier
	D     *Dialect
	Write bool
}

// Writable returns an error unless t is a write transaction.
func (t *Tx) Writable() error {
	if !t.Write {
		return t.D.ErrReadOnly
	}
	return nil
}

// BumpInventory moves the inventory revision, when the database does not do it itself.
func (t *Tx) BumpInventory(ctx context.Context) error {
	if t.D.BumpInventory == "" {
		return nil
	}
	_, err := t.Q.Exec(ctx, t.D.BumpInventory)
	return t.D.Err(err)
}

// IsNoRows reports whether err says QueryRow found no row.
func IsNoRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }

// Time scans a stored time: integer microseconds since the epoch (SQLite) or a
// timestamp (PostgreSQL), in UTC; NULL is the zero time.
type Time time.Time

// ScanTime is the scan destination that stores a time read into *p.
func ScanTime(p *time.Time) *Time { return (*Time)(p) }

// Scan implements sql.Scanner, which database/sql and pgx both call.
func (t *Time) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*t = Time{}
	case int64:
		*t = Time(time.UnixMicro(v).UTC())
	case time.Time:
		*t = Time(v.UTC())
	default:
		return fmt.Errorf("sqlcore: cannot read %T as a time", src)
	}
	return nil
}

// Norm returns t as a store gives it back: UTC, whole microseconds (the zero time stays
// zero), so that comparing a record with the stored one tells whether it changed.
func Norm(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC().Truncate(time.Microsecond)
}

// affected turns the outcome of an Exec that must have changed a row into an error:
// notFound's when it changed none.
func (t *Tx) affected(n int64, err error, notFound func() error) error {
	if err != nil {
		return t.D.Err(err)
	}
	if n == 0 {
		return notFound()
	}
	return nil
}

// A Mapping maps a row onto a record: it returns the scan destinations of a row's
// columns in *v, and what must run after each scan to finish *v (nil for nothing). A
// query's rows are all scanned into one record through the same destinations, which are
// made once (the scan's arguments escape through the Rows interface: made per row, they
// would cost an allocation per row). Every destination is written by every scan, and
// after sets whatever it sets on every row, so nothing of one row survives in the next.
type Mapping[T any] func(v *T) (dest []any, after func() error)

// list runs q and reads each row into a record with m.
func list[T any](ctx context.Context, t *Tx, m Mapping[T], q string, args ...any) ([]T, error) {
	rows, err := t.Q.Query(ctx, q, args...)
	if err != nil {
		return nil, t.D.Err(err)
	}
	return Collect(t.D, rows, m)
}

// Collect reads rows into records with m, and closes them.
func Collect[T any](d *Dialect, rows Rows, m Mapping[T]) ([]T, error) {
	var out []T
	if err := Each(d, rows, m, func(v *T) { out = append(out, *v) }); err != nil {
		return nil, err
	}
	return out, nil
}

// Each reads rows, one after the other, into one record with m and calls fn with it;
// it closes rows. fn copies what it keeps: the next row overwrites the record.
func Each[T any](d *Dialect, rows Rows, m Mapping[T], fn func(*T)) error {
	defer rows.Close()
	var v T
	dest, after := m(&v)
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return d.Err(err)
		}
		if after != nil {
			if err := after(); err != nil {
				return d.Err(err)
			}
		}
		fn(&v)
	}
	return d.Err(rows.Err())
}

// each runs q and calls fn with each row, read into one record with m.
func each[T any](ctx context.Context, t *Tx, m Mapping[T], fn func(*T), q string, args ...any) error {
	rows, err := t.Q.Query(ctx, q, args...)
	if err != nil {
		return t.D.Err(err)
	}
	return Each(t.D, rows, m, fn)
}

// first is the first of a list's records, or notFound's error when it has none.
func first[T any](records []T, err error, notFound func() error) (*T, error) {
	if err != nil {
		return nil, err
	}
	if len(records) == 0 {
		return nil, notFound()
	}
	return &records[0], nil
}
