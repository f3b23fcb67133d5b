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
	// InList is the condition "column is in the list parameter", with %s for the column
	// and one '?' for the list.
	InList string
	// False is the condition "boolean column is false", with %s for the column.
	False string
	// AllocationOrder orders ListAllocations' rows (resource, start, id).
	AllocationOrder string
	// Err reports an unexpected database error (a *climate.Error is returned as it is).
	Err func(error) error
	// IsUnique reports whether err is a uniqueness violation.
	IsUnique func(error) bool
	// ErrReadOnly is the error of a write in a read-only transaction.
	ErrReadOnly error
	// BumpInventory is run after an inventory change when the database does not count
	// them itself ("" when triggers do).
	BumpInventory string
}

// in is d's condition "column in the list parameter".
func (d *Dialect) in(column string) string { return fmt.Sprintf(d.InList, column) }

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

// list runs q and reads each row into a record with scan.
func list[T any](ctx context.Context, t *Tx, scan func(Scanner, *T) error, q string, args ...any) ([]T, error) {
	rows, err := t.Q.Query(ctx, q, args...)
	if err != nil {
		return nil, t.D.Err(err)
	}
	return collect(t.D, rows, scan)
}

// collect reads rows into records with scan, and closes them.
func collect[T any](d *Dialect, rows Rows, scan func(Scanner, *T) error) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		var v T
		if err := scan(rows, &v); err != nil {
			return nil, d.Err(err)
		}
		out = append(out, v)
	}
	return out, d.Err(rows.Err())
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
