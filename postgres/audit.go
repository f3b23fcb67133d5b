package postgres

import (
	"context"
	"fmt"
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
	err := t.q.QueryRow(ctx, `INSERT INTO audit (`+auditColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
		RETURNING id`,
		ts(e.Time), e.Actor, e.ActorUserID, e.ActorProjectID, e.RequestID, e.Action, e.TargetType, e.TargetID,
		e.LeaseID, e.HostID, e.ProjectID, e.Reason, e.Before, e.After).Scan(&e.ID)
	return dbError(err)
}

// ListAudit returns the entries matching f by id.
func (t *tx) ListAudit(ctx context.Context, f climate.AuditFilter) ([]climate.AuditEntry, error) {
	var where []string
	var args []any
	add := func(cond string, arg any) {
		args = append(args, arg)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	// The partial indexes hold only rows with the id set: the '<> ''' lets the planner
	// use them.
	if f.LeaseID != "" {
		add(`lease_id = $%d AND lease_id <> ''`, f.LeaseID)
	}
	if f.HostID != "" {
		add(`host_id = $%d AND host_id <> ''`, f.HostID)
	}
	if f.ProjectID != "" {
		add(`project_id = $%d AND project_id <> ''`, f.ProjectID)
	}
	if !f.Since.IsZero() {
		add(`at >= $%d`, ts(f.Since))
	}
	if !f.Until.IsZero() {
		add(`at < $%d`, ts(f.Until))
	}
	if f.After > 0 {
		add(`id > $%d`, f.After)
	}
	q := `SELECT id, ` + auditColumns + ` FROM audit`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	q += ` ORDER BY id`
	if f.Limit > 0 {
		args = append(args, f.Limit)
		q += fmt.Sprintf(` LIMIT $%d`, len(args))
	}
	rows, err := t.q.Query(ctx, q, args...)
	if err != nil {
		return nil, dbError(err)
	}
	defer rows.Close()
	var out []climate.AuditEntry
	for rows.Next() {
		var e climate.AuditEntry
		if err := rows.Scan(&e.ID, &e.Time, &e.Actor, &e.ActorUserID, &e.ActorProjectID, &e.RequestID, &e.Action, &e.TargetType, &e.TargetID,
			&e.LeaseID, &e.HostID, &e.ProjectID, &e.Reason, &e.Before, &e.After); err != nil {
			return nil, dbError(err)
		}
		e.Time = fromTS(e.Time)
		out = append(out, e)
	}
	return out, dbError(rows.Err())
}
