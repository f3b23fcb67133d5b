package sqlite

import (
	"context"
	"database/sql"

	"climate"
)

const floatingIPColumns = `id, floating_network_id, subnet_id, floating_ip_address, reservable, created_at, updated_at`

// InsertFloatingIP writes a new floating IP and moves the inventory revision. Writers are
// serialized, so the address check before the insert cannot race another insert.
func (t *tx) InsertFloatingIP(ctx context.Context, f *climate.FloatingIP) error {
	if err := t.writable(); err != nil {
		return err
	}
	var taken string
	err := t.q.QueryRowContext(ctx, `SELECT id FROM floatingips WHERE floating_network_id = ? AND floating_ip_address = ?`,
		f.FloatingNetworkID, f.Address).Scan(&taken)
	switch {
	case err == nil:
		return floatingIPTaken(f, taken)
	case err != sql.ErrNoRows:
		return internal(err)
	}
	_, err = t.q.ExecContext(ctx, `INSERT INTO floatingips (`+floatingIPColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		f.ID, f.FloatingNetworkID, f.SubnetID, f.Address, f.Reservable, micros(f.CreatedAt), nullMicros(f.UpdatedAt))
	if isUnique(err) {
		return climate.Errorf(climate.CodeConflict, "Floating IP %s already exists", f.ID)
	}
	if err != nil {
		return internal(err)
	}
	// A new address is new inventory, as a new host is (PostgreSQL bumps by trigger).
	return t.bumpInventory(ctx)
}

// floatingIPTaken is the conflict of an address already registered on its network.
func floatingIPTaken(f *climate.FloatingIP, id string) error {
	return climate.Errorf(climate.CodeConflict, "Floating IP %s is already registered on network %s (floating IP %s)",
		f.Address, f.FloatingNetworkID, id)
}

// GetFloatingIP returns one floating IP.
func (t *tx) GetFloatingIP(ctx context.Context, id string) (*climate.FloatingIP, error) {
	fs, err := t.loadFloatingIPs(ctx, `WHERE id = ?`, id)
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
	rows, err := t.q.QueryContext(ctx, `SELECT `+floatingIPColumns+` FROM floatingips `+where+` ORDER BY created_at, id`, args...)
	if err != nil {
		return nil, internal(err)
	}
	defer rows.Close()
	var out []climate.FloatingIP
	for rows.Next() {
		var f climate.FloatingIP
		var created int64
		var updated sql.NullInt64
		if err := rows.Scan(&f.ID, &f.FloatingNetworkID, &f.SubnetID, &f.Address, &f.Reservable, &created, &updated); err != nil {
			return nil, internal(err)
		}
		f.CreatedAt, f.UpdatedAt = fromMicros(created), fromNullMicros(updated)
		out = append(out, f)
	}
	return out, internal(rows.Err())
}

// DeleteFloatingIP deletes a floating IP and moves the inventory revision.
func (t *tx) DeleteFloatingIP(ctx context.Context, id string) error {
	if err := t.writable(); err != nil {
		return err
	}
	res, err := t.q.ExecContext(ctx, `DELETE FROM floatingips WHERE id = ?`, id)
	if err != nil {
		return internal(err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return internal(err)
	}
	if n == 0 {
		return climate.FloatingIPNotFound(id)
	}
	return t.bumpInventory(ctx)
}
