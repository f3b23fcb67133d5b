package postgres

import (
	"context"
	"time"

	"climate"
	"climate/sqlcore"
)

// The maintenance reads and DeleteMaintenance are sqlcore's; a trigger moves the
// inventory revision.

// ON CONFLICT DO NOTHING keeps the transaction usable after a duplicate id; no row and
// no conflict means no host.
var insertMaintenance = sqlcore.Rebind(sqlcore.InsertMaintenance + ` ON CONFLICT DO NOTHING`)

// InsertMaintenance records a window of an existing host.
func (t *tx) InsertMaintenance(ctx context.Context, m *climate.Maintenance) error {
	if err := t.Writable(); err != nil {
		return err
	}
	tag, err := t.q.Exec(ctx, insertMaintenance, dialect.MaintenanceArgs(m)...)
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
	return sqlcore.HostNotFound(m.HostID)
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
