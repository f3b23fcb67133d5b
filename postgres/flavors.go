package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"climate"
)

const flavorColumns = `id, name, vcpus, ram, disk, ephemeral, extra_specs, created_at, updated_at`

// InsertFlavor writes a new flavor. Flavors are not inventory: no trigger moves the
// inventory revision.
func (t *tx) InsertFlavor(ctx context.Context, f *climate.Flavor) error {
	if err := t.writable(); err != nil {
		return err
	}
	// ON CONFLICT DO NOTHING keeps the transaction usable after a duplicate; which of the
	// two unique keys was taken is then looked up.
	tag, err := t.q.Exec(ctx, `INSERT INTO flavors (`+flavorColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
		ON CONFLICT DO NOTHING`,
		f.ID, f.Name, f.VCPUs, f.RAM, f.Disk, f.Ephemeral, encodeExtraSpecs(f.ExtraSpecs), ts(f.CreatedAt), nullTS(f.UpdatedAt))
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
	case errors.Is(err, pgx.ErrNoRows) || (err == nil && id == f.ID):
		// No row: the taken one was deleted since, by a transaction this one cannot see.
		return climate.FlavorIDTaken(f.ID)
	case err == nil:
		return climate.FlavorNameTaken(f.Name)
	}
	return dbError(err)
}

// GetFlavor returns one flavor.
func (t *tx) GetFlavor(ctx context.Context, id string) (*climate.Flavor, error) {
	fs, err := t.loadFlavors(ctx, `WHERE id = $1`, id)
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
	rows, err := t.q.Query(ctx, `SELECT `+flavorColumns+` FROM flavors `+where+` ORDER BY created_at, id`, args...)
	if err != nil {
		return nil, dbError(err)
	}
	defer rows.Close()
	var out []climate.Flavor
	for rows.Next() {
		var f climate.Flavor
		var specs string
		var updated *time.Time
		if err := rows.Scan(&f.ID, &f.Name, &f.VCPUs, &f.RAM, &f.Disk, &f.Ephemeral, &specs, &f.CreatedAt, &updated); err != nil {
			return nil, dbError(err)
		}
		if f.ExtraSpecs, err = decodeExtraSpecs(specs); err != nil {
			return nil, err
		}
		f.CreatedAt, f.UpdatedAt = fromTS(f.CreatedAt), fromNullTS(updated)
		out = append(out, f)
	}
	return out, dbError(rows.Err())
}

// DeleteFlavor deletes a flavor.
func (t *tx) DeleteFlavor(ctx context.Context, id string) error {
	if err := t.writable(); err != nil {
		return err
	}
	tag, err := t.q.Exec(ctx, `DELETE FROM flavors WHERE id = $1`, id)
	if err != nil {
		return dbError(err)
	}
	if tag.RowsAffected() == 0 {
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
		return nil, dbError(fmt.Errorf("extra_specs %q: %w", s, err))
	}
	if len(specs) == 0 {
		return nil, nil
	}
	return specs, nil
}
