package postgres

import (
	"context"
	"strconv"

	"climate"
	"climate/sqlcore"
)

// The host reads, DeleteHost, SetHostPower, the revisions and the resource properties are
// sqlcore's; triggers keep the inventory revision.

// InsertHost registers a host and its extra capabilities.
func (t *tx) InsertHost(ctx context.Context, h *climate.Host) error {
	if err := t.Writable(); err != nil {
		return err
	}
	id := h.ID
	var seq any // the column default unless the id comes from the sequence
	if id == "" {
		var n int64
		if err := t.q.QueryRow(ctx, `SELECT nextval(pg_get_serial_sequence('hosts', 'seq'))`).Scan(&n); err != nil {
			return dbError(err)
		}
		id, seq = strconv.FormatInt(n, 10), n
	}
	// ON CONFLICT DO NOTHING keeps the transaction usable after a duplicate.
	tag, err := t.q.Exec(ctx, `INSERT INTO hosts (seq, `+sqlcore.HostColumns+`)
		VALUES (COALESCE($1, nextval(pg_get_serial_sequence('hosts', 'seq'))), $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
		ON CONFLICT DO NOTHING`,
		append([]any{seq}, dialect.HostArgs(id, h)...)...)
	if err != nil {
		return dbError(err)
	}
	if tag.RowsAffected() == 0 {
		var idTaken bool
		if err := t.q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM hosts WHERE id = $1)`, id).Scan(&idTaken); err != nil {
			return dbError(err)
		}
		if idTaken {
			return climate.Errorf(climate.CodeConflict, "Host with id %s already exists", id)
		}
		return climate.Errorf(climate.CodeConflict, "Host %s already exists", h.HypervisorHostname)
	}
	h.ID = id
	return t.writeExtras(ctx, h)
}

// writeExtras replaces a host's extra capabilities, registering new property names, with
// three statements however many extras there are.
func (t *tx) writeExtras(ctx context.Context, h *climate.Host) error {
	if _, err := t.q.Exec(ctx, `DELETE FROM host_extras WHERE host_id = $1`, h.ID); err != nil {
		return dbError(err)
	}
	if len(h.Extra) == 0 {
		return nil
	}
	// A property first seen now was created by this write: the host's update, or its creation.
	created := h.UpdatedAt
	if created.IsZero() {
		created = h.CreatedAt
	}
	var ids, names, values []string
	for name, value := range h.Extra {
		ids, names, values = append(ids, climate.NewID()), append(names, name), append(values, value)
	}
	_, err := t.q.Exec(ctx, `INSERT INTO resource_properties (id, resource_type, name, private, created_at)
		SELECT p.id, $3, p.name, false, $4 FROM unnest($1::text[], $2::text[]) AS p (id, name)
		ON CONFLICT (resource_type, name) DO NOTHING`,
		ids, names, climate.ResourceTypeHost, ts(created))
	if err != nil {
		return dbError(err)
	}
	_, err = t.q.Exec(ctx, `INSERT INTO host_extras (host_id, property_id, value)
		SELECT $1, p.id, x.value FROM unnest($2::text[], $3::text[]) AS x (name, value)
		JOIN resource_properties p ON p.resource_type = $4 AND p.name = x.name`,
		h.ID, names, values, climate.ResourceTypeHost)
	return dbError(err)
}

// UpdateHost rewrites a host and replaces its extras.
func (t *tx) UpdateHost(ctx context.Context, h *climate.Host) error {
	if err := t.Writable(); err != nil {
		return err
	}
	// Checked first, so the transaction stays usable; a concurrent writer taking the same
	// name meanwhile is caught by the unique constraint below.
	var taken bool
	if err := t.q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM hosts WHERE hypervisor_hostname = $1 AND id <> $2)`,
		h.HypervisorHostname, h.ID).Scan(&taken); err != nil {
		return dbError(err)
	}
	if taken {
		return climate.Errorf(climate.CodeConflict, "Host %s already exists", h.HypervisorHostname)
	}
	n, err := t.UpdateHostRow(ctx, h)
	if sqlState(err) == sqlUniqueViolation {
		return climate.Errorf(climate.CodeConflict, "Host %s already exists", h.HypervisorHostname)
	}
	if err != nil {
		return dbError(err)
	}
	if n == 0 {
		return sqlcore.HostNotFound(h.ID)
	}
	return t.writeExtras(ctx, h)
}
