package sqlcore

import (
	"context"
	"database/sql"
	"time"

	"climate"
)

// HostColumns are the columns of a host row (but its registration order, seq).
const HostColumns = `id, hypervisor_hostname, service_name, vcpus, memory_mb, local_gb, cpu_info, hypervisor_type,
	hypervisor_version, availability_zone, trust_id, reservable, created_at, updated_at`

// HostNotFound is the error of an unknown host id.
func HostNotFound(id string) error {
	return climate.Errorf(climate.CodeNotFound, "Object with {'host_id': '%s'} not found", id)
}

// HostArgs are h's HostColumns, with id for its id.
func (d *Dialect) HostArgs(id string, h *climate.Host) []any {
	return []any{id, h.HypervisorHostname, h.ServiceName, h.VCPUs, h.MemoryMB, h.LocalGB, h.CPUInfo, h.HypervisorType,
		h.HypervisorVersion, h.AvailabilityZone, h.TrustID, h.Reservable, d.Time(h.CreatedAt), d.NullTime(h.UpdatedAt)}
}

// UpdateHostRow rewrites h's row and returns how many rows changed (0: no such host).
func (t *Tx) UpdateHostRow(ctx context.Context, h *climate.Host) (int64, error) {
	d := t.D
	return t.Q.Exec(ctx, `UPDATE hosts SET hypervisor_hostname = ?, service_name = ?, vcpus = ?, memory_mb = ?, local_gb = ?,
		cpu_info = ?, hypervisor_type = ?, hypervisor_version = ?, availability_zone = ?, trust_id = ?, reservable = ?,
		created_at = ?, updated_at = ? WHERE id = ?`,
		h.HypervisorHostname, h.ServiceName, h.VCPUs, h.MemoryMB, h.LocalGB, h.CPUInfo, h.HypervisorType, h.HypervisorVersion,
		h.AvailabilityZone, h.TrustID, h.Reservable, d.Time(h.CreatedAt), d.NullTime(h.UpdatedAt), h.ID)
}

// GetHost returns one host.
func (t *Tx) GetHost(ctx context.Context, id string) (*climate.Host, error) {
	hosts, err := t.loadHosts(ctx, "WHERE id = ?", id)
	return first(hosts, err, func() error { return HostNotFound(id) })
}

// ListHosts returns every host by creation time; seq (registration order) breaks ties,
// where the id would put "10" before "2".
func (t *Tx) ListHosts(ctx context.Context) ([]climate.Host, error) {
	return t.loadHosts(ctx, "")
}

// loadHosts loads hosts and their extras with two queries.
func (t *Tx) loadHosts(ctx context.Context, where string, args ...any) ([]climate.Host, error) {
	var hosts []climate.Host
	index := map[string]int{}
	err := each(ctx, t, hostRow, func(h *climate.Host) {
		h.Extra = map[string]string{}
		index[h.ID] = len(hosts)
		hosts = append(hosts, *h)
	}, `SELECT `+HostColumns+`, p.state, p.changed_at, p.off_micros
		FROM hosts LEFT JOIN host_power p ON p.host_id = hosts.id `+where+` ORDER BY created_at, seq`, args...)
	if err != nil || len(hosts) == 0 {
		return nil, err
	}
	type extra struct{ hostID, name, value string }
	err = each(ctx, t, func(x *extra) ([]any, func() error) { return []any{&x.hostID, &x.name, &x.value}, nil },
		func(x *extra) {
			if i, ok := index[x.hostID]; ok {
				hosts[i].Extra[x.name] = x.value
			}
		}, `SELECT e.host_id, p.name, e.value FROM host_extras e JOIN resource_properties p ON p.id = e.property_id
		WHERE e.host_id IN (SELECT id FROM hosts `+where+`)`, args...)
	if err != nil {
		return nil, err
	}
	return hosts, nil
}

// hostRow maps a row of HostColumns and the host's power columns.
func hostRow(h *climate.Host) ([]any, func() error) {
	var powerChanged time.Time
	var offMicros sql.NullInt64
	var power sql.NullString
	return []any{&h.ID, &h.HypervisorHostname, &h.ServiceName, &h.VCPUs, &h.MemoryMB, &h.LocalGB, &h.CPUInfo,
			&h.HypervisorType, &h.HypervisorVersion, &h.AvailabilityZone, &h.TrustID, &h.Reservable,
			ScanTime(&h.CreatedAt), ScanTime(&h.UpdatedAt), &power, ScanTime(&powerChanged), &offMicros},
		func() error {
			h.Power = nil
			if power.Valid { // the power row's columns are all set
				h.Power = &climate.HostPower{HostID: h.ID, State: climate.PowerState(power.String),
					ChangedAt: powerChanged, OffBefore: time.Duration(offMicros.Int64) * time.Microsecond}
			}
			return nil
		}
}

// DeleteHost removes a host; its extras cascade.
func (t *Tx) DeleteHost(ctx context.Context, id string) error {
	if err := t.Writable(); err != nil {
		return err
	}
	n, err := t.Q.Exec(ctx, `DELETE FROM hosts WHERE id = ?`, id)
	if err := t.affected(n, err, func() error { return HostNotFound(id) }); err != nil {
		return err
	}
	return t.BumpInventory(ctx)
}

// SetHostPower records a host's power state; the inventory revision stays.
func (t *Tx) SetHostPower(ctx context.Context, p *climate.HostPower) error {
	if err := t.Writable(); err != nil {
		return err
	}
	n, err := t.Q.Exec(ctx, `INSERT INTO host_power (host_id, state, changed_at, off_micros)
		SELECT id, ?, ?, ? FROM hosts WHERE id = ?
		ON CONFLICT (host_id) DO UPDATE SET state = excluded.state, changed_at = excluded.changed_at, off_micros = excluded.off_micros`,
		string(p.State), t.D.Time(p.ChangedAt), p.OffBefore.Microseconds(), p.HostID)
	return t.affected(n, err, func() error { return HostNotFound(p.HostID) })
}

// InventoryRevision returns the inventory's change counter. (The allocations' is each
// store's own: SQLite's is its log's newest revision, PostgreSQL's a counter the commit
// stamp moves.)
func (t *Tx) InventoryRevision(ctx context.Context) (int64, error) {
	return t.Meta(ctx, InventoryKey)
}

// InventoryKey is the inventory revision's key in the meta table.
const InventoryKey = "inventory_revision"

// MetaQuery reads the counter of a key (its parameter) from the meta table.
const MetaQuery = `SELECT value FROM meta WHERE key = ?`

// Meta returns the counter key of the meta table.
func (t *Tx) Meta(ctx context.Context, key string) (int64, error) {
	var v int64
	err := t.Q.QueryRow(ctx, MetaQuery, key).Scan(&v)
	return v, t.D.Err(err)
}

// ListResourceProperties returns the properties of a resource type by name.
func (t *Tx) ListResourceProperties(ctx context.Context, resourceType string) ([]climate.ResourceProperty, error) {
	return list(ctx, t, func(p *climate.ResourceProperty) ([]any, func() error) {
		return []any{&p.ID, &p.ResourceType, &p.Name, &p.Private, ScanTime(&p.CreatedAt), ScanTime(&p.UpdatedAt)}, nil
	}, `SELECT id, resource_type, name, private, created_at, updated_at
		FROM resource_properties WHERE resource_type = ? ORDER BY name`, resourceType)
}

// UpdateResourceProperty sets a property's private flag.
func (t *Tx) UpdateResourceProperty(ctx context.Context, p *climate.ResourceProperty) error {
	if err := t.Writable(); err != nil {
		return err
	}
	n, err := t.Q.Exec(ctx, `UPDATE resource_properties SET private = ?, updated_at = ? WHERE resource_type = ? AND name = ?`,
		p.Private, t.D.NullTime(p.UpdatedAt), p.ResourceType, p.Name)
	if err := t.affected(n, err, func() error {
		return climate.Errorf(climate.CodeNotFound, "Resource property %s not found", p.Name)
	}); err != nil {
		return err
	}
	return t.BumpInventory(ctx)
}
