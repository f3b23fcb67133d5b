package openstack

import (
	"context"
	"slices"
	"strings"
	"testing"

	"climate"
)

// stubHosts stands for the manager's host service: it records what it is asked and
// refuses what refuse names.
type stubHosts struct {
	climate.HostService
	created map[string]string
	hosts   map[string]*climate.Host
	refuse  error
}

func (s *stubHosts) CreateHost(_ context.Context, _ climate.Identity, fields map[string]string) (*climate.Host, error) {
	if s.refuse != nil {
		return nil, s.refuse
	}
	s.created = fields
	h := &climate.Host{ID: "7", HypervisorHostname: fields["name"], ServiceName: fields["service_name"]}
	s.hosts[h.ID] = h
	return h, nil
}

func (s *stubHosts) GetHost(_ context.Context, _ climate.Identity, id string) (*climate.Host, error) {
	if h, ok := s.hosts[id]; ok {
		return h, nil
	}
	return nil, climate.Errorf(climate.CodeNotFound, "Host %s not found", id)
}

func (s *stubHosts) DeleteHost(_ context.Context, _ climate.Identity, id string) error {
	if s.refuse != nil {
		return s.refuse
	}
	delete(s.hosts, id)
	return nil
}

// allowAdmins lets admins manage hosts.
type allowAdmins struct{}

func (allowAdmins) Check(who climate.Identity, rule string, _ climate.Target) error {
	if slices.Contains(who.Roles, "admin") {
		return nil
	}
	return climate.Errorf(climate.CodeForbidden, "Policy doesn't allow %s to be performed.", rule)
}

var (
	adminWho  = climate.Identity{UserID: "a", ProjectID: "ops", Roles: []string{"admin"}}
	memberWho = climate.Identity{UserID: "m", ProjectID: "p", Roles: []string{"member"}}
)

func newTestHosts(t *testing.T) (*testDriver, *stubHosts, Hosts) {
	d := newTestDriver(t)
	d.nova.hypervisors = []string{"h1", "h2"}
	stub := &stubHosts{hosts: map[string]*climate.Host{}}
	return d, stub, Hosts{HostService: stub, Driver: d.Driver, Policy: allowAdmins{}}
}

func TestHostsFromNova(t *testing.T) {
	ctx := context.Background()
	d, stub, hosts := newTestHosts(t)
	// Nova decides its fields; the operator's own capabilities are kept.
	if _, err := hosts.CreateHost(ctx, adminWho, map[string]string{"name": "h1", "vcpus": "2", "gpu": "true"}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"name": "h1", "service_name": "h1", "vcpus": "1000", "memory_mb": "800000", "local_gb": "600000",
		"cpu_info": `{"arch": "x86_64"}`, "hypervisor_type": "fake", "hypervisor_version": "1000", "availability_zone": "nova", "gpu": "true"}
	for k, v := range want {
		if stub.created[k] != v {
			t.Errorf("registered %s = %q, want %q", k, stub.created[k], v)
		}
	}
	if got := hostsOf(d.nova.byName(DefaultFreepool)); !slices.Equal(got, []string{"h1"}) {
		t.Fatalf("freepool %v after registering h1", got)
	}
	// By Nova's hypervisor id too.
	if _, err := hosts.CreateHost(ctx, adminWho, map[string]string{"name": "2"}); err != nil || stub.created["name"] != "h2" {
		t.Fatalf("registering by id: %v, %v", err, stub.created)
	}

	for _, tc := range []struct {
		who    climate.Identity
		fields map[string]string
		code   climate.Code
		msg    string
	}{
		{adminWho, map[string]string{"name": "nope"}, climate.CodeNotFound, "Host 'nope' not found!"},
		{memberWho, map[string]string{"name": "h1"}, climate.CodeForbidden, "blazar:oshosts:post"},
	} {
		before := d.nova.count("GET /os-hypervisors/detail")
		_, err := hosts.CreateHost(ctx, tc.who, tc.fields)
		if climate.ErrorCode(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%v: %v, want %s %q", tc.fields, err, tc.code, tc.msg)
		}
		if tc.who.UserID == memberWho.UserID && d.nova.count("GET /os-hypervisors/detail") != before {
			t.Error("a caller refused by policy made Climate ask Nova")
		}
	}
}

func TestHostsWithServersRefused(t *testing.T) {
	ctx := context.Background()
	d, stub, hosts := newTestHosts(t)
	d.nova.mu.Lock()
	d.nova.servers["vm1"] = fakeServer{host: "h2", project: "p"}
	d.nova.mu.Unlock()
	_, err := hosts.CreateHost(ctx, adminWho, map[string]string{"name": "h2"})
	if climate.ErrorCode(err) != climate.CodeConflict || !strings.Contains(err.Error(), "Servers [vm1] found for host h2") {
		t.Fatalf("registering a host with servers: %v", err)
	}
	if len(hostsOf(d.nova.byName(DefaultFreepool))) != 0 || stub.created != nil {
		t.Fatal("a refused host was registered or put in the freepool")
	}

	if _, err := hosts.CreateHost(ctx, adminWho, map[string]string{"name": "h1"}); err != nil {
		t.Fatal(err)
	}
	d.nova.mu.Lock()
	d.nova.servers["vm2"] = fakeServer{host: "h1", project: "p"}
	d.nova.mu.Unlock()
	err = hosts.DeleteHost(ctx, adminWho, "7")
	if climate.ErrorCode(err) != climate.CodeConflict || !strings.Contains(err.Error(), "Servers [vm2] found for host 7") {
		t.Fatalf("deleting a host with servers: %v", err)
	}
	d.nova.mu.Lock()
	delete(d.nova.servers, "vm2")
	d.nova.mu.Unlock()
	// A deletion the manager refuses (the host is reserved) leaves it in the freepool.
	stub.refuse = climate.Errorf(climate.CodeConflict, "Can't delete host 7. The host is reserved.")
	if err := hosts.DeleteHost(ctx, adminWho, "7"); climate.ErrorCode(err) != climate.CodeConflict {
		t.Fatalf("refused deletion: %v", err)
	}
	if got := hostsOf(d.nova.byName(DefaultFreepool)); !slices.Equal(got, []string{"h1"}) {
		t.Fatalf("freepool %v after a refused deletion, want [h1]", got)
	}
	stub.refuse = nil
	if err := hosts.DeleteHost(ctx, adminWho, "7"); err != nil {
		t.Fatal(err)
	}
	if got := hostsOf(d.nova.byName(DefaultFreepool)); len(got) != 0 {
		t.Fatalf("freepool %v after the deletion, want empty", got)
	}
}
