package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"climate"
	"climate/sqlcore"
)

// ListAudit is sqlcore's.

var insertAudit = sqlcore.Rebind(sqlcore.InsertAudit + ` RETURNING id`)

// InsertAudit appends an entry to the audit trail. The insert is held back to go with
// the transaction's next statement or its COMMIT (pipe.go), so e.ID is set by then.
func (t *tx) InsertAudit(ctx context.Context, e *climate.AuditEntry) error {
	if err := t.Writable(); err != nil {
		return err
	}
	t.p.hold(func(br pgx.BatchResults) error { return br.QueryRow().Scan(&e.ID) }, insertAudit, dialect.AuditArgs(e)...)
	return nil
}
