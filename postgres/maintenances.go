package postgres

import (
	"context"
	"time"

	"climate"
)

const maintenanceColumns = `id, host_id, start_at, end_at, reason, created_at`

func maintenanceNotFound(id string) error {
	return climate.Errorf(climate.CodeNotFound, "Object with {'maintenance_id': '%s'} not found", id)
}

// InsertMaintenance records a window of an existing host; a trigger moves the inventory
// revision.
func (t *tx) InsertMaintenance(ctx context.Context, m *climate.Maintenance) error {
	if err := t.writable(); err != nil {
		return err
	}
	// ON CONFLICT DO NOTHING keeps the transaction usable after a duplicate id; no row
	// and no conflict means no host.
	tag, err := t.q.Exec(ctx, `INSERT INTO maintenances (`+maintenanceColumns+`)
		SELECT $1, id, $2, $3, $4, $5 FROM hosts WHERE id = $6
		ON CONFLICT DO NOTHING`,
		m.ID, ts(m.Start), nullTS(m.End), m.Reason, ts(m.CreatedAt), m.HostID)
	if err != nil {
		return dbError(err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	var taken bool
	if err := t.q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM maintenances WHERE id = $1)`, m.ID).Scan(&taken); err != nil {
		return dbError(err)
	}
	if taken {
		return climate.Errorf(climate.CodeConflict, "Maintenance %s already exists", m.ID)
	}
	return hostNotFound(m.HostID)
}

// GetMaintenance returns one window.
func (t *tx) GetMaintenance(ctx context.Context, id string) (*climate.Maintenance, error) {
	ms, err := t.loadMaintenances(ctx, `WHERE id = $1`, id)
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
	// NULL parameters match everything.
	var host, from any
	if f.HostID != "" {
		host = f.HostID
	}
	if !f.From.IsZero() {
		from = ts(f.From)
	}
	return t.loadMaintenances(ctx, `WHERE ($1::text IS NULL OR host_id = $1) AND ($2::timestamptz IS NULL OR end_at IS NULL OR end_at > $2)`,
		host, from)
}

func (t *tx) loadMaintenances(ctx context.Context, where string, args ...any) ([]climate.Maintenance, error) {
	rows, err := t.q.Query(ctx, `SELECT `+maintenanceColumns+` FROM maintenances `+where+` ORDER BY start_at, id`, args...)
	if err != nil {
		return nil, dbError(err)
	}
	defer rows.Close()
	var out []climate.Maintenance
	for rows.Next() {
		var m climate.Maintenance
		var end *time.Time
		if err := rows.Scan(&m.ID, &m.HostID, &m.Start, &end, &m.Reason, &m.CreatedAt); err != nil {
			return nil, dbError(err)
		}
		m.Start, m.End, m.CreatedAt = fromTS(m.Start), fromNullTS(end), fromTS(m.CreatedAt)
		out = append(out, m)
	}
	return out, dbError(rows.Err())
}

// DeleteMaintenance deletes a window; a trigger moves the inventory revision.
func (t *tx) DeleteMaintenance(ctx context.Context, id string) error {
	if err := t.writable(); err != nil {
		return err
	}
	tag, err := t.q.Exec(ctx, `DELETE FROM maintenances WHERE id = $1`, id)
	if err != nil {
		return dbError(err)
	}
	if tag.RowsAffected() == 0 {
		return maintenanceNotFound(id)
	}
	return nil
}

// DegradedLeases returns the ids of degraded leases ending after endAfter (a partial
// index holds exactly the degraded leases).
func (t *tx) DegradedLeases(ctx context.Context, endAfter time.Time) ([]string, error) {
	rows, err := t.q.Query(ctx, `SELECT id FROM leases WHERE degraded AND end_at > $1 ORDER BY id`, ts(endAfter))
	if err != nil {
		return nil, dbError(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, dbError(err)
		}
		out = append(out, id)
	}
	return out, dbError(rows.Err())
}
