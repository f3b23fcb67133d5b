package sqlite

import (
	"context"
	"database/sql"

	"climate"
	"climate/sqlcore"
)

// The flavor reads and DeleteFlavor are sqlcore's.

// InsertFlavor writes a new flavor. Writers are serialized, so the id and name check
// before the insert cannot race another insert. Flavors are not inventory: the inventory
// revision stays where it is.
func (t *tx) InsertFlavor(ctx context.Context, f *climate.Flavor) error {
	if err := t.Writable(); err != nil {
		return err
	}
	if err := t.flavorTaken(ctx, f); err != nil {
		return err
	}
	_, err := t.q.ExecContext(ctx, `INSERT INTO flavors (`+sqlcore.FlavorColumns+`) VALUES `+sqlcore.Placeholders(9),
		dialect.FlavorArgs(f)...)
	if isUnique(err) {
		return climate.FlavorIDTaken(f.ID)
	}
	return internal(err)
}

// flavorTaken is the conflict of a flavor whose id or name is registered, nil when
// neither is.
func (t *tx) flavorTaken(ctx context.Context, f *climate.Flavor) error {
	var id string
	err := t.q.QueryRowContext(ctx, `SELECT id FROM flavors WHERE id = ? OR name = ? ORDER BY id = ? DESC LIMIT 1`,
		f.ID, f.Name, f.ID).Scan(&id)
	switch {
	case err == sql.ErrNoRows:
		return nil
	case err != nil:
		return internal(err)
	case id == f.ID:
		return climate.FlavorIDTaken(f.ID)
	}
	return climate.FlavorNameTaken(f.Name)
}
