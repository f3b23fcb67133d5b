package postgres

import (
	"context"
	"strconv"
	"time"

	"climate"
)

const hostColumns = `id, hypervisor_hostname, service_name, vcpus, memory_mb, local_gb, cpu_info, hypervisor_type,
	hypervisor_version, availability_zone, trust_id, reservable, created_at, updated_at`

func hostNotFound(id string) error {
	return climate.Errorf(climate.CodeNotFound, "Object with {'host_id': '%s'} not found", id)
}

// InsertHost registers a host and its extra capabilities. The inventory revision is kept
// by triggers.
func (t *tx) InsertHost(ctx context.Context, h *climate.Host) error {
	if err := t.writable(); err != nil {
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
	tag, err := t.q.Exec(ctx, `INSERT INTO hosts (seq, `+hostColumns+`)
		VALUES (COALESCE($1, nextval(pg_get_serial_sequence('hosts', 'seq'))), $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
		ON CONFLICT DO NOTHING`,
		seq, id, h.HypervisorHostname, h.ServiceName, h.VCPUs, h.MemoryMB, h.LocalGB, h.CPUInfo, h.HypervisorType,
		h.HypervisorVersion, h.AvailabilityZone, h.TrustID, h.Reservable, ts(h.CreatedAt), nullTS(h.UpdatedAt))
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

// GetHost returns one host.
func (t *tx) GetHost(ctx context.Context, id string) (*climate.Host, error) {
	hosts, err := t.loadHosts(ctx, "WHERE id = $1", id)
	if err != nil {
		return nil, err
	}
	if len(hosts) == 0 {
		return nil, hostNotFound(id)
	}
	return &hosts[0], nil
}

// ListHosts returns every host by creation time; seq (registration order) breaks ties,
// where the id would put "10" before "2".
func (t *tx) ListHosts(ctx context.Context) ([]climate.Host, error) {
	return t.loadHosts(ctx, "")
}

// loadHosts loads hosts and their extras with two queries.
func (t *tx) loadHosts(ctx context.Context, where string, args ...any) ([]climate.Host, error) {
	rows, err := t.q.Query(ctx, `SELECT `+hostColumns+`, p.state, p.changed_at, p.off_micros
		FROM hosts LEFT JOIN host_power p ON p.host_id = hosts.id `+where+` ORDER BY created_at, seq`, args...)
	if err != nil {
		return nil, dbError(err)
	}
	var hosts []climate.Host
	index := map[string]int{}
	for rows.Next() {
		var h climate.Host
		var updated, powerChanged *time.Time
		var power *string
		var offMicros *int64
		if err := rows.Scan(&h.ID, &h.HypervisorHostname, &h.ServiceName, &h.VCPUs, &h.MemoryMB, &h.LocalGB, &h.CPUInfo,
			&h.HypervisorType, &h.HypervisorVersion, &h.AvailabilityZone, &h.TrustID, &h.Reservable, &h.CreatedAt, &updated,
			&power, &powerChanged, &offMicros); err != nil {
			rows.Close()
			return nil, dbError(err)
		}
		h.CreatedAt, h.UpdatedAt = fromTS(h.CreatedAt), fromNullTS(updated)
		if power != nil && powerChanged != nil && offMicros != nil {
			h.Power = &climate.HostPower{HostID: h.ID, State: climate.PowerState(*power),
				ChangedAt: fromTS(*powerChanged), OffBefore: time.Duration(*offMicros) * time.Microsecond}
		}
		h.Extra = map[string]string{}
		index[h.ID] = len(hosts)
		hosts = append(hosts, h)
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(hosts) == 0 {
		return nil, dbError(err)
	}
	rows, err = t.q.Query(ctx, `SELECT e.host_id, p.name, e.value FROM host_extras e JOIN resource_properties p ON p.id = e.property_id
		WHERE e.host_id IN (SELECT id FROM hosts `+where+`)`, args...)
	if err != nil {
		return nil, dbError(err)
	}
	defer rows.Close()
	for rows.Next() {
		var hostID, name, value string
		if err := rows.Scan(&hostID, &name, &value); err != nil {
			return nil, dbError(err)
		}
		if i, ok := index[hostID]; ok {
			hosts[i].Extra[name] = value
		}
	}
	return hosts, dbError(rows.Err())
}

// SetHostPower records a host's power state; the inventory revision stays.
func (t *tx) SetHostPower(ctx context.Context, p *climate.HostPower) error {
	if err := t.writable(); err != nil {
		return err
	}
	tag, err := t.q.Exec(ctx, `INSERT INTO host_power (host_id, state, changed_at, off_micros)
		SELECT id, $1, $2, $3 FROM hosts WHERE id = $4
		ON CONFLICT (host_id) DO UPDATE SET state = EXCLUDED.state, changed_at = EXCLUDED.changed_at, off_micros = EXCLUDED.off_micros`,
		string(p.State), ts(p.ChangedAt), p.OffBefore.Microseconds(), p.HostID)
	if err != nil {
		return dbError(err)
	}
	if tag.RowsAffected() == 0 {
		return hostNotFound(p.HostID)
	}
	return nil
}

// UpdateHost rewrites a host and replaces its extras.
func (t *tx) UpdateHost(ctx context.Context, h *climate.Host) error {
	if err := t.writable(); err != nil {
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
	tag, err := t.q.Exec(ctx, `UPDATE hosts SET hypervisor_hostname = $1, service_name = $2, vcpus = $3, memory_mb = $4, local_gb = $5,
		cpu_info = $6, hypervisor_type = $7, hypervisor_version = $8, availability_zone = $9, trust_id = $10, reservable = $11,
		created_at = $12, updated_at = $13 WHERE id = $14`,
		h.HypervisorHostname, h.ServiceName, h.VCPUs, h.MemoryMB, h.LocalGB, h.CPUInfo, h.HypervisorType, h.HypervisorVersion,
		h.AvailabilityZone, h.TrustID, h.Reservable, ts(h.CreatedAt), nullTS(h.UpdatedAt), h.ID)
	if sqlState(err) == sqlUniqueViolation {
		return climate.Errorf(climate.CodeConflict, "Host %s already exists", h.HypervisorHostname)
	}
	if err != nil {
		return dbError(err)
	}
	if tag.RowsAffected() == 0 {
		return hostNotFound(h.ID)
	}
	return t.writeExtras(ctx, h)
}

// DeleteHost removes a host; its extras cascade.
func (t *tx) DeleteHost(ctx context.Context, id string) error {
	if err := t.writable(); err != nil {
		return err
	}
	tag, err := t.q.Exec(ctx, `DELETE FROM hosts WHERE id = $1`, id)
	if err != nil {
		return dbError(err)
	}
	if tag.RowsAffected() == 0 {
		return hostNotFound(id)
	}
	return nil
}

// AllocationRevision returns the allocations' change counter (kept by triggers).
func (t *tx) AllocationRevision(ctx context.Context) (int64, error) {
	return t.meta(ctx, "allocation_revision")
}

// InventoryRevision returns the inventory's change counter (kept by triggers).
func (t *tx) InventoryRevision(ctx context.Context) (int64, error) {
	return t.meta(ctx, "inventory_revision")
}

func (t *tx) meta(ctx context.Context, key string) (int64, error) {
	var v int64
	err := t.q.QueryRow(ctx, `SELECT value FROM meta WHERE key = $1`, key).Scan(&v)
	return v, dbError(err)
}

// ListResourceProperties returns the properties of a resource type by name.
func (t *tx) ListResourceProperties(ctx context.Context, resourceType string) ([]climate.ResourceProperty, error) {
	rows, err := t.q.Query(ctx, `SELECT id, resource_type, name, private, created_at, updated_at
		FROM resource_properties WHERE resource_type = $1 ORDER BY name`, resourceType)
	if err != nil {
		return nil, dbError(err)
	}
	defer rows.Close()
	var out []climate.ResourceProperty
	for rows.Next() {
		var p climate.ResourceProperty
		var updated *time.Time
		if err := rows.Scan(&p.ID, &p.ResourceType, &p.Name, &p.Private, &p.CreatedAt, &updated); err != nil {
			return nil, dbError(err)
		}
		p.CreatedAt, p.UpdatedAt = fromTS(p.CreatedAt), fromNullTS(updated)
		out = append(out, p)
	}
	return out, dbError(rows.Err())
}

// UpdateResourceProperty sets a property's private flag.
func (t *tx) UpdateResourceProperty(ctx context.Context, p *climate.ResourceProperty) error {
	if err := t.writable(); err != nil {
		return err
	}
	tag, err := t.q.Exec(ctx, `UPDATE resource_properties SET private = $1, updated_at = $2 WHERE resource_type = $3 AND name = $4`,
		p.Private, nullTS(p.UpdatedAt), p.ResourceType, p.Name)
	if err != nil {
		return dbError(err)
	}
	if tag.RowsAffected() == 0 {
		return climate.Errorf(climate.CodeNotFound, "Resource property %s not found", p.Name)
	}
	return nil
}
