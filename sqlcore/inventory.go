package sqlcore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"climate"
)

// FlavorColumns are the columns of a flavor row, in FlavorArgs' order.
const FlavorColumns = `id, name, vcpus, ram, disk, ephemeral, extra_specs, created_at, updated_at`

// FlavorArgs are f's FlavorColumns.
func (d *Dialect) FlavorArgs(f *climate.Flavor) []any {
	return []any{f.ID, f.Name, f.VCPUs, f.RAM, f.Disk, f.Ephemeral, encodeExtraSpecs(f.ExtraSpecs), d.Time(f.CreatedAt), d.NullTime(f.UpdatedAt)}
}

// GetFlavor returns one flavor.
func (t *Tx) GetFlavor(ctx context.Context, id string) (*climate.Flavor, error) {
	fs, err := t.loadFlavors(ctx, `WHERE id = ?`, id)
	return first(fs, err, func() error { return climate.FlavorNotFound(id) })
}

// ListFlavors returns every flavor by creation time, then id.
func (t *Tx) ListFlavors(ctx context.Context) ([]climate.Flavor, error) {
	return t.loadFlavors(ctx, "")
}

func (t *Tx) loadFlavors(ctx context.Context, where string, args ...any) ([]climate.Flavor, error) {
	return list(ctx, t, func(f *climate.Flavor) ([]any, func() error) {
		var specs string
		return []any{&f.ID, &f.Name, &f.VCPUs, &f.RAM, &f.Disk, &f.Ephemeral, &specs, ScanTime(&f.CreatedAt), ScanTime(&f.UpdatedAt)},
			func() (err error) {
				f.ExtraSpecs, err = decodeExtraSpecs(specs)
				return err
			}
	}, `SELECT `+FlavorColumns+` FROM flavors `+where+` ORDER BY created_at, id`, args...)
}

// DeleteFlavor deletes a flavor.
func (t *Tx) DeleteFlavor(ctx context.Context, id string) error {
	if err := t.Writable(); err != nil {
		return err
	}
	n, err := t.Q.Exec(ctx, `DELETE FROM flavors WHERE id = ?`, id)
	return t.affected(n, err, func() error { return climate.FlavorNotFound(id) })
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
		return nil, fmt.Errorf("extra_specs %q: %w", s, err)
	}
	if len(specs) == 0 {
		return nil, nil
	}
	return specs, nil
}

// FloatingIPColumns are the columns of a floating IP row, in FloatingIPArgs' order.
const FloatingIPColumns = `id, floating_network_id, subnet_id, floating_ip_address, reservable, created_at, updated_at`

// FloatingIPArgs are f's FloatingIPColumns.
func (d *Dialect) FloatingIPArgs(f *climate.FloatingIP) []any {
	return []any{f.ID, f.FloatingNetworkID, f.SubnetID, f.Address, f.Reservable, d.Time(f.CreatedAt), d.NullTime(f.UpdatedAt)}
}

// FloatingIPTaken is the conflict of an address already registered on its network (as
// floating IP id).
func FloatingIPTaken(f *climate.FloatingIP, id string) error {
	return climate.Errorf(climate.CodeConflict, "Floating IP %s is already registered on network %s (floating IP %s)",
		f.Address, f.FloatingNetworkID, id)
}

// FloatingIPAt returns the id of the floating IP registered at f's address on f's
// network; the error matches IsNoRows when there is none.
func (t *Tx) FloatingIPAt(ctx context.Context, f *climate.FloatingIP) (string, error) {
	var id string
	err := t.Q.QueryRow(ctx, `SELECT id FROM floatingips WHERE floating_network_id = ? AND floating_ip_address = ?`,
		f.FloatingNetworkID, f.Address).Scan(&id)
	return id, err
}

// GetFloatingIP returns one floating IP.
func (t *Tx) GetFloatingIP(ctx context.Context, id string) (*climate.FloatingIP, error) {
	fs, err := t.loadFloatingIPs(ctx, `WHERE id = ?`, id)
	return first(fs, err, func() error { return climate.FloatingIPNotFound(id) })
}

// ListFloatingIPs returns every floating IP by creation time, then id.
func (t *Tx) ListFloatingIPs(ctx context.Context) ([]climate.FloatingIP, error) {
	return t.loadFloatingIPs(ctx, "")
}

func (t *Tx) loadFloatingIPs(ctx context.Context, where string, args ...any) ([]climate.FloatingIP, error) {
	return list(ctx, t, func(f *climate.FloatingIP) ([]any, func() error) {
		return []any{&f.ID, &f.FloatingNetworkID, &f.SubnetID, &f.Address, &f.Reservable, ScanTime(&f.CreatedAt), ScanTime(&f.UpdatedAt)}, nil
	}, `SELECT `+FloatingIPColumns+` FROM floatingips `+where+` ORDER BY created_at, id`, args...)
}

// DeleteFloatingIP deletes a floating IP and moves the inventory revision.
func (t *Tx) DeleteFloatingIP(ctx context.Context, id string) error {
	if err := t.Writable(); err != nil {
		return err
	}
	n, err := t.Q.Exec(ctx, `DELETE FROM floatingips WHERE id = ?`, id)
	if err := t.affected(n, err, func() error { return climate.FloatingIPNotFound(id) }); err != nil {
		return err
	}
	return t.BumpInventory(ctx)
}

// MaintenanceColumns are the columns of a maintenance row.
const MaintenanceColumns = `id, host_id, start_at, end_at, reason, created_at`

// MaintenanceNotFound is the error of an unknown window id.
func MaintenanceNotFound(id string) error {
	return climate.Errorf(climate.CodeNotFound, "Object with {'maintenance_id': '%s'} not found", id)
}

// InsertMaintenance is the insert of a window of an existing host (no row when there is
// no such host), with MaintenanceArgs; a store adds its conflict handling.
const InsertMaintenance = `INSERT INTO maintenances (` + MaintenanceColumns + `)
		SELECT ?, id, ?, ?, ?, ? FROM hosts WHERE id = ?`

// MaintenanceArgs are InsertMaintenance's parameters for m.
func (d *Dialect) MaintenanceArgs(m *climate.Maintenance) []any {
	return []any{m.ID, d.Time(m.Start), d.NullTime(m.End), m.Reason, d.Time(m.CreatedAt), m.HostID}
}

// GetMaintenance returns one window.
func (t *Tx) GetMaintenance(ctx context.Context, id string) (*climate.Maintenance, error) {
	ms, err := t.loadMaintenances(ctx, `WHERE id = ?`, id)
	return first(ms, err, func() error { return MaintenanceNotFound(id) })
}

// ListMaintenances returns the windows matching f by start, then id.
func (t *Tx) ListMaintenances(ctx context.Context, f climate.MaintenanceFilter) ([]climate.Maintenance, error) {
	var where []string
	var args []any
	if f.HostID != "" {
		where, args = append(where, `host_id = ?`), append(args, f.HostID)
	}
	if !f.From.IsZero() {
		where, args = append(where, `(end_at IS NULL OR end_at > ?)`), append(args, t.D.Time(f.From))
	}
	if len(where) == 0 {
		return t.loadMaintenances(ctx, "")
	}
	return t.loadMaintenances(ctx, `WHERE `+strings.Join(where, ` AND `), args...)
}

func (t *Tx) loadMaintenances(ctx context.Context, where string, args ...any) ([]climate.Maintenance, error) {
	return list(ctx, t, func(m *climate.Maintenance) ([]any, func() error) {
		return []any{&m.ID, &m.HostID, ScanTime(&m.Start), ScanTime(&m.End), &m.Reason, ScanTime(&m.CreatedAt)}, nil
	}, `SELECT `+MaintenanceColumns+` FROM maintenances `+where+` ORDER BY start_at, id`, args...)
}

// DeleteMaintenance deletes a window and moves the inventory revision.
func (t *Tx) DeleteMaintenance(ctx context.Context, id string) error {
	if err := t.Writable(); err != nil {
		return err
	}
	n, err := t.Q.Exec(ctx, `DELETE FROM maintenances WHERE id = ?`, id)
	if err := t.affected(n, err, func() error { return MaintenanceNotFound(id) }); err != nil {
		return err
	}
	return t.BumpInventory(ctx)
}
