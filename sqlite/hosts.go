package sqlite

import (
	"context"
	"strconv"

	"climate"
	"climate/sqlcore"
)

// The host reads, DeleteHost, SetHostPower, the revisions and the resource properties are
// sqlcore's.

// InsertHost registers a host and its extra capabilities.
func (t *tx) InsertHost(ctx context.Context, h *climate.Host) error {
	if err := t.Writable(); err != nil {
		return err
	}
	id := h.ID
	if id == "" {
		// A placeholder unique id, replaced by the row's sequence number below.
		id = "pending-" + climate.NewID()
	}
	res, err := t.q.ExecContext(ctx, `INSERT INTO hosts (`+sqlcore.HostColumns+`) VALUES `+sqlcore.Placeholders(14),
		dialect.HostArgs(id, h)...)
	if isUnique(err) {
		if h.ID != "" {
			var n int
			if t.q.QueryRowContext(ctx, `SELECT count(*) FROM hosts WHERE id = ?`, h.ID).Scan(&n) == nil && n > 0 {
				return climate.Errorf(climate.CodeConflict, "Host with id %s already exists", h.ID)
			}
		}
		return climate.Errorf(climate.CodeConflict, "Host %s already exists", h.HypervisorHostname)
	}
	if err != nil {
		return internal(err)
	}
	if h.ID == "" {
		seq, err := res.LastInsertId()
		if err != nil {
			return internal(err)
		}
		h.ID = strconv.FormatInt(seq, 10)
		if _, err := t.q.ExecContext(ctx, `UPDATE hosts SET id = ? WHERE seq = ?`, h.ID, seq); err != nil {
			if isUnique(err) {
				return climate.Errorf(climate.CodeConflict, "Host with id %s already exists", h.ID)
			}
			return internal(err)
		}
	}
	if err := t.writeExtras(ctx, h); err != nil {
		return err
	}
	return t.BumpInventory(ctx)
}

// writeExtras replaces a host's extra capabilities, registering new property names.
func (t *tx) writeExtras(ctx context.Context, h *climate.Host) error {
	if _, err := t.q.ExecContext(ctx, `DELETE FROM host_extras WHERE host_id = ?`, h.ID); err != nil {
		return internal(err)
	}
	// A property first seen now was created by this write: the host's update, or its creation.
	created := h.UpdatedAt
	if created.IsZero() {
		created = h.CreatedAt
	}
	for name, value := range h.Extra {
		_, err := t.q.ExecContext(ctx, `INSERT INTO resource_properties (id, resource_type, name, private, created_at)
			VALUES (?, ?, ?, 0, ?) ON CONFLICT (resource_type, name) DO NOTHING`,
			climate.NewID(), climate.ResourceTypeHost, name, micros(created))
		if err != nil {
			return internal(err)
		}
		_, err = t.q.ExecContext(ctx, `INSERT INTO host_extras (host_id, property_id, value)
			SELECT ?, id, ? FROM resource_properties WHERE resource_type = ? AND name = ?`,
			h.ID, value, climate.ResourceTypeHost, name)
		if err != nil {
			return internal(err)
		}
	}
	return nil
}

// UpdateHost rewrites a host and replaces its extras.
func (t *tx) UpdateHost(ctx context.Context, h *climate.Host) error {
	if err := t.Writable(); err != nil {
		return err
	}
	n, err := t.UpdateHostRow(ctx, h)
	if isUnique(err) {
		return climate.Errorf(climate.CodeConflict, "Host %s already exists", h.HypervisorHostname)
	}
	if err != nil {
		return internal(err)
	}
	if n == 0 {
		return sqlcore.HostNotFound(h.ID)
	}
	if err := t.writeExtras(ctx, h); err != nil {
		return err
	}
	return t.BumpInventory(ctx)
}
