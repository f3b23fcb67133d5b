package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"climate"
)

const usageColumns = `allocation_id, reservation_id, lease_id, lease_name, project_id, resource_type, resource_id, class, units,
	start_at, end_at, held_from, held_until, rate, cost, closed, created_at, updated_at`

// ListUsage returns the usage records matching f, by lease, reservation, then allocation.
func (t *tx) ListUsage(ctx context.Context, f climate.UsageFilter) ([]climate.UsageRecord, error) {
	var where []string
	var args []any
	add := func(cond string, a ...any) {
		n := make([]any, len(a))
		for i := range a {
			args = append(args, a[i])
			n[i] = len(args)
		}
		where = append(where, fmt.Sprintf(cond, n...))
	}
	if f.ProjectID != "" {
		add(`project_id = $%d`, f.ProjectID)
	}
	if f.LeaseID != "" {
		add(`lease_id = $%d`, f.LeaseID)
	}
	if len(f.LeaseIDs) > 0 {
		add(`lease_id = ANY($%d)`, f.LeaseIDs)
	}
	if f.OpenOnly {
		add(`NOT closed`)
	}
	if !f.From.IsZero() {
		add(`end_at > $%d`, ts(f.From))
	}
	if !f.To.IsZero() {
		add(`start_at < $%d`, ts(f.To))
	}
	if f.AfterLease != "" || f.AfterReservation != "" || f.AfterAllocation != "" {
		add(`(lease_id, reservation_id, allocation_id) > ($%d, $%d, $%d)`, f.AfterLease, f.AfterReservation, f.AfterAllocation)
	}
	q := `SELECT ` + usageColumns + ` FROM usage_records`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	q += ` ORDER BY lease_id, reservation_id, allocation_id`
	if f.Limit > 0 {
		args = append(args, f.Limit)
		q += fmt.Sprintf(` LIMIT $%d`, len(args))
	}
	rows, err := t.q.Query(ctx, q, args...)
	if err != nil {
		return nil, dbError(err)
	}
	defer rows.Close()
	var out []climate.UsageRecord
	for rows.Next() {
		var u climate.UsageRecord
		var heldFrom, heldUntil *time.Time
		if err := rows.Scan(&u.AllocationID, &u.ReservationID, &u.LeaseID, &u.LeaseName, &u.ProjectID, &u.ResourceType, &u.ResourceID,
			&u.Class, &u.Units, &u.Start, &u.End, &heldFrom, &heldUntil, &u.Rate, &u.Cost, &u.Closed, &u.CreatedAt, &u.UpdatedAt); err != nil {
			return nil, dbError(err)
		}
		u.Start, u.End, u.CreatedAt, u.UpdatedAt = fromTS(u.Start), fromTS(u.End), fromTS(u.CreatedAt), fromTS(u.UpdatedAt)
		u.HeldFrom, u.HeldUntil = fromNullTS(heldFrom), fromNullTS(heldUntil)
		out = append(out, u)
	}
	return out, dbError(rows.Err())
}

// PutUsage inserts or replaces usage records, in one round trip.
func (t *tx) PutUsage(ctx context.Context, rs []climate.UsageRecord) error {
	if err := t.writable(); err != nil {
		return err
	}
	b := &pgx.Batch{}
	for _, u := range rs {
		b.Queue(`INSERT INTO usage_records (`+usageColumns+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)
			ON CONFLICT (lease_id, reservation_id, allocation_id) DO UPDATE SET lease_name = excluded.lease_name, start_at = excluded.start_at,
				end_at = excluded.end_at, held_from = excluded.held_from, held_until = excluded.held_until, rate = excluded.rate,
				cost = excluded.cost, closed = excluded.closed, updated_at = excluded.updated_at`,
			u.AllocationID, u.ReservationID, u.LeaseID, u.LeaseName, u.ProjectID, u.ResourceType, u.ResourceID, u.Class, u.Units,
			ts(u.Start), ts(u.End), nullTS(u.HeldFrom), nullTS(u.HeldUntil), u.Rate, u.Cost, u.Closed, ts(u.CreatedAt), ts(u.UpdatedAt))
	}
	return dbError(t.q.SendBatch(ctx, b).Close())
}

// ChargeProject adds to the project's charge and open leases and returns the new
// totals; the row stays locked until the transaction ends.
func (t *tx) ChargeProject(ctx context.Context, project string, d climate.ProjectCharge) (climate.ProjectCharge, error) {
	var c climate.ProjectCharge
	if err := t.writable(); err != nil {
		return c, err
	}
	err := t.q.QueryRow(ctx, `INSERT INTO project_charges (project_id, `+chargeColumns+`) VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (project_id) DO UPDATE SET charged = project_charges.charged + excluded.charged,
			open_leases = project_charges.open_leases + excluded.open_leases,
			open_hosts = project_charges.open_hosts + excluded.open_hosts,
			open_vcpus = project_charges.open_vcpus + excluded.open_vcpus,
			open_floatingips = project_charges.open_floatingips + excluded.open_floatingips
		RETURNING `+chargeColumns, project, d.Charged, d.OpenLeases, d.OpenHosts, d.OpenVCPUs, d.OpenFloatingIPs).
		Scan(&c.Charged, &c.OpenLeases, &c.OpenHosts, &c.OpenVCPUs, &c.OpenFloatingIPs)
	return c, dbError(err)
}

const chargeColumns = `charged, open_leases, open_hosts, open_vcpus, open_floatingips`

// ProjectCharged returns the project's charge and open leases.
func (t *tx) ProjectCharged(ctx context.Context, project string) (climate.ProjectCharge, error) {
	var c climate.ProjectCharge
	err := t.q.QueryRow(ctx, `SELECT `+chargeColumns+` FROM project_charges WHERE project_id = $1`, project).
		Scan(&c.Charged, &c.OpenLeases, &c.OpenHosts, &c.OpenVCPUs, &c.OpenFloatingIPs)
	if errors.Is(err, pgx.ErrNoRows) {
		return c, nil
	}
	return c, dbError(err)
}

// GetProjectLimits returns the project's limits, if it has any.
func (t *tx) GetProjectLimits(ctx context.Context, project string) (*climate.ProjectLimits, bool, error) {
	var doc string
	var updated time.Time
	err := t.q.QueryRow(ctx, `SELECT limits_json, updated_at FROM project_limits WHERE project_id = $1`, project).Scan(&doc, &updated)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, dbError(err)
	}
	l, err := climate.DecodeLimits(project, doc, fromTS(updated))
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
	_, err = t.q.Exec(ctx, `INSERT INTO project_limits (project_id, limits_json, updated_at) VALUES ($1, $2, $3)
		ON CONFLICT (project_id) DO UPDATE SET limits_json = excluded.limits_json, updated_at = excluded.updated_at`,
		l.ProjectID, doc, ts(l.UpdatedAt))
	return dbError(err)
}
