package sqlite

import (
	"context"
	"strings"

	"climate"
)

const auditColumns = `at, actor, actor_user_id, actor_project_id, request_id, action, target_type, target_id,
	lease_id, host_id, project_id, reason, before_json, after_json`

// InsertAudit appends an entry to the audit trail and sets its id.
func (t *tx) InsertAudit(ctx context.Context, e *climate.AuditEntry) error {
	if err := t.writable(); err != nil {
		return err
	}
	res, err := t.q.ExecContext(ctx, `INSERT INTO audit (`+auditColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		micros(e.Time), e.Actor, e.ActorUserID, e.ActorProjectID, e.RequestID, e.Action, e.TargetType, e.TargetID,
		e.LeaseID, e.HostID, e.ProjectID, e.Reason, e.Before, e.After)
	if err != nil {
		return internal(err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return internal(err)
	}
	e.ID = id
	return nil
}

// ListAudit returns the entries matching f by id.
func (t *tx) ListAudit(ctx context.Context, f climate.AuditFilter) ([]climate.AuditEntry, error) {
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
		add(`at >= ?`, micros(f.Since))
	}
	if !f.Until.IsZero() {
		add(`at < ?`, micros(f.Until))
	}
	if f.After > 0 {
		add(`id > ?`, f.After)
	}
	q := `SELECT id, ` + auditColumns + ` FROM audit`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	q += ` ORDER BY id`
	if f.Limit > 0 {
		q += ` LIMIT ?`
		args = append(args, f.Limit)
	}
	rows, err := t.q.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, internal(err)
	}
	defer rows.Close()
	var out []climate.AuditEntry
	for rows.Next() {
		var e climate.AuditEntry
		var at int64
		if err := rows.Scan(&e.ID, &at, &e.Actor, &e.ActorUserID, &e.ActorProjectID, &e.RequestID, &e.Action, &e.TargetType, &e.TargetID,
			&e.LeaseID, &e.HostID, &e.ProjectID, &e.Reason, &e.Before, &e.After); err != nil {
			return nil, internal(err)
		}
		e.Time = fromMicros(at)
		out = append(out, e)
	}
	return out, internal(rows.Err())
}
