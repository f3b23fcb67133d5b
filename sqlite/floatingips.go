package sqlite

import (
	"context"

	"climate"
	"climate/sqlcore"
)

// The floating IP reads and DeleteFloatingIP are sqlcore's.

// InsertFloatingIP writes a new floating IP and moves the inventory revision. Writers are
// serialized, so the address check before the insert cannot race another insert.
func (t *tx) InsertFloatingIP(ctx context.Context, f *climate.FloatingIP) error {
	if err := t.Writable(); err != nil {
		return err
	}
	taken, err := t.FloatingIPAt(ctx, f)
	switch {
	case err == nil:
		return sqlcore.FloatingIPTaken(f, taken)
	case !sqlcore.IsNoRows(err):
		return internal(err)
	}
	_, err = t.q.ExecContext(ctx, `INSERT INTO floatingips (`+sqlcore.FloatingIPColumns+`) VALUES `+sqlcore.Placeholders(7),
		dialect.FloatingIPArgs(f)...)
	if isUnique(err) {
		return climate.Errorf(climate.CodeConflict, "Floating IP %s already exists", f.ID)
	}
	if err != nil {
		return internal(err)
	}
	// A new address is new inventory, as a new host is (PostgreSQL bumps by trigger).
	return t.BumpInventory(ctx)
}
