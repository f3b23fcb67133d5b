package sqlite

import (
	"context"
	"slices"
	"time"

	"climate"
	"climate/sqlcore"
)

// The maintenance reads and DeleteMaintenance are sqlcore's.

// InsertMaintenance records a window of an existing host and moves the inventory
// revision (PostgreSQL bumps by trigger).
func (t *tx) InsertMaintenance(ctx context.Context, m *climate.Maintenance) error {
	if err := t.Writable(); err != nil {
		return err
	}
	res, err := t.q.ExecContext(ctx, sqlcore.InsertMaintenance, dialect.MaintenanceArgs(m)...)
	if isUnique(err) {
		return climate.Errorf(climate.CodeConflict, "Maintenance %s already exists", m.ID)
	}
	if err != nil {
		return internal(err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		if err != nil {
			return internal(err)
		}
		return sqlcore.HostNotFound(m.HostID)
	}
	return t.BumpInventory(ctx)
}

// degradedLeasesQuery reads the partial index leases_degraded (0013_maintenance.sql): its
// WHERE must imply the index's.
const degradedLeasesQuery = `SELECT id FROM leases WHERE degraded = 1 AND end_at > ?`

// DegradedLeases returns the ids of degraded leases ending after endAfter (a partial
// index holds exactly the degraded leases).
func (t *tx) DegradedLeases(ctx context.Context, endAfter time.Time) ([]string, error) {
	rows, err := t.q.QueryContext(ctx, degradedLeasesQuery, micros(endAfter))
	if err != nil {
		return nil, internal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, internal(err)
		}
		out = append(out, id)
	}
	slices.Sort(out) // here: ORDER BY id would read the primary key's index instead
	return out, internal(rows.Err())
}
