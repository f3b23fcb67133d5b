package sqlite

import (
	"context"
	"database/sql"
	"strings"

	"climate"
)

const usageColumns = `allocation_id, reservation_id, lease_id, lease_name, project_id, resource_type, resource_id, class, units,
	start_at, end_at, held_from, held_until, rate, cost, closed, created_at, updated_at`

// ListUsage returns the usage records matching f, by lease, reservation, then allocation.
func (t *tx) ListUsage(ctx context.Context, f climate.UsageFilter) ([]climate.UsageRecord, error) {
	var where []string
	var args []any
	add := func(cond string, a ...any) {
		where = append(where, cond)
		args = append(args, a...)
	}
	if f.ProjectID != "" {
		add(`project_id = ?`, f.ProjectID)
	}
	if f.LeaseID != "" {
		add(`lease_id = ?`, f.LeaseID)
	}
	if len(f.LeaseIDs) > 0 {
		add(`lease_id IN (SELECT value FROM json_each(?))`, jsonList(f.LeaseIDs))
	}
	if f.OpenOnly {
		add(`closed = 0`)
	}
	if !f.From.IsZero() {
		add(`end_at > ?`, micros(f.From))
	}
	if !f.To.IsZero() {
		add(`start_at < ?`, micros(f.To))
	}
	if f.AfterLease != "" || f.AfterReservation != "" || f.AfterAllocation != "" {
		add(`(lease_id, reservation_id, allocation_id) > (?, ?, ?)`, f.AfterLease, f.AfterReservation, f.AfterAllocation)
	}
	q := `SELECT ` + usageColumns + ` FROM usage_records`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	q += ` ORDER BY lease_id, reservation_id, allocation_id`
	if f.Limit > 0 {
		q += ` LIMIT ?`
		args = append(args, f.Limit)
	}
	rows, err := t.q.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, internal(err)
	}
	defer rows.Close()
	var out []climate.UsageRecord
	for rows.Next() {
		var u climate.UsageRecord
		var start, end, created, updated int64
		var heldFrom, heldUntil sql.NullInt64
		if err := rows.Scan(&u.AllocationID, &u.ReservationID, &u.LeaseID, &u.LeaseName, &u.ProjectID, &u.ResourceType, &u.ResourceID,
			&u.Class, &u.Units, &start, &end, &heldFrom, &heldUntil, &u.Rate, &u.Cost, &u.Closed, &created, &updated); err != nil {
			return nil, internal(err)
		}
		u.Start, u.End, u.CreatedAt, u.UpdatedAt = fromMicros(start), fromMicros(end), fromMicros(created), fromMicros(updated)
		u.HeldFrom, u.HeldUntil = fromNullMicros(heldFrom), fromNullMicros(heldUntil)
		out = append(out, u)
	}
	return out, internal(rows.Err())
}

// PutUsage inserts or replaces usage records, many rows a statement (each statement
// costs a prepare).
func (t *tx) PutUsage(ctx context.Context, rs []climate.UsageRecord) error {
	if err := t.writable(); err != nil {
		return err
	}
	const perStatement = 50 // 18 parameters a row, well under SQLite's 32,766
	for len(rs) > 0 {
		n := min(len(rs), perStatement)
		args := make([]any, 0, n*18)
		for _, u := range rs[:n] {
			args = append(args, u.AllocationID, u.ReservationID, u.LeaseID, u.LeaseName, u.ProjectID, u.ResourceType, u.ResourceID, u.Class, u.Units,
				micros(u.Start), micros(u.End), nullMicros(u.HeldFrom), nullMicros(u.HeldUntil), u.Rate, u.Cost, u.Closed,
				micros(u.CreatedAt), micros(u.UpdatedAt))
		}
		row := `(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
		q := `INSERT OR REPLACE INTO usage_records (` + usageColumns + `) VALUES ` + row + strings.Repeat(`, `+row, n-1)
		if _, err := t.q.ExecContext(ctx, q, args...); err != nil {
			return internal(err)
		}
		rs = rs[n:]
	}
	return nil
}

// ChargeProject adds to the project's charge and open leases and returns the new totals.
// One writer: the totals are always exact, so they are always returned.
func (t *tx) ChargeProject(ctx context.Context, project string, d climate.ProjectCharge, _ bool) (climate.ProjectCharge, error) {
	var c climate.ProjectCharge
	if err := t.writable(); err != nil {
		return c, err
	}
	err := t.q.QueryRowContext(ctx, `INSERT INTO project_charges (project_id, `+chargeColumns+`) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (project_id) DO UPDATE SET charged = charged + excluded.charged, open_leases = open_leases + excluded.open_leases,
			open_hosts = open_hosts + excluded.open_hosts, open_vcpus = open_vcpus + excluded.open_vcpus,
			open_floatingips = open_floatingips + excluded.open_floatingips
		RETURNING `+chargeColumns, project, d.Charged, d.OpenLeases, d.OpenHosts, d.OpenVCPUs, d.OpenFloatingIPs).
		Scan(&c.Charged, &c.OpenLeases, &c.OpenHosts, &c.OpenVCPUs, &c.OpenFloatingIPs)
	return c, internal(err)
}

const chargeColumns = `charged, open_leases, open_hosts, open_vcpus, open_floatingips`

// ProjectCharged returns the project's charge and open leases.
func (t *tx) ProjectCharged(ctx context.Context, project string) (climate.ProjectCharge, error) {
	var c climate.ProjectCharge
	err := t.q.QueryRowContext(ctx, `SELECT `+chargeColumns+` FROM project_charges WHERE project_id = ?`, project).
		Scan(&c.Charged, &c.OpenLeases, &c.OpenHosts, &c.OpenVCPUs, &c.OpenFloatingIPs)
	if err == sql.ErrNoRows {
		return c, nil
	}
	return c, internal(err)
}

// GetProjectLimits returns the project's limits, if it has any.
func (t *tx) GetProjectLimits(ctx context.Context, project string) (*climate.ProjectLimits, bool, error) {
	var doc string
	var updated int64
	err := t.q.QueryRowContext(ctx, `SELECT limits_json, updated_at FROM project_limits WHERE project_id = ?`, project).Scan(&doc, &updated)
	if err == sql.ErrNoRows {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, internal(err)
	}
	l, err := climate.DecodeLimits(project, doc, fromMicros(updated))
	return l, err == nil, err
}

// PutProjectLimits sets the project's limits.
func (t *tx) PutProjectLimits(ctx context.Context, l *climate.ProjectLimits) error {
	if err := t.writable(); err != nil {
		return err
	}
	doc, err := climate.EncodeLimits(l)
	if err != nil {
		return err
	}
	_, err = t.q.ExecContext(ctx, `INSERT INTO project_limits (project_id, limits_json, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (project_id) DO UPDATE SET limits_json = excluded.limits_json, updated_at = excluded.updated_at`,
		l.ProjectID, doc, micros(l.UpdatedAt))
	return internal(err)
}
