package sqlite

import (
	"context"

	"climate"
	"climate/sqlcore"
)

// ListAudit is sqlcore's.

// InsertAudit appends an entry to the audit trail and sets its id.
func (t *tx) InsertAudit(ctx context.Context, e *climate.AuditEntry) error {
	if err := t.Writable(); err != nil {
		return err
	}
	res, err := t.q.ExecContext(ctx, sqlcore.InsertAudit, dialect.AuditArgs(e)...)
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
