package postgres

import (
	"context"

	"climate"
	"climate/sqlcore"
)

// The flavor reads and DeleteFlavor are sqlcore's.

// InsertFlavor writes a new flavor. Flavors are not inventory: no trigger moves the
// inventory revision.
func (t *tx) InsertFlavor(ctx context.Context, f *climate.Flavor) error {
	if err := t.Writable(); err != nil {
		return err
	}
	// ON CONFLICT DO NOTHING keeps the transaction usable after a duplicate; which of the
	// two unique keys was taken is then looked up.
	tag, err := t.q.Exec(ctx, `INSERT INTO flavors (`+sqlcore.FlavorColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
		ON CONFLICT DO NOTHING`, dialect.FlavorArgs(f)...)
	if err != nil {
		return dbError(err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	var id string
	err = t.q.QueryRow(ctx, `SELECT id FROM flavors WHERE id = $1 OR name = $2 ORDER BY id = $1 DESC LIMIT 1`,
		f.ID, f.Name).Scan(&id)
	switch {
	case sqlcore.IsNoRows(err) || (err == nil && id == f.ID):
		// No row: the taken one was deleted since, by a transaction this one cannot see.
		return climate.FlavorIDTaken(f.ID)
	case err == nil:
		return climate.FlavorNameTaken(f.Name)
	}
	return dbError(err)
}
