package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"climate"
)

const flavorColumns = `id, name, vcpus, ram, disk, ephemeral, extra_specs, created_at, updated_at`

// InsertFlavor writes a new flavor. Writers are serialized, so the id and name check
// before the insert cannot race another insert. Flavors are not inventory: the inventory
// revision stays where it is.
func (t *tx) InsertFlavor(ctx context.Context, f *climate.Flavor) error {
	if err := t.writable(); err != nil {
		return err
	}
	if err := t.flavorTaken(ctx, f); err != nil {
		return err
	}
	_, err := t.q.ExecContext(ctx, `INSERT INTO flavors (`+flavorColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		f.ID, f.Name, f.VCPUs, f.RAM, f.Disk, f.Ephemeral, encodeExtraSpecs(f.ExtraSpecs), micros(f.CreatedAt), nullMicros(f.UpdatedAt))
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

// GetFlavor returns one flavor.
func (t *tx) GetFlavor(ctx context.Context, id string) (*climate.Flavor, error) {
	fs, err := t.loadFlavors(ctx, `WHERE id = ?`, id)
	if err != nil {
		return nil, err
	}
	if len(fs) == 0 {
		return nil, climate.FlavorNotFound(id)
	}
	return &fs[0], nil
}

// ListFlavors returns every flavor by creation time, then id.
func (t *tx) ListFlavors(ctx context.Context) ([]climate.Flavor, error) {
	return t.loadFlavors(ctx, "")
}

func (t *tx) loadFlavors(ctx context.Context, where string, args ...any) ([]climate.Flavor, error) {
	rows, err := t.q.QueryContext(ctx, `SELECT `+flavorColumns+` FROM flavors `+where+` ORDER BY created_at, id`, args...)
	if err != nil {
		return nil, internal(err)
	}
	defer rows.Close()
	var out []climate.Flavor
	for rows.Next() {
		var f climate.Flavor
		var specs string
		var created int64
		var updated sql.NullInt64
		if err := rows.Scan(&f.ID, &f.Name, &f.VCPUs, &f.RAM, &f.Disk, &f.Ephemeral, &specs, &created, &updated); err != nil {
			return nil, internal(err)
		}
		if f.ExtraSpecs, err = decodeExtraSpecs(specs); err != nil {
			return nil, err
		}
		f.CreatedAt, f.UpdatedAt = fromMicros(created), fromNullMicros(updated)
		out = append(out, f)
	}
	return out, internal(rows.Err())
}

// DeleteFlavor deletes a flavor.
func (t *tx) DeleteFlavor(ctx context.Context, id string) error {
	if err := t.writable(); err != nil {
		return err
	}
	res, err := t.q.ExecContext(ctx, `DELETE FROM flavors WHERE id = ?`, id)
	if err != nil {
		return internal(err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return internal(err)
	}
	if n == 0 {
		return climate.FlavorNotFound(id)
	}
	return nil
}

// encodeExtraSpecs is a flavor's extra specs as stored: a JSON object, "{}" for none (nil
// included).
func encodeExtraSpecs(specs map[string]string) string {
	if len(specs) == 0 {
		return "{}"
	}
	b, _ := json.Marshal(specs) // cannot fail for strings
	return string(b)
}

// decodeExtraSpecs reads what encodeExtraSpecs wrote; none comes back nil.
func decodeExtraSpecs(s string) (map[string]string, error) {
	var specs map[string]string
	if err := json.Unmarshal([]byte(s), &specs); err != nil {
		return nil, internal(fmt.Errorf("extra_specs %q: %w", s, err))
	}
	if len(specs) == 0 {
		return nil, nil
	}
	return specs, nil
}
