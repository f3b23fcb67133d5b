package manager

import (
	"context"
	"slices"
	"time"

	"climate"
)

// maintenanceRule guards every maintenance window use-case (admins by default).
const maintenanceRule = "climate:oshosts:maintenance"

// maintenanceForever is where a window "until further notice" ends in the planner's
// index: after every lease (dates stop at climate.MaxDate) and after endOfTime, so an
// earliest-window search never takes the host's return as an instant something frees.
var maintenanceForever = endOfTime.AddDate(0, 6, 0)

// maintenanceLoad is the load a window puts on its host in the index: more than any host
// has, so no instance slot fits beside it, and a hold of slots, so the host cannot be
// given whole either; holds of slots may overlap the host's other allocations, as a
// window overlaps the allocations it heals. Sums of a few of them cannot overflow.
var maintenanceLoad = climate.Size{VCPUs: 1 << 40, MemoryMB: 1 << 40, DiskGB: 1 << 40}

// maintenanceHolds returns the index's holds for maintenance windows: each keeps its host
// busy from its start until its end (or forever), as a lease of its own would.
func maintenanceHolds(ms []climate.Maintenance) []climate.Allocation {
	out := make([]climate.Allocation, len(ms))
	for i, w := range ms {
		end := w.End
		if end.IsZero() {
			end = maintenanceForever
		}
		id := "maintenance:" + w.ID
		out[i] = climate.Allocation{ID: id, ReservationID: id, LeaseID: id, ResourceID: w.HostID, Start: w.Start, End: end,
			Slots: 1, Size: maintenanceLoad}
	}
	return out
}

// maintenanceHook, given the maintenance windows a view is about to hold (read in its
// snapshot, through tx), returns those it is to hold instead: healing plans on a view with
// the window it writes already added, or removed.
type maintenanceHook func(tx climate.Tx, ms []climate.Maintenance) ([]climate.Maintenance, error)

// withMaintenance returns allocs and the holds of the maintenance windows that may still
// matter (as hook adjusts them, when set), for a view built in tx's snapshot: the planner
// then sees every host busy during its windows.
func (m *Manager) withMaintenance(ctx context.Context, tx climate.Tx, allocs []climate.Allocation, hook maintenanceHook) ([]climate.Allocation, error) {
	ms, err := tx.ListMaintenances(ctx, climate.MaintenanceFilter{From: m.now().Add(-historyKept)})
	if err != nil {
		return nil, err
	}
	if hook != nil {
		if ms, err = hook(tx, ms); err != nil {
			return nil, err
		}
	}
	return append(allocs, maintenanceHolds(ms)...), nil
}

// CreateMaintenance takes a host out of service from req.Start until req.End (unset:
// until further notice) and, in the same transaction, heals the reservations holding it
// then (healing.go).
func (m *Manager) CreateMaintenance(ctx context.Context, who climate.Identity, hostID string, req climate.MaintenanceRequest) (*climate.Maintenance, []climate.Healing, error) {
	if err := m.allow(who, maintenanceRule, who.OwnTarget()); err != nil {
		return nil, nil, err
	}
	now := m.now()
	w := &climate.Maintenance{ID: climate.NewID(), HostID: hostID, Reason: req.Reason, CreatedAt: now}
	if !req.Start.IsSet() {
		return nil, nil, invalid("Missing parameter start: a date, or \"now\"")
	}
	if req.Start.Earliest || req.End.Earliest {
		return nil, nil, invalid("A maintenance window's start and end are dates (or \"now\" for the start), not \"earliest\"")
	}
	if req.End.Now {
		return nil, nil, invalid("A maintenance window cannot end \"now\": delete it to put the host back in service")
	}
	w.Start = resolve(req.Start, now)
	if req.End.IsSet() {
		w.End = resolve(req.End, now)
		if !w.End.After(w.Start) {
			return nil, nil, invalid("The end of a maintenance window must be later than its start")
		}
		if !w.End.After(now) {
			return nil, nil, invalid("The end of a maintenance window must be later than the current date")
		}
	}
	if err := climate.CheckText("Maintenance reason", req.Reason, climate.MaxTextLength); err != nil {
		return nil, nil, err
	}
	if _, err := m.host(ctx, hostID); err != nil {
		return nil, nil, err
	}
	healed, err := m.heal(ctx, maintenanceChange{add: w, who: who})
	if err != nil {
		return nil, nil, err
	}
	m.WakeRetries() // the retry worker times the window's end (healing then)
	return w, healed, nil
}

// host reads a host (CodeNotFound when unknown).
func (m *Manager) host(ctx context.Context, id string) (*climate.Host, error) {
	var h *climate.Host
	err := m.store.View(ctx, func(tx climate.Tx) error {
		var err error
		h, err = tx.GetHost(ctx, id)
		return err
	})
	return h, err
}

// ListMaintenances returns a host's maintenance windows (every host's when hostID is ""),
// by start.
func (m *Manager) ListMaintenances(ctx context.Context, who climate.Identity, hostID string) ([]climate.Maintenance, error) {
	if err := m.allow(who, maintenanceRule, who.OwnTarget()); err != nil {
		return nil, err
	}
	var out []climate.Maintenance
	err := m.store.View(ctx, func(tx climate.Tx) error {
		if hostID != "" {
			if _, err := tx.GetHost(ctx, hostID); err != nil {
				return err
			}
		}
		var err error
		out, err = tx.ListMaintenances(ctx, climate.MaintenanceFilter{HostID: hostID})
		return err
	})
	return out, err
}

// GetMaintenance returns one of a host's maintenance windows.
func (m *Manager) GetMaintenance(ctx context.Context, who climate.Identity, hostID, id string) (*climate.Maintenance, error) {
	if err := m.allow(who, maintenanceRule, who.OwnTarget()); err != nil {
		return nil, err
	}
	var w *climate.Maintenance
	err := m.store.View(ctx, func(tx climate.Tx) error {
		var err error
		w, err = m.hostMaintenance(ctx, tx, hostID, id)
		return err
	})
	return w, err
}

// hostMaintenance reads a window of a host: not found when either is unknown, or the
// window is another host's.
func (m *Manager) hostMaintenance(ctx context.Context, tx climate.Tx, hostID, id string) (*climate.Maintenance, error) {
	if _, err := tx.GetHost(ctx, hostID); err != nil {
		return nil, err
	}
	w, err := tx.GetMaintenance(ctx, id)
	if err == nil && w.HostID != hostID {
		err = climate.Errorf(climate.CodeNotFound, "Object with {'maintenance_id': '%s'} not found", id)
	}
	return w, err
}

// DeleteMaintenance puts a host back in service (as far as that window goes) and heals
// again in the same transaction: reservations it degraded are whole again, and those
// other windows degraded may now find a replacement.
func (m *Manager) DeleteMaintenance(ctx context.Context, who climate.Identity, hostID, id string) ([]climate.Healing, error) {
	if err := m.allow(who, maintenanceRule, who.OwnTarget()); err != nil {
		return nil, err
	}
	var w *climate.Maintenance
	err := m.store.View(ctx, func(tx climate.Tx) error {
		var err error
		w, err = m.hostMaintenance(ctx, tx, hostID, id)
		return err
	})
	if err != nil {
		return nil, err
	}
	healed, err := m.heal(ctx, maintenanceChange{remove: w, who: who})
	if err != nil {
		return nil, err
	}
	m.WakeRetries() // the host is back: waiting leases may fit
	return healed, nil
}

// inMaintenance returns the first of windows on host overlapping [s, e), or nil.
func inMaintenance(windows []climate.Maintenance, host string, s, e time.Time) *climate.Maintenance {
	i := slices.IndexFunc(windows, func(w climate.Maintenance) bool { return w.HostID == host && w.Overlaps(s, e) })
	if i < 0 {
		return nil
	}
	return &windows[i]
}
