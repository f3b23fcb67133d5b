package sqlite

import (
	"context"
	"database/sql"
	"slices"
	"time"

	"climate"
)

const maintenanceColumns = `id, host_id, start_at, end_at, reason, created_at`

func maintenanceNotFound(id string) error {
	return climate.Errorf(climate.CodeNotFound, "Object with {'maintenance_id': '%s'} not found", id)
}

// InsertMaintenance records a window of an existing host and moves the inventory
// revision (PostgreSQL bumps by trigger).
func (t *tx) InsertMaintenance(ctx context.Context, m *climate.Maintenance) error {
	if err := t.writable(); err != nil {
		return err
	}
	res, err := t.q.ExecContext(ctx, `INSERT INTO maintenances (`+maintenanceColumns+`)
		SELECT ?, id, ?, ?, ?, ? FROM hosts WHERE id = ?`,
		m.ID, micros(m.Start), nullMicros(m.End), m.Reason, micros(m.CreatedAt), m.HostID)
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
		return hostNotFound(m.HostID)
	}
	return t.bumpInventory(ctx)
}

// GetMaintenance returns one window.
func (t *tx) GetMaintenance(ctx context.Context, id string) (*climate.Maintenance, error) {
	ms, err := t.loadMaintenances(ctx, `WHERE id = ?`, id)
	if err != nil {
		return nil, err
	}
	if len(ms) == 0 {
		return nil, maintenanceNotFound(id)
	}
	return &ms[0], nil
}

// ListMaintenances returns the windows matching f by start, then id.
func (t *tx) ListMaintenances(ctx context.Context, f climate.MaintenanceFilter) ([]climate.Maintenance, error) {
	where, args := `WHERE 1 = 1`, []any{}
	if f.HostID != "" {
		where += ` AND host_id = ?`
		args = append(args, f.HostID)
	}
	if !f.From.IsZero() {
		where += ` AND (end_at IS NULL OR end_at > ?)`
		args = append(args, micros(f.From))
	}
	return t.loadMaintenances(ctx, where, args...)
}

func (t *tx) loadMaintenances(ctx context.Context, where string, args ...any) ([]climate.Maintenance, error) {
	rows, err := t.q.QueryContext(ctx, `SELECT `+maintenanceColumns+` FROM maintenances `+where+` ORDER BY start_at, id`, args...)
	if err != nil {
		return nil, internal(err)
	}
	defer rows.Close()
	var out []climate.Maintenance
	for rows.Next() {
		var m climate.Maintenance
		var start, created int64
		var end sql.NullInt64
		if err := rows.Scan(&m.ID, &m.HostID, &start, &end, &m.Reason, &created); err != nil {
			return nil, internal(err)
		}
		m.Start, m.End, m.CreatedAt = fromMicros(start), fromNullMicros(end), fromMicros(created)
		out = append(out, m)
	}
	return out, internal(rows.Err())
}

// DeleteMaintenance deletes a window and moves the inventory revision.
func (t *tx) DeleteMaintenance(ctx context.Context, id string) error {
	if err := t.writable(); err != nil {
		return err
	}
	res, err := t.q.ExecContext(ctx, `DELETE FROM maintenances WHERE id = ?`, id)
	if err != nil {
		return internal(err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		if err != nil {
			return internal(err)
		}
		return maintenanceNotFound(id)
	}
	return t.bumpInventory(ctx)
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
