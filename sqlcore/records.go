package sqlcore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"climate"
)

// AuditColumns are the columns of an audit entry but its id, in AuditArgs' order.
const AuditColumns = `at, actor, actor_user_id, actor_project_id, request_id, action, target_type, target_id,
	lease_id, host_id, project_id, reason, before_json, after_json`

// InsertAudit is the insert of an audit entry, with AuditArgs.
const InsertAudit = `INSERT INTO audit (` + AuditColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// AuditArgs are e's AuditColumns.
func (d *Dialect) AuditArgs(e *climate.AuditEntry) []any {
	return []any{d.Time(e.Time), e.Actor, e.ActorUserID, e.ActorProjectID, e.RequestID, e.Action, e.TargetType, e.TargetID,
		e.LeaseID, e.HostID, e.ProjectID, e.Reason, e.Before, e.After}
}

// ListAudit returns the entries matching f by id.
func (t *Tx) ListAudit(ctx context.Context, f climate.AuditFilter) ([]climate.AuditEntry, error) {
	var where []string
	var args []any
	add := func(cond string, arg any) {
		where = append(where, cond)
		args = append(args, arg)
	}
	// The partial indexes hold only rows with the id set: the '<> ''' lets the planner
	// use them.
	if f.LeaseID != "" {
		add(`lease_id = ? AND lease_id <> ''`, f.LeaseID)
	}
	if f.HostID != "" {
		add(`host_id = ? AND host_id <> ''`, f.HostID)
	}
	if f.ProjectID != "" {
		add(`project_id = ? AND project_id <> ''`, f.ProjectID)
	}
	if !f.Since.IsZero() {
		add(`at >= ?`, t.D.Time(f.Since))
	}
	if !f.Until.IsZero() {
		add(`at < ?`, t.D.Time(f.Until))
	}
	if f.After > 0 {
		add(`id > ?`, f.After)
	}
	q := `SELECT id, ` + AuditColumns + ` FROM audit`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	q += ` ORDER BY id`
	if f.Limit > 0 {
		q += ` LIMIT ?`
		args = append(args, f.Limit)
	}
	return list(ctx, t, func(e *climate.AuditEntry) ([]any, func() error) {
		return []any{&e.ID, ScanTime(&e.Time), &e.Actor, &e.ActorUserID, &e.ActorProjectID, &e.RequestID, &e.Action,
			&e.TargetType, &e.TargetID, &e.LeaseID, &e.HostID, &e.ProjectID, &e.Reason, &e.Before, &e.After}, nil
	}, q, args...)
}

// UsageColumns are the columns of a usage record, in AppendUsageArgs' order.
const UsageColumns = `allocation_id, reservation_id, lease_id, lease_name, project_id, resource_type, resource_id, class, units,
	start_at, end_at, held_from, held_until, rate, cost, closed, created_at, updated_at`

// AppendUsageArgs appends u's UsageColumns to args.
func (d *Dialect) AppendUsageArgs(args []any, u *climate.UsageRecord) []any {
	return append(args, u.AllocationID, u.ReservationID, u.LeaseID, u.LeaseName, u.ProjectID, u.ResourceType, u.ResourceID, u.Class, u.Units,
		d.Time(u.Start), d.Time(u.End), d.NullTime(u.HeldFrom), d.NullTime(u.HeldUntil), u.Rate, u.Cost, u.Closed,
		d.Time(u.CreatedAt), d.Time(u.UpdatedAt))
}

// ListUsage returns the usage records matching f, by lease, reservation, then allocation.
func (t *Tx) ListUsage(ctx context.Context, f climate.UsageFilter) ([]climate.UsageRecord, error) {
	d := t.D
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
		add("lease_id"+d.InList, d.List(f.LeaseIDs))
	}
	if f.OpenOnly {
		add(fmt.Sprintf(d.False, "closed"))
	}
	if !f.From.IsZero() {
		add(`end_at > ?`, d.Time(f.From))
	}
	if !f.To.IsZero() {
		add(`start_at < ?`, d.Time(f.To))
	}
	if f.AfterLease != "" || f.AfterReservation != "" || f.AfterAllocation != "" {
		add(`(lease_id, reservation_id, allocation_id) > (?, ?, ?)`, f.AfterLease, f.AfterReservation, f.AfterAllocation)
	}
	q := `SELECT ` + UsageColumns + ` FROM usage_records`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	q += ` ORDER BY lease_id, reservation_id, allocation_id`
	if f.Limit > 0 {
		q += ` LIMIT ?`
		args = append(args, f.Limit)
	}
	return list(ctx, t, func(u *climate.UsageRecord) ([]any, func() error) {
		return []any{&u.AllocationID, &u.ReservationID, &u.LeaseID, &u.LeaseName, &u.ProjectID, &u.ResourceType, &u.ResourceID,
			&u.Class, &u.Units, ScanTime(&u.Start), ScanTime(&u.End), ScanTime(&u.HeldFrom), ScanTime(&u.HeldUntil),
			&u.Rate, &u.Cost, &u.Closed, ScanTime(&u.CreatedAt), ScanTime(&u.UpdatedAt)}, nil
	}, q, args...)
}

// ChargeColumns are a project charge's columns, in ScanCharge's order.
const ChargeColumns = `charged, open_leases, open_hosts, open_vcpus, open_floatingips`

// ChargeDest are the scan destinations of ChargeColumns into c.
func ChargeDest(c *climate.ProjectCharge) []any {
	return []any{&c.Charged, &c.OpenLeases, &c.OpenHosts, &c.OpenVCPUs, &c.OpenFloatingIPs}
}

// ChargeArgs are project, then d's ChargeColumns.
func ChargeArgs(project string, d climate.ProjectCharge) []any {
	return []any{project, d.Charged, d.OpenLeases, d.OpenHosts, d.OpenVCPUs, d.OpenFloatingIPs}
}

// ProjectLimitsQuery reads a project's limits: ScanProjectLimits reads its row.
const ProjectLimitsQuery = `SELECT limits_json, updated_at FROM project_limits WHERE project_id = ?`

// GetProjectLimits returns the project's limits, if it has any.
func (t *Tx) GetProjectLimits(ctx context.Context, project string) (*climate.ProjectLimits, bool, error) {
	return t.D.ScanProjectLimits(project, t.Q.QueryRow(ctx, ProjectLimitsQuery, project))
}

// ScanProjectLimits reads project's limits from ProjectLimitsQuery's row; ok is false
// when there is none.
func (d *Dialect) ScanProjectLimits(project string, row Row) (l *climate.ProjectLimits, ok bool, err error) {
	var doc string
	var updated time.Time
	err = row.Scan(&doc, ScanTime(&updated))
	if IsNoRows(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, d.Err(err)
	}
	l, err = climate.DecodeLimits(project, doc, updated)
	return l, err == nil, err
}

// PutLimits writes the project's limits (the store takes any lock first).
func (t *Tx) PutLimits(ctx context.Context, l *climate.ProjectLimits) error {
	doc, err := climate.EncodeLimits(l)
	if err != nil {
		return err
	}
	_, err = t.Q.Exec(ctx, `INSERT INTO project_limits (project_id, limits_json, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (project_id) DO UPDATE SET limits_json = excluded.limits_json, updated_at = excluded.updated_at`,
		l.ProjectID, doc, t.D.Time(l.UpdatedAt))
	return t.D.Err(err)
}
