package openstack

import (
	"context"
	"encoding/json"
	"fmt"

	"climate"
)

// Deletions releases in Nova what a deleted lease held, as Blazar ends a started lease
// that is deleted: its hosts' servers deleted and waited for, the hosts back in the
// freepool, the aggregate deleted. It is a notification destination (notify.Destination):
// a deletion removes the lease's events with it, so its lease.delete notification,
// written in the same transaction and delivered at least once with retries, is what
// carries the release. A lease that never started has no aggregate: nothing to do.
type Deletions struct{ Driver *Driver }

// Name is the destination's delivery cursor.
func (Deletions) Name() string { return "openstack" }

// Accepts takes lease deletions only.
func (Deletions) Accepts(n *climate.Notification) bool {
	return n.EventType == climate.NotifyLeaseDelete
}

// Deliver releases the aggregate of each physical:host reservation of the deleted lease.
func (d Deletions) Deliver(ctx context.Context, n *climate.Notification) error {
	// The payload is the lease as the API shows it.
	var lease struct {
		Reservations []struct {
			ID           string `json:"id"`
			ResourceType string `json:"resource_type"`
		} `json:"reservations"`
	}
	if err := json.Unmarshal(n.Payload, &lease); err != nil {
		return fmt.Errorf("lease %s: reading its deletion: %w", n.LeaseID, err)
	}
	for _, r := range lease.Reservations {
		if r.ResourceType != climate.ResourceTypeHost {
			continue
		}
		if err := d.Driver.release(ctx, r.ID, true); err != nil {
			return fmt.Errorf("lease %s deleted: reservation %s: %w", n.LeaseID, r.ID, err)
		}
	}
	return nil
}
