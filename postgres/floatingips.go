package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"climate"
)

const floatingIPColumns = `id, floating_network_id, subnet_id, floating_ip_address, reservable, created_at, updated_at`

// InsertFloatingIP writes a new floating IP; a trigger moves the inventory revision.
func (t *tx) InsertFloatingIP(ctx context.Context, f *climate.FloatingIP) error {
	if err := t.writable(); err != nil {
		return err
	}
	// ON CONFLICT DO NOTHING keeps the transaction usable after a duplicate; which of the
	// two unique keys was taken is then looked up.
	tag, err := t.q.Exec(ctx, `INSERT INTO floatingips (`+floatingIPColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT DO NOTHING`,
		f.ID, f.FloatingNetworkID, f.SubnetID, f.Address, f.Reservable, ts(f.CreatedAt), nullTS(f.UpdatedAt))
	if err != nil {
		return dbError(err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	var taken string
	err = t.q.QueryRow(ctx, `SELECT id FROM floatingips WHERE floating_network_id = $1 AND floating_ip_address = $2`,
		f.FloatingNetworkID, f.Address).Scan(&taken)
	switch {
	case err == nil:
		return climate.Errorf(climate.CodeConflict, "Floating IP %s is already registered on network %s (floating IP %s)",
			f.Address, f.FloatingNetworkID, taken)
	case errors.Is(err, pgx.ErrNoRows):
		return climate.Errorf(climate.CodeConflict, "Floating IP %s already exists", f.ID)
	}
	return dbError(err)
}

// GetFloatingIP returns one floating IP.
func (t *tx) GetFloatingIP(ctx context.Context, id string) (*climate.FloatingIP, error) {
	fs, err := t.loadFloatingIPs(ctx, `WHERE id = $1`, id)
	if err != nil {
		return nil, err
	}
	if len(fs) == 0 {
		return nil, climate.FloatingIPNotFound(id)
	}
	return &fs[0], nil
}

// ListFloatingIPs returns every floating IP by creation time, then id.
func (t *tx) ListFloatingIPs(ctx context.Context) ([]climate.FloatingIP, error) {
	return t.loadFloatingIPs(ctx, "")
}

func (t *tx) loadFloatingIPs(ctx context.Context, where string, args ...any) ([]climate.FloatingIP, error) {
	rows, err := t.q.Query(ctx, `SELECT `+floatingIPColumns+` FROM floatingips `+where+` ORDER BY created_at, id`, args...)
	if err != nil {
		return nil, dbError(err)
	}
	defer rows.Close()
	var out []climate.FloatingIP
	for rows.Next() {
		var f climate.FloatingIP
		var updated *time.Time
		if err := rows.Scan(&f.ID, &f.FloatingNetworkID, &f.SubnetID, &f.Address, &f.Reservable, &f.CreatedAt, &updated); err != nil {
			return nil, dbError(err)
		}
		f.CreatedAt, f.UpdatedAt = fromTS(f.CreatedAt), fromNullTS(updated)
		out = append(out, f)
	}
	return out, dbError(rows.Err())
}

// DeleteFloatingIP deletes a floating IP; a trigger moves the inventory revision.
func (t *tx) DeleteFloatingIP(ctx context.Context, id string) error {
	if err := t.writable(); err != nil {
		return err
	}
	tag, err := t.q.Exec(ctx, `DELETE FROM floatingips WHERE id = $1`, id)
	if err != nil {
		return dbError(err)
	}
	if tag.RowsAffected() == 0 {
		return climate.FloatingIPNotFound(id)
	}
	return nil
}
