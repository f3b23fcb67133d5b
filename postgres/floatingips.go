package postgres

import (
	"context"

	"climate"
	"climate/sqlcore"
)

// The floating IP reads and DeleteFloatingIP are sqlcore's; a trigger moves the inventory
// revision.

// InsertFloatingIP writes a new floating IP.
func (t *tx) InsertFloatingIP(ctx context.Context, f *climate.FloatingIP) error {
	if err := t.Writable(); err != nil {
		return err
	}
	// ON CONFLICT DO NOTHING keeps the transaction usable after a duplicate; which of the
	// two unique keys was taken is then looked up.
	tag, err := t.q.Exec(ctx, `INSERT INTO floatingips (`+sqlcore.FloatingIPColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT DO NOTHING`, dialect.FloatingIPArgs(f)...)
	if err != nil {
		return dbError(err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	taken, err := t.FloatingIPAt(ctx, f)
	switch {
	case err == nil:
		return sqlcore.FloatingIPTaken(f, taken)
	case sqlcore.IsNoRows(err):
		return climate.Errorf(climate.CodeConflict, "Floating IP %s already exists", f.ID)
	}
	return dbError(err)
}
