package openstack

import (
	"context"
	"fmt"
	"time"

	"github.com/gophercloud/gophercloud/v2"

	"climate"
)

// MonitorReason marks the maintenance windows the monitor opens, so that it closes only
// its own.
const MonitorReason = "Nova reports the hypervisor down or disabled (OpenStack monitor)"

// monitorWho is the identity the monitor acts as: an admin, named for the audit trail.
var monitorWho = climate.Identity{UserID: "climate-openstack-monitor", Roles: []string{"admin"}}

// Monitor is Blazar's polling host monitor: it asks Nova for the hypervisors' state and
// takes a host whose hypervisor is down or disabled out of service, as a maintenance
// window until further notice (which heals the reservations holding it: replanned,
// replaced, or flagged missing_resources), and puts it back when the hypervisor is up and
// enabled again (closing only the windows it opened). Healing's lease.healed notification
// then brings active aggregates in step (Changes).
type Monitor struct {
	Driver      *Driver
	Hosts       climate.HostService
	Maintenance climate.MaintenanceService
	// Leader, when set, says whether this replica runs the round (PostgreSQL: one does).
	Leader func(ctx context.Context) (bool, error)
}

// Run checks every interval until ctx is done.
func (m *Monitor) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if lead, err := m.lead(ctx); err != nil || lead {
			if err == nil {
				err = m.Check(ctx)
			}
			if err != nil && ctx.Err() == nil {
				m.Driver.cfg.Logger.Warn("openstack monitor: round failed; next round as usual", "err", err, "in", interval)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (m *Monitor) lead(ctx context.Context) (bool, error) {
	if m.Leader == nil {
		return true, nil
	}
	return m.Leader(ctx)
}

// Check runs one round.
func (m *Monitor) Check(ctx context.Context) error {
	var body struct {
		Hypervisors []struct {
			HypervisorHostname string `json:"hypervisor_hostname"`
			State              string `json:"state"`
			Status             string `json:"status"`
			Service            struct {
				Host string `json:"host"`
			} `json:"service"`
		} `json:"hypervisors"`
	}
	c := m.Driver.cfg.Compute
	err := m.Driver.retry(ctx, "list hypervisors", func(ctx context.Context) error {
		_, err := c.Get(ctx, c.ServiceURL("os-hypervisors", "detail"), &body,
			&gophercloud.RequestOpts{MoreHeaders: map[string]string{"X-OpenStack-Nova-API-Version": "2.1"}})
		return err
	})
	if err != nil {
		return err
	}
	down := map[string]bool{} // by service host and by hypervisor name
	for _, hv := range body.Hypervisors {
		bad := hv.State == "down" || hv.Status == "disabled"
		down[hv.HypervisorHostname] = bad
		down[hv.Service.Host] = bad
	}
	hosts, err := m.Hosts.ListHosts(ctx, monitorWho)
	if err != nil {
		return err
	}
	windows, err := m.Maintenance.ListMaintenances(ctx, monitorWho, "")
	if err != nil {
		return err
	}
	ours := map[string]string{} // host id → the monitor's open window
	for _, w := range windows {
		if w.Reason == MonitorReason && w.UntilFurtherNotice() {
			ours[w.HostID] = w.ID
		}
	}
	for _, h := range hosts {
		name := h.ServiceName
		if name == "" {
			name = h.HypervisorHostname
		}
		bad, known := down[name]
		if !known {
			continue // not Nova's: left alone
		}
		switch w, open := ours[h.ID]; {
		case bad && !open:
			_, healed, err := m.Maintenance.CreateMaintenance(ctx, monitorWho, h.ID, climate.MaintenanceRequest{Start: climate.Date{Now: true}, Reason: MonitorReason})
			if err != nil {
				return fmt.Errorf("taking host %s out of service: %w", name, err)
			}
			m.Driver.cfg.Logger.Warn("openstack monitor: hypervisor down or disabled: host out of service", "host", name, "healed", len(healed))
		case !bad && open:
			healed, err := m.Maintenance.DeleteMaintenance(ctx, monitorWho, h.ID, w)
			if err != nil {
				return fmt.Errorf("putting host %s back in service: %w", name, err)
			}
			m.Driver.cfg.Logger.Info("openstack monitor: hypervisor up and enabled: host back in service", "host", name, "healed", len(healed))
		}
	}
	return nil
}
