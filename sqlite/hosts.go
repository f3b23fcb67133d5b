package sqlite

import (
	"context"
	"database/sql"
	"strconv"
	"time"

	"climate"
)

const hostColumns = `id, hypervisor_hostname, service_name, vcpus, memory_mb, local_gb, cpu_info, hypervisor_type,
	hypervisor_version, availability_zone, trust_id, reservable, created_at, updated_at`

func hostNotFound(id string) error {
	return climate.Errorf(climate.CodeNotFound, "Object with {'host_id': '%s'} not found", id)
}

// InsertHost registers a host and its extra capabilities.
func (t *tx) InsertHost(ctx context.Context, h *climate.Host) error {
	if err := t.writable(); err != nil {
		return err
	}
	id := h.ID
	if id == "" {
		// A placeholder unique id, replaced by the row's sequence number below.
		id = "pending-" + climate.NewID()
	}
	res, err := t.q.ExecContext(ctx, `INSERT INTO hosts (`+hostColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		id, h.HypervisorHostname, h.ServiceName, h.VCPUs, h.MemoryMB, h.LocalGB, h.CPUInfo, h.HypervisorType,
		h.HypervisorVersion, h.AvailabilityZone, h.TrustID, h.Reservable, micros(h.CreatedAt), nullMicros(h.UpdatedAt))
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
	return t.bumpInventory(ctx)
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

func (t *tx) bumpInventory(ctx context.Context) error {
	_, err := t.q.ExecContext(ctx, `UPDATE meta SET value = value + 1 WHERE key = 'inventory_revision'`)
	return internal(err)
}

// GetHost returns one host.
func (t *tx) GetHost(ctx context.Context, id string) (*climate.Host, error) {
	hosts, err := t.loadHosts(ctx, "WHERE id = ?", id)
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
	rows, err := t.q.QueryContext(ctx, `SELECT `+hostColumns+`, p.state, p.changed_at, p.off_micros
		FROM hosts LEFT JOIN host_power p ON p.host_id = hosts.id `+where+` ORDER BY created_at, seq`, args...)
	if err != nil {
		return nil, internal(err)
	}
	var hosts []climate.Host
	index := map[string]int{}
	for rows.Next() {
		var h climate.Host
		var created int64
		var updated, powerChanged, offMicros sql.NullInt64
		var power sql.NullString
		if err := rows.Scan(&h.ID, &h.HypervisorHostname, &h.ServiceName, &h.VCPUs, &h.MemoryMB, &h.LocalGB, &h.CPUInfo,
			&h.HypervisorType, &h.HypervisorVersion, &h.AvailabilityZone, &h.TrustID, &h.Reservable, &created, &updated,
			&power, &powerChanged, &offMicros); err != nil {
			rows.Close()
			return nil, internal(err)
		}
		h.CreatedAt, h.UpdatedAt = fromMicros(created), fromNullMicros(updated)
		if power.Valid {
			h.Power = &climate.HostPower{HostID: h.ID, State: climate.PowerState(power.String),
				ChangedAt: fromNullMicros(powerChanged), OffBefore: time.Duration(offMicros.Int64) * time.Microsecond}
		}
		h.Extra = map[string]string{}
		index[h.ID] = len(hosts)
		hosts = append(hosts, h)
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(hosts) == 0 {
		return nil, internal(err)
	}
	rows, err = t.q.QueryContext(ctx, `SELECT e.host_id, p.name, e.value FROM host_extras e JOIN resource_properties p ON p.id = e.property_id
		WHERE e.host_id IN (SELECT id FROM hosts `+where+`)`, args...)
	if err != nil {
		return nil, internal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var hostID, name, value string
		if err := rows.Scan(&hostID, &name, &value); err != nil {
			return nil, internal(err)
		}
		if i, ok := index[hostID]; ok {
			hosts[i].Extra[name] = value
		}
	}
	return hosts, internal(rows.Err())
}

// UpdateHost rewrites a host and replaces its extras.
func (t *tx) UpdateHost(ctx context.Context, h *climate.Host) error {
	if err := t.writable(); err != nil {
		return err
	}
	res, err := t.q.ExecContext(ctx, `UPDATE hosts SET hypervisor_hostname = ?, service_name = ?, vcpus = ?, memory_mb = ?, local_gb = ?,
		cpu_info = ?, hypervisor_type = ?, hypervisor_version = ?, availability_zone = ?, trust_id = ?, reservable = ?, created_at = ?, updated_at = ?
		WHERE id = ?`,
		h.HypervisorHostname, h.ServiceName, h.VCPUs, h.MemoryMB, h.LocalGB, h.CPUInfo, h.HypervisorType, h.HypervisorVersion,
		h.AvailabilityZone, h.TrustID, h.Reservable, micros(h.CreatedAt), nullMicros(h.UpdatedAt), h.ID)
	if isUnique(err) {
		return climate.Errorf(climate.CodeConflict, "Host %s already exists", h.HypervisorHostname)
	}
	if err != nil {
		return internal(err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return hostNotFound(h.ID)
	}
	if err := t.writeExtras(ctx, h); err != nil {
		return err
	}
	return t.bumpInventory(ctx)
}

// DeleteHost removes a host; its extras cascade.
func (t *tx) DeleteHost(ctx context.Context, id string) error {
	if err := t.writable(); err != nil {
		return err
	}
	res, err := t.q.ExecContext(ctx, `DELETE FROM hosts WHERE id = ?`, id)
	if err != nil {
		return internal(err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return hostNotFound(id)
	}
	return t.bumpInventory(ctx)
}

// SetHostPower records a host's power state; the inventory revision stays.
func (t *tx) SetHostPower(ctx context.Context, p *climate.HostPower) error {
	if err := t.writable(); err != nil {
		return err
	}
	res, err := t.q.ExecContext(ctx, `INSERT INTO host_power (host_id, state, changed_at, off_micros)
		SELECT id, ?, ?, ? FROM hosts WHERE id = ?
		ON CONFLICT (host_id) DO UPDATE SET state = excluded.state, changed_at = excluded.changed_at, off_micros = excluded.off_micros`,
		string(p.State), micros(p.ChangedAt), p.OffBefore.Microseconds(), p.HostID)
	if err != nil {
		return internal(err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return hostNotFound(p.HostID)
	}
	return nil
}

// AllocationRevision returns the allocations' change counter (kept by triggers).
func (t *tx) AllocationRevision(ctx context.Context) (int64, error) {
	var rev int64
	err := t.q.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'allocation_revision'`).Scan(&rev)
	return rev, internal(err)
}

// InventoryRevision returns the inventory's change counter.
func (t *tx) InventoryRevision(ctx context.Context) (int64, error) {
	var rev int64
	err := t.q.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'inventory_revision'`).Scan(&rev)
	return rev, internal(err)
}

// ListResourceProperties returns the properties of a resource type by name.
func (t *tx) ListResourceProperties(ctx context.Context, resourceType string) ([]climate.ResourceProperty, error) {
	rows, err := t.q.QueryContext(ctx, `SELECT id, resource_type, name, private, created_at, updated_at
		FROM resource_properties WHERE resource_type = ? ORDER BY name`, resourceType)
	if err != nil {
		return nil, internal(err)
	}
	defer rows.Close()
	var out []climate.ResourceProperty
	for rows.Next() {
		var p climate.ResourceProperty
		var created int64
		var updated sql.NullInt64
		if err := rows.Scan(&p.ID, &p.ResourceType, &p.Name, &p.Private, &created, &updated); err != nil {
			return nil, internal(err)
		}
		p.CreatedAt, p.UpdatedAt = fromMicros(created), fromNullMicros(updated)
		out = append(out, p)
	}
	return out, internal(rows.Err())
}

// UpdateResourceProperty sets a property's private flag.
func (t *tx) UpdateResourceProperty(ctx context.Context, p *climate.ResourceProperty) error {
	if err := t.writable(); err != nil {
		return err
	}
	res, err := t.q.ExecContext(ctx, `UPDATE resource_properties SET private = ?, updated_at = ? WHERE resource_type = ? AND name = ?`,
		p.Private, nullMicros(p.UpdatedAt), p.ResourceType, p.Name)
	if err != nil {
		return internal(err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return climate.Errorf(climate.CodeNotFound, "Resource property %s not found", p.Name)
	}
	return t.bumpInventory(ctx)
}
