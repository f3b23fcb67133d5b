package openstack

import (
	"context"
	"testing"

	"climate"
)

// stubMaintenance stands for the manager's maintenance windows.
type stubMaintenance struct {
	climate.MaintenanceService
	windows []climate.Maintenance
	n       int
}

func (s *stubMaintenance) ListMaintenances(_ context.Context, _ climate.Identity, hostID string) ([]climate.Maintenance, error) {
	return s.windows, nil
}

func (s *stubMaintenance) CreateMaintenance(_ context.Context, who climate.Identity, hostID string, req climate.MaintenanceRequest) (*climate.Maintenance, []climate.Healing, error) {
	if !req.Start.Now || !req.End.Time.IsZero() {
		return nil, nil, climate.Errorf(climate.CodeInvalid, "want now until further notice")
	}
	s.n++
	w := climate.Maintenance{ID: string(rune('a' + s.n)), HostID: hostID, Reason: req.Reason}
	s.windows = append(s.windows, w)
	return &w, nil, nil
}

func (s *stubMaintenance) DeleteMaintenance(_ context.Context, _ climate.Identity, hostID, id string) ([]climate.Healing, error) {
	for i, w := range s.windows {
		if w.ID == id && w.HostID == hostID {
			s.windows = append(s.windows[:i], s.windows[i+1:]...)
			return nil, nil
		}
	}
	return nil, climate.Errorf(climate.CodeNotFound, "no window %s", id)
}

// stubList lists fixed hosts.
type stubList struct {
	climate.HostService
	hosts []climate.Host
}

func (s stubList) ListHosts(context.Context, climate.Identity) ([]climate.Host, error) {
	return s.hosts, nil
}

// A hypervisor down or disabled puts its host in maintenance until further notice, once;
// up and enabled again, the monitor's window (not an operator's) is closed.
func TestMonitorFollowsNova(t *testing.T) {
	ctx := context.Background()
	d := newTestDriver(t)
	d.nova.hypervisors = []string{"h1", "h2"}
	d.nova.down, d.nova.disabled = map[string]bool{}, map[string]bool{}
	windows := &stubMaintenance{windows: []climate.Maintenance{{ID: "op", HostID: "2", Reason: "PSU failure"}}}
	m := &Monitor{Driver: d.Driver, Maintenance: windows, Hosts: stubList{hosts: []climate.Host{
		{ID: "1", HypervisorHostname: "h1", ServiceName: "h1"}, {ID: "2", HypervisorHostname: "h2", ServiceName: "h2"},
		{ID: "3", HypervisorHostname: "not-nova's"}}}}
	open := func() (ours, others int) {
		for _, w := range windows.windows {
			if w.Reason == MonitorReason {
				ours++
			} else {
				others++
			}
		}
		return
	}
	round := func() {
		t.Helper()
		if err := m.Check(ctx); err != nil {
			t.Fatal(err)
		}
	}
	round()
	if ours, others := open(); ours != 0 || others != 1 {
		t.Fatalf("all up: %d monitor windows, %d others", ours, others)
	}
	d.nova.mu.Lock()
	d.nova.down["h1"], d.nova.disabled["h2"] = true, true
	d.nova.mu.Unlock()
	round()
	round() // once per failure
	if ours, _ := open(); ours != 2 {
		t.Fatalf("h1 down, h2 disabled: %d monitor windows, want 2 (%v)", ours, windows.windows)
	}
	d.nova.mu.Lock()
	d.nova.down["h1"], d.nova.disabled["h2"] = false, false
	d.nova.mu.Unlock()
	round()
	if ours, others := open(); ours != 0 || others != 1 {
		t.Fatalf("back up: %d monitor windows, %d others (the operator's stays)", ours, others)
	}
}
