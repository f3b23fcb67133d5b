package manager

import (
	"context"

	"climate"
)

// CollectLeases returns in one slice the leases ListLeases passes in batches.
func CollectLeases(ctx context.Context, m *Manager, who climate.Identity, q climate.LeaseQuery) (leases []climate.Lease, more bool, err error) {
	more, err = m.ListLeases(ctx, who, q, func(batch []climate.Lease) error {
		leases = append(leases, batch...)
		return nil
	})
	return leases, more, err
}

// CollectAudit returns in one slice the entries ListAudit passes in batches.
func CollectAudit(ctx context.Context, m *Manager, who climate.Identity, q climate.AuditQuery) (entries []climate.AuditEntry, more bool, err error) {
	more, err = m.ListAudit(ctx, who, q, func(batch []climate.AuditEntry) error {
		entries = append(entries, batch...)
		return nil
	})
	return entries, more, err
}
