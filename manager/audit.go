package manager

import (
	"context"
	"maps"
	"slices"
	"strconv"

	"climate"
)

// Audit actions the manager records (climate.Audit writes them, in the change's own
// transaction).
const (
	auditLeaseCreate    = "lease.create"
	auditLeaseUpdate    = "lease.update"
	auditLeaseDelete    = "lease.delete"
	auditLeaseBooked    = "lease.booked"    // a waiting lease fits (the service)
	auditLeaseGaveUp    = "lease.gave_up"   // a waiting lease reached max_retries (the service)
	auditLeasePreempted = "lease.preempted" // a preemptible lease's hosts taken back (the service)
)

// audit records a change in tx: one implementation, climate.Audit, for every write path.
func (m *Manager) audit(ctx context.Context, tx climate.Tx, by climate.Auditor, action string, target climate.AuditTarget, before, after map[string]any) error {
	return climate.Audit(ctx, tx, by, action, target, before, after, m.now())
}

func hostAuditTarget(h *climate.Host) climate.AuditTarget {
	return climate.AuditTarget{Type: "host", ID: h.ID, HostID: h.ID}
}

// hostSummary is a host's fields and extra capabilities (its trust id left out).
func hostSummary(h *climate.Host) map[string]any {
	if h == nil {
		return nil
	}
	s := map[string]any{
		"hypervisor_hostname": h.HypervisorHostname, "service_name": h.ServiceName, "vcpus": h.VCPUs,
		"memory_mb": h.MemoryMB, "local_gb": h.LocalGB, "cpu_info": h.CPUInfo, "hypervisor_type": h.HypervisorType,
		"hypervisor_version": h.HypervisorVersion, "availability_zone": h.AvailabilityZone, "reservable": h.Reservable,
	}
	for _, k := range slices.Sorted(maps.Keys(h.Extra)) {
		if _, builtin := s[k]; !builtin {
			s[k] = h.Extra[k]
		}
	}
	return s
}

func maintenanceAuditTarget(w *climate.Maintenance) climate.AuditTarget {
	return climate.AuditTarget{Type: "maintenance", ID: w.ID, HostID: w.HostID}
}

func maintenanceSummary(w *climate.Maintenance) map[string]any {
	return map[string]any{"host_id": w.HostID, "start": climate.AuditTime(w.Start), "end": climate.AuditTime(w.End), "reason": w.Reason}
}

func floatingIPSummary(f *climate.FloatingIP) map[string]any {
	return map[string]any{"floating_network_id": f.FloatingNetworkID, "subnet_id": f.SubnetID,
		"floating_ip_address": f.Address, "reservable": f.Reservable}
}

func flavorSummary(f *climate.Flavor) map[string]any {
	s := map[string]any{"name": f.Name, "vcpus": f.VCPUs, "ram": f.RAM, "disk": f.Disk, "ephemeral": f.Ephemeral}
	if len(f.ExtraSpecs) > 0 {
		s["extra_specs"] = f.ExtraSpecs
	}
	return s
}

// auditRule is the policy rule of the audit trail (admins, by default).
const auditRule = "climate:audit:get"

// ListAudit passes the audit entries matching q to fn, batch by batch (admins only),
// and reports whether more follow q.Limit (climate.AuditService). Each batch is its own
// read transaction; entries are listed by id, that is in commit order.
func (m *Manager) ListAudit(ctx context.Context, who climate.Identity, q climate.AuditQuery, fn func([]climate.AuditEntry) error) (more bool, err error) {
	if err := m.allow(who, auditRule, who.OwnTarget()); err != nil {
		return false, err
	}
	if q.Limit < 0 {
		return false, invalid("Invalid limit %d: expected a positive number", q.Limit)
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && !q.Until.After(q.Since) {
		return false, invalid("until must be later than since")
	}
	f := climate.AuditFilter{LeaseID: q.LeaseID, HostID: q.HostID, ProjectID: q.ProjectID, Since: q.Since, Until: q.Until}
	if q.Marker != "" {
		n, err := strconv.ParseInt(q.Marker, 10, 64)
		if err != nil || n <= 0 {
			return false, markerNotFound("audit entry", q.Marker)
		}
		f.After = n
	}
	return pages(q.Limit, func(n int) ([]climate.AuditEntry, error) {
		f.Limit = n
		var batch []climate.AuditEntry
		err := m.store.View(ctx, func(tx climate.Tx) (err error) {
			batch, err = tx.ListAudit(ctx, f)
			return err
		})
		if len(batch) > 0 {
			f.After = batch[len(batch)-1].ID
		}
		return batch, err
	}, fn)
}
