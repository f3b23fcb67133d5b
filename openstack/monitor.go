package openstack

import (
	"context"
	"fmt"
	"sync"
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
//
// Nova's notifications (Listener) feed the same decision: a service.update is Observe of
// one host, the poll's round Check of all; both end in apply, one at a time.
type Monitor struct {
	Driver      *Driver
	Hosts       climate.HostService
	Maintenance climate.MaintenanceService
	// Leader, when set, says whether this replica runs the round (PostgreSQL: one does).
	Leader func(ctx context.Context) (bool, error)

	// mu serializes the rounds and the notifications' decisions, so that each reads the
	// windows the previous one left (no window opened twice) and a round that read Nova
	// before a notification cannot apply its older view after it.
	mu sync.Mutex
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

// Check runs one round: Nova's hypervisors, then the decision for every host of Nova's.
func (m *Monitor) Check(ctx context.Context) error { return m.check(ctx, "poll") }

// check is Check, via saying for the log why the round ran.
func (m *Monitor) check(ctx context.Context, via string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	down, err := m.hypervisors(ctx)
	if err != nil {
		return err
	}
	return m.apply(ctx, down, via)
}

// Observe applies what Nova said of one compute service (a service.update notification):
// down (disabled or forced down) takes the host whose service name (or, without one,
// hypervisor name) is host out of service, and up puts it back, as a round would. A host
// Climate does not have is left alone.
func (m *Monitor) Observe(ctx context.Context, host string, down bool, via string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.apply(ctx, map[string]bool{host: down}, via)
}

// hypervisors asks Nova which hypervisors are down or disabled, by service host and by
// hypervisor name.
func (m *Monitor) hypervisors(ctx context.Context) (map[string]bool, error) {
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
		return nil, err
	}
	down := map[string]bool{} // by service host and by hypervisor name
	for _, hv := range body.Hypervisors {
		bad := hv.State == "down" || hv.Status == "disabled"
		down[hv.HypervisorHostname] = bad
		down[hv.Service.Host] = bad
	}
	return down, nil
}

// apply is the one decision, per host of Climate's that down names (true: down or
// disabled): a host down without the monitor's window gets one, now until further notice
// (healing its reservations); a host up with the monitor's window has it closed. via says
// for the log what told (the poll, or Nova's notification). m.mu is held.
func (m *Monitor) apply(ctx context.Context, down map[string]bool, via string) error {
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
			m.Driver.cfg.Logger.Warn("openstack monitor: hypervisor down or disabled: host out of service", "host", name, "healed", len(healed), "via", via)
		case !bad && open:
			healed, err := m.Maintenance.DeleteMaintenance(ctx, monitorWho, h.ID, w)
			if err != nil {
				return fmt.Errorf("putting host %s back in service: %w", name, err)
			}
			m.Driver.cfg.Logger.Info("openstack monitor: hypervisor up and enabled: host back in service", "host", name, "healed", len(healed), "via", via)
		}
	}
	return nil
}
