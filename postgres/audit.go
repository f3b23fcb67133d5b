package postgres

import (
	"context"

	"climate"
	"climate/sqlcore"
)

// ListAudit is sqlcore's.

var insertAudit = sqlcore.Rebind(sqlcore.InsertAudit + ` RETURNING id`)

// InsertAudit appends an entry to the audit trail and sets its id.
func (t *tx) InsertAudit(ctx context.Context, e *climate.AuditEntry) error {
	if err := t.Writable(); err != nil {
		return err
	}
	return dbError(t.q.QueryRow(ctx, insertAudit, dialect.AuditArgs(e)...).Scan(&e.ID))
}
