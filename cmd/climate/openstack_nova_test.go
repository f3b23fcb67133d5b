package main

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	gopheros "github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/aggregates"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/flavors"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/hypervisors"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servergroups"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/services"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/tokens"
	"github.com/gophercloud/gophercloud/v2/openstack/image/v2/imagedata"
	"github.com/gophercloud/gophercloud/v2/openstack/image/v2/images"

	"climate"
	"climate/bench"
	"climate/openstack"
	"climate/sqlite"
)

// The real Nova CI brings up (.ci/nova: Keystone, Nova with the fake virt driver and
// blazar-nova's BlazarFilter, Placement, Glance): CLIMATE_TEST_NOVA is its Keystone URL,
// where admin/adminpass is an admin of project admin.
const (
	novaEnv         = "CLIMATE_TEST_NOVA"
	novaRequiredEnv = "CLIMATE_TEST_NOVA_REQUIRED"
)

// testNova is an admin's view of that Nova.
type testNova struct {
	ksURL     string
	project   string // the admin project's id
	compute   *gophercloud.ServiceClient
	image     *gophercloud.ServiceClient
	placement *gophercloud.ServiceClient
	network   *gophercloud.ServiceClient
}

func needNova(t *testing.T) *testNova {
	t.Helper()
	url := os.Getenv(novaEnv)
	if url == "" {
		if os.Getenv(novaRequiredEnv) == "1" {
			t.Fatalf("%s=1 but %s is not set", novaRequiredEnv, novaEnv)
		}
		t.Skipf("no real Nova: set %s to the Keystone URL of .ci/nova's (CI does)", novaEnv)
	}
	ctx := context.Background()
	provider, err := gopheros.NewClient(url)
	if err != nil {
		t.Fatal(err)
	}
	err = gopheros.Authenticate(ctx, provider, gophercloud.AuthOptions{IdentityEndpoint: url, Username: "admin", Password: "adminpass",
		DomainName: "Default", Scope: &gophercloud.AuthScope{ProjectName: "admin", DomainName: "Default"}, AllowReauth: true})
	if err != nil {
		t.Fatalf("authenticating with the test Nova's Keystone: %v", err)
	}
	project, err := provider.GetAuthResult().(tokens.CreateResult).ExtractProject()
	if err != nil {
		t.Fatal(err)
	}
	n := &testNova{ksURL: url, project: project.ID}
	if n.compute, err = gopheros.NewComputeV2(provider, gophercloud.EndpointOpts{}); err != nil {
		t.Fatal(err)
	}
	n.compute.Microversion = "2.74" // --nic none (2.37)
	if n.image, err = gopheros.NewImageV2(provider, gophercloud.EndpointOpts{}); err != nil {
		t.Fatal(err)
	}
	if n.placement, err = gopheros.NewPlacementV1(provider, gophercloud.EndpointOpts{}); err != nil {
		t.Fatal(err)
	}
	n.placement.Microversion = "1.14" // resource classes (1.2; before it, every class is a 404), nested providers
	if n.network, err = gopheros.NewNetworkV2(provider, gophercloud.EndpointOpts{}); err != nil {
		t.Fatal(err)
	}
	return n
}

// reset puts Nova as an operator leaves it for Climate: no servers, no aggregate but an
// empty freepool (registering a host in Climate puts it there). It returns the
// hypervisors' names.
func (n *testNova) reset(t *testing.T) []string {
	t.Helper()
	ctx := context.Background()
	pages, err := servers.List(n.compute, servers.ListOpts{AllTenants: true}).AllPages(ctx)
	must(t, err)
	list, err := servers.ExtractServers(pages)
	must(t, err)
	for _, s := range list {
		must(t, ignore404(servers.Delete(ctx, n.compute, s.ID).ExtractErr()))
	}
	n.waitFor(t, "no server left", 2*time.Minute, func() (bool, error) {
		pages, err := servers.List(n.compute, servers.ListOpts{AllTenants: true}).AllPages(ctx)
		if err != nil {
			return false, err
		}
		list, err := servers.ExtractServers(pages)
		return len(list) == 0, err
	})
	pages, err = hypervisors.List(n.compute, nil).AllPages(ctx)
	must(t, err)
	hvs, err := hypervisors.ExtractHypervisors(pages)
	must(t, err)
	var names []string
	for _, h := range hvs {
		names = append(names, h.HypervisorHostname)
	}
	slices.Sort(names)
	var free *aggregates.Aggregate
	for _, a := range n.aggregates(t) {
		if a.Name == openstack.DefaultFreepool {
			free = &a
		}
		for _, h := range a.Hosts {
			_, err := aggregates.RemoveHost(ctx, n.compute, a.ID, aggregates.RemoveHostOpts{Host: h}).Extract()
			must(t, err)
		}
		if a.Name != openstack.DefaultFreepool {
			must(t, aggregates.Delete(ctx, n.compute, a.ID).ExtractErr())
		}
	}
	if free == nil {
		_, err = aggregates.Create(ctx, n.compute, aggregates.CreateOpts{Name: openstack.DefaultFreepool}).Extract()
		must(t, err)
	}
	return names
}

func (n *testNova) aggregates(t *testing.T) []aggregates.Aggregate {
	t.Helper()
	pages, err := aggregates.List(n.compute).AllPages(context.Background())
	must(t, err)
	all, err := aggregates.ExtractAggregates(pages)
	must(t, err)
	return all
}

func (n *testNova) aggregate(t *testing.T, name string) *aggregates.Aggregate {
	t.Helper()
	for _, a := range n.aggregates(t) {
		if a.Name == name {
			return &a
		}
	}
	return nil
}

// bootable returns a flavor and an image to boot test servers with, made if missing.
func (n *testNova) bootable(t *testing.T) (flavorID, imageID string) {
	t.Helper()
	ctx := context.Background()
	pages, err := flavors.ListDetail(n.compute, nil).AllPages(ctx)
	must(t, err)
	fl, err := flavors.ExtractFlavors(pages)
	must(t, err)
	for _, f := range fl {
		if f.Name == "climate-test" {
			flavorID = f.ID
		}
	}
	if flavorID == "" {
		f, err := flavors.Create(ctx, n.compute, flavors.CreateOpts{Name: "climate-test", VCPUs: 1, RAM: 64, Disk: gophercloud.IntToPointer(0)}).Extract()
		must(t, err)
		flavorID = f.ID
	}
	ipages, err := images.List(n.image, images.ListOpts{Name: "climate-test-img"}).AllPages(ctx)
	must(t, err)
	imgs, err := images.ExtractImages(ipages)
	must(t, err)
	for _, i := range imgs {
		if i.Status == images.ImageStatusActive {
			return flavorID, i.ID
		}
	}
	img, err := images.Create(ctx, n.image, images.CreateOpts{Name: "climate-test-img", DiskFormat: "raw", ContainerFormat: "bare"}).Extract()
	must(t, err)
	must(t, imagedata.Upload(ctx, n.image, img.ID, bytes.NewReader(make([]byte, 1024))).ExtractErr())
	return flavorID, img.ID
}

// boot creates a server with no network and these scheduler hints.
func (n *testNova) boot(t *testing.T, name, flavorID, imageID string, hints map[string]any) string {
	t.Helper()
	var opts servers.CreateOptsBuilder = servers.CreateOpts{Name: name, FlavorRef: flavorID, ImageRef: imageID, Networks: "none"}
	var hintOpts servers.SchedulerHintOptsBuilder
	if hints != nil {
		hintOpts = servers.SchedulerHintOpts{AdditionalProperties: hints}
	}
	s, err := servers.Create(context.Background(), n.compute, opts, hintOpts).Extract()
	must(t, err)
	return s.ID
}

// server returns a server, or nil once it is gone.
func (n *testNova) server(t *testing.T, id string) (*servers.Server, error) {
	s, err := servers.Get(context.Background(), n.compute, id).Extract()
	if gophercloud.ResponseCodeIs(err, 404) {
		return nil, nil
	}
	return s, err
}

// waitFor polls cond (every 100 ms) until it holds, failing the test after limit.
func (n *testNova) waitFor(t *testing.T, what string, limit time.Duration, cond func() (bool, error)) time.Time {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		ok, err := cond()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if ok {
			return time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, limit)
		}
		time.Sleep(100 * time.Millisecond) // polling Nova, which cannot tell us
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(openstack.Message(err))
	}
}

func ignore404(err error) error {
	if gophercloud.ResponseCodeIs(err, 404) {
		return nil
	}
	return err
}

// serve runs climate serve --driver openstack on n, as its admin, with hosts registered
// (Nova's service host names, as Blazar names hosts).
func (n *testNova) serve(t *testing.T, hosts []string) *server {
	return n.serveMonitored(t, hosts, 0)
}

// serveMonitored is serve with the host monitor polling every monitor (0: none).
func (n *testNova) serveMonitored(t *testing.T, hosts []string, monitor time.Duration) *server {
	t.Helper()
	return n.serveWith(t, hosts, func(o *serveOptions) { o.driver.monitor = monitor })
}

// serveWith is serve with the options as set changes them.
func (n *testNova) serveWith(t *testing.T, hosts []string, set func(*serveOptions)) *server {
	t.Helper()
	o := serveOptions{logLevel: "info", driver: driverOptions{name: "openstack", freepool: openstack.DefaultFreepool,
		azPrefix: openstack.DefaultAZPrefix, iface: "public", deleteTimeout: time.Minute, attempts: 3, backoff: 200 * time.Millisecond},
		keystone: keystoneOptions{url: n.ksURL, username: "admin", password: "adminpass", project: "admin",
			userDomain: "Default", projectDomain: "Default", startupWait: 10 * time.Second}}
	set(&o)
	s := startServer(t, o)
	for _, h := range hosts {
		if r := ksCall(t, "POST", s.url+"/v1/os-hosts", fmt.Sprintf(`{"name": %q}`, h), nil); r.status != 201 {
			t.Fatalf("registering %s: %s", h, r)
		}
	}
	return s
}

// owner is the identity of the lease's project (Nova's admin project) on noauth.
func (n *testNova) owner() map[string]string {
	return map[string]string{"X-User-Id": "admin", "X-Project-Id": n.project, "X-Roles": "admin"}
}

// hostLease leases host from start for an hour and returns the lease and reservation ids.
func (n *testNova) hostLease(t *testing.T, s *server, host string, start time.Time) (leaseID, rid string) {
	t.Helper()
	r := ksCall(t, "POST", s.url+"/v1/leases", fmt.Sprintf(`{"name": "nova-lease", "start_date": %q, "end_date": %q,
		"reservations": [{"resource_type": "physical:host", "min": 1, "max": 1,
		"hypervisor_properties": "[\"==\", \"$hypervisor_hostname\", \"%s\"]", "resource_properties": ""}]}`,
		start.Format("2006-01-02 15:04:05"), start.Add(time.Hour).Format("2006-01-02 15:04:05"), host), n.owner())
	if r.status != 201 {
		t.Fatalf("lease: %s", r)
	}
	lease := r.body["lease"].(map[string]any)
	return lease["id"].(string), lease["reservations"].([]any)[0].(map[string]any)["id"].(string)
}

// active waits for a server to be ACTIVE and returns its host.
func (n *testNova) active(t *testing.T, id string) string {
	t.Helper()
	var host string
	n.waitFor(t, "server "+id+" ACTIVE", 2*time.Minute, func() (bool, error) {
		sv, err := n.server(t, id)
		if err != nil || sv == nil {
			return false, err
		}
		if sv.Status == "ERROR" {
			return false, fmt.Errorf("server %s failed: %v", id, sv.Fault.Message)
		}
		host = sv.Host
		return sv.Status == "ACTIVE", nil
	})
	return host
}

// A host lease with --driver openstack against the real Nova, as Blazar's tempest
// scenario test_host_reservation: the host leaves the freepool for the reservation's
// aggregate at the start; a server booted with the reservation hint lands on it and one
// without the hint finds no host; at the end the server is deleted and the host is back
// in the freepool, the aggregate gone.
func TestOpenStackDriverHostLease(t *testing.T) {
	n := needNova(t)
	hosts := n.reset(t)
	if len(hosts) < 2 {
		t.Fatalf("hypervisors %v: want 2", hosts)
	}
	flavorID, imageID := n.bootable(t)
	s := n.serve(t, hosts)
	// Registered, the hosts are in the freepool with what Nova says of them.
	if got := slices.Sorted(slices.Values(n.aggregate(t, openstack.DefaultFreepool).Hosts)); !slices.Equal(got, hosts) {
		t.Fatalf("freepool %v after registering %v", got, hosts)
	}
	for _, h := range ksCall(t, "GET", s.url+"/v1/os-hosts", "", nil).body["hosts"].([]any) {
		h := h.(map[string]any)
		if h["vcpus"] != 1000.0 || h["memory_mb"] != 800000.0 || h["local_gb"] != 600000.0 || h["hypervisor_type"] != "fake" ||
			h["service_name"] != h["hypervisor_hostname"] || h["availability_zone"] != "nova" {
			t.Fatalf("a host from the fake driver's hypervisor: %v", h)
		}
	}
	target := hosts[0]
	start := time.Now().UTC().Add(4 * time.Second).Truncate(time.Second)
	leaseID, rid := n.hostLease(t, s, target, start)

	// The start: the host joins the reservation's aggregate and leaves the freepool.
	inAggregate := n.waitFor(t, "the host in the reservation's aggregate", 30*time.Second, func() (bool, error) {
		a := n.aggregate(t, rid)
		return a != nil && slices.Contains(a.Hosts, target), nil
	})
	t.Logf("lease start → host in the reservation's aggregate: %s", inAggregate.Sub(start).Round(time.Millisecond))
	agg := n.aggregate(t, rid)
	if agg.AvailabilityZone != "blazar_"+rid || agg.Metadata["blazar:owner"] != n.project || len(agg.Hosts) != 1 {
		t.Fatalf("the reservation's aggregate: zone %q, metadata %v, hosts %v; want zone blazar_%s, blazar:owner %s, hosts [%s]",
			agg.AvailabilityZone, agg.Metadata, agg.Hosts, rid, n.project, target)
	}
	n.waitFor(t, "the host out of the freepool", 10*time.Second, func() (bool, error) {
		return !slices.Contains(n.aggregate(t, openstack.DefaultFreepool).Hosts, target), nil
	})

	// A server booted with the reservation hint lands on the reserved host.
	hinted := n.boot(t, "hinted", flavorID, imageID, map[string]any{"reservation": rid})
	if host := n.active(t, hinted); host != target {
		t.Fatalf("the hinted server is on %q, want the reserved host %s", host, target)
	}
	// One without the hint finds no host: the reserved one is the lease's, the other is
	// in the freepool.
	plain := n.boot(t, "plain", flavorID, imageID, nil)
	n.waitFor(t, "the server without the hint in ERROR", 2*time.Minute, func() (bool, error) {
		sv, err := n.server(t, plain)
		if err != nil || sv == nil {
			return false, err
		}
		if sv.Status == "ACTIVE" {
			return false, fmt.Errorf("a server without the hint became ACTIVE on %s", sv.Host)
		}
		return sv.Status == "ERROR", nil
	})
	must(t, servers.Delete(context.Background(), n.compute, plain).ExtractErr())

	// The end, brought forward to now: the server is deleted, the host back in the
	// freepool and the aggregate gone.
	end := time.Now().UTC().Add(2 * time.Second).Truncate(time.Second)
	if r := ksCall(t, "PUT", s.url+"/v1/leases/"+leaseID, fmt.Sprintf(`{"end_date": %q}`, end.Format("2006-01-02 15:04:05")), n.owner()); r.status != 200 {
		t.Fatalf("moving the end: %s", r)
	}
	cleaned := n.waitFor(t, "the end's clean-up", 2*time.Minute, func() (bool, error) {
		sv, err := n.server(t, hinted)
		if err != nil || sv != nil {
			return false, err
		}
		return n.aggregate(t, rid) == nil && slices.Contains(n.aggregate(t, openstack.DefaultFreepool).Hosts, target), nil
	})
	t.Logf("lease end → server deleted, host back in the freepool, aggregate deleted: %s", cleaned.Sub(end).Round(time.Millisecond))
	n.waitFor(t, "the lease TERMINATED", 30*time.Second, func() (bool, error) {
		r := ksCall(t, "GET", s.url+"/v1/leases/"+leaseID, "", n.owner())
		return r.body["lease"].(map[string]any)["status"] == "TERMINATED", nil
	})
	if strings.Contains(s.output.String(), "adminpass") {
		t.Fatal("the log shows the service user's password")
	}
}

// The engine is SIGKILLed as soon as the reservation's aggregate appears in Nova, in the
// middle of the start's Nova calls; the process restarted on the same data takes the start
// over and completes it: one aggregate, both hosts in it and out of the freepool. At the
// end nothing is left in Nova but the freepool with every host.
func TestOpenStackDriverStartTakenOverAfterKill(t *testing.T) {
	n := needNova(t)
	bin := climateBinary(t)
	hosts := n.reset(t)
	dir := t.TempDir()
	args := []string{"--data-dir", dir, "--driver", "openstack", "--keystone-url", n.ksURL, "--keystone-username", "admin",
		"--keystone-password", "adminpass", "--keystone-project", "admin", "--openstack-retry-wait", "200ms"}
	first := startReplicas(t, bin, 1, nil, args...)[0]
	c := &auditClient{http: &http.Client{Timeout: time.Minute}, base: first.URL}
	for _, h := range hosts {
		if status, body, err := c.do(context.Background(), "POST", "/v1/os-hosts", map[string]any{"name": h}); err != nil || status != 201 {
			t.Fatalf("registering %s: %d %v %v", h, status, body, err)
		}
	}
	owner := map[string]string{"X-User-Id": "admin", "X-Project-Id": n.project, "X-Roles": "admin"}
	start := time.Now().UTC().Add(3 * time.Second).Truncate(time.Second)
	r := ksCall(t, "POST", first.URL+"/v1/leases", fmt.Sprintf(`{"name": "killed", "start_date": %q, "end_date": %q,
		"reservations": [{"resource_type": "physical:host", "min": %d, "max": %d, "hypervisor_properties": "", "resource_properties": ""}]}`,
		start.Format("2006-01-02 15:04:05"), start.Add(time.Hour).Format("2006-01-02 15:04:05"), len(hosts), len(hosts)), owner)
	if r.status != 201 {
		t.Fatalf("lease: %s", r)
	}
	lease := r.body["lease"].(map[string]any)
	leaseID := lease["id"].(string)
	rid := lease["reservations"].([]any)[0].(map[string]any)["id"].(string)

	// Kill at the first sight of the aggregate (polling Nova as fast as it answers).
	deadline := time.Now().Add(30 * time.Second)
	var seen *aggregates.Aggregate
	for seen == nil {
		if time.Now().After(deadline) {
			t.Fatal("no aggregate for the reservation within 30 s")
		}
		seen = n.aggregate(t, rid)
	}
	if err := first.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	first.Stop()
	killedWith := n.aggregate(t, rid).Hosts
	t.Logf("killed with the aggregate holding %v (of %v), the freepool %v", killedWith, hosts, n.aggregate(t, openstack.DefaultFreepool).Hosts)

	second := startReplicas(t, bin, 1, nil, args...)[0]
	n.waitFor(t, "the start completed by the new process", 30*time.Second, func() (bool, error) {
		r := ksCall(t, "GET", second.URL+"/v1/leases/"+leaseID, "", owner)
		return r.body["lease"].(map[string]any)["status"] == "ACTIVE", nil
	})
	var named []aggregates.Aggregate
	for _, a := range n.aggregates(t) {
		if a.Name == rid {
			named = append(named, a)
		}
	}
	var got []string
	if len(named) > 0 {
		got = slices.Sorted(slices.Values(named[0].Hosts))
	}
	if len(named) != 1 || !slices.Equal(got, hosts) || len(n.aggregate(t, openstack.DefaultFreepool).Hosts) != 0 {
		t.Fatalf("after the takeover: %d aggregates named %s (hosts %v), freepool %v; want one with %v and an empty freepool",
			len(named), rid, got, n.aggregate(t, openstack.DefaultFreepool).Hosts, hosts)
	}

	end := time.Now().UTC().Add(2 * time.Second).Truncate(time.Second)
	if r := ksCall(t, "PUT", second.URL+"/v1/leases/"+leaseID, fmt.Sprintf(`{"end_date": %q}`, end.Format("2006-01-02 15:04:05")), owner); r.status != 200 {
		t.Fatalf("moving the end: %s", r)
	}
	n.waitFor(t, "the lease TERMINATED", time.Minute, func() (bool, error) {
		r := ksCall(t, "GET", second.URL+"/v1/leases/"+leaseID, "", owner)
		return r.body["lease"].(map[string]any)["status"] == "TERMINATED", nil
	})
	all := n.aggregates(t)
	if len(all) != 1 || all[0].Name != openstack.DefaultFreepool || !slices.Equal(slices.Sorted(slices.Values(all[0].Hosts)), hosts) {
		t.Fatalf("left in Nova after the end: %+v; want only the freepool with %v", all, hosts)
	}
}

// Deleting a started lease releases what it holds in Nova, as Blazar's tempest test says:
// its server is deleted, the host is back in the freepool and the aggregate is gone.
func TestOpenStackDriverLeaseDeleted(t *testing.T) {
	n := needNova(t)
	hosts := n.reset(t)
	flavorID, imageID := n.bootable(t)
	s := n.serve(t, hosts)
	target := hosts[len(hosts)-1]
	leaseID, rid := n.hostLease(t, s, target, time.Now().UTC().Add(2*time.Second).Truncate(time.Second))
	n.waitFor(t, "the host in the reservation's aggregate", 30*time.Second, func() (bool, error) {
		a := n.aggregate(t, rid)
		return a != nil && slices.Contains(a.Hosts, target), nil
	})
	srv := n.boot(t, "doomed", flavorID, imageID, map[string]any{"reservation": rid})
	if host := n.active(t, srv); host != target {
		t.Fatalf("the hinted server is on %q, want %s", host, target)
	}
	n.waitFor(t, "the lease ACTIVE", 30*time.Second, func() (bool, error) {
		r := ksCall(t, "GET", s.url+"/v1/leases/"+leaseID, "", n.owner())
		return r.body["lease"].(map[string]any)["status"] == "ACTIVE", nil
	})
	if r := ksCall(t, "DELETE", s.url+"/v1/leases/"+leaseID, "", n.owner()); r.status != 204 {
		t.Fatalf("deleting the lease: %s", r)
	}
	deleted := time.Now()
	done := n.waitFor(t, "the deleted lease's clean-up", 2*time.Minute, func() (bool, error) {
		sv, err := n.server(t, srv)
		if err != nil || sv != nil {
			return false, err
		}
		return n.aggregate(t, rid) == nil && slices.Contains(n.aggregate(t, openstack.DefaultFreepool).Hosts, target), nil
	})
	t.Logf("lease deleted → server deleted, host back in the freepool, aggregate deleted: %s", done.Sub(deleted).Round(time.Millisecond))
}

// Hosts come from Nova and keep the freepool in step, as Blazar's: an unknown name is a
// 404; a host with servers can be neither registered nor deleted; a deleted host leaves
// the freepool.
func TestOpenStackDriverHosts(t *testing.T) {
	n := needNova(t)
	hosts := n.reset(t)
	flavorID, imageID := n.bootable(t)
	s := n.serve(t, nil)
	if r := ksCall(t, "POST", s.url+"/v1/os-hosts", `{"name": "no-such-hypervisor"}`, nil); r.status != 404 || !strings.Contains(r.raw, "Host 'no-such-hypervisor' not found!") {
		t.Fatalf("registering an unknown hypervisor: %s", r)
	}
	// A server forced onto a host (admins may name it), before and after its registration.
	pinned := func(host string) string {
		t.Helper()
		sv, err := servers.Create(context.Background(), n.compute, servers.CreateOpts{Name: "pinned", FlavorRef: flavorID, ImageRef: imageID,
			Networks: "none", AvailabilityZone: "nova:" + host}, nil).Extract()
		must(t, err)
		if on := n.active(t, sv.ID); on != host {
			t.Fatalf("the pinned server is on %s, want %s", on, host)
		}
		return sv.ID
	}
	gone := func(id string) {
		t.Helper()
		must(t, ignore404(servers.Delete(context.Background(), n.compute, id).ExtractErr()))
		n.waitFor(t, "server "+id+" deleted", time.Minute, func() (bool, error) {
			sv, err := n.server(t, id)
			return sv == nil, err
		})
	}
	busy := hosts[1]
	id := pinned(busy)
	if r := ksCall(t, "POST", s.url+"/v1/os-hosts", fmt.Sprintf(`{"name": %q}`, busy), nil); r.status != 409 || !strings.Contains(r.raw, "Servers ["+id+"] found for host "+busy) {
		t.Fatalf("registering a host with a server: %s", r)
	}
	if slices.Contains(n.aggregate(t, openstack.DefaultFreepool).Hosts, busy) {
		t.Fatal("a refused host is in the freepool")
	}
	gone(id)
	r := ksCall(t, "POST", s.url+"/v1/os-hosts", fmt.Sprintf(`{"name": %q}`, busy), nil)
	if r.status != 201 || !slices.Contains(n.aggregate(t, openstack.DefaultFreepool).Hosts, busy) {
		t.Fatalf("registering %s: %s; freepool %v", busy, r, n.aggregate(t, openstack.DefaultFreepool).Hosts)
	}
	hostID := r.body["host"].(map[string]any)["id"].(string)
	id = pinned(busy)
	if r := ksCall(t, "DELETE", s.url+"/v1/os-hosts/"+hostID, "", nil); r.status != 409 || !strings.Contains(r.raw, "Servers ["+id+"] found") {
		t.Fatalf("deleting a host with a server: %s", r)
	}
	gone(id)
	if r := ksCall(t, "DELETE", s.url+"/v1/os-hosts/"+hostID, "", nil); r.status != 204 {
		t.Fatalf("deleting %s: %s", busy, r)
	}
	if slices.Contains(n.aggregate(t, openstack.DefaultFreepool).Hosts, busy) {
		t.Fatal("a deleted host is still in the freepool")
	}
}

// An active host lease that an update grows gets the new host in its aggregate (through
// the lease.update notification), as Blazar adds it; its end gives both back.
func TestOpenStackDriverActiveLeaseGrows(t *testing.T) {
	n := needNova(t)
	hosts := n.reset(t)
	s := n.serve(t, hosts)
	leaseID, rid := n.hostLease(t, s, hosts[0], time.Now().UTC().Add(2*time.Second).Truncate(time.Second))
	n.waitFor(t, "the lease ACTIVE", 30*time.Second, func() (bool, error) {
		r := ksCall(t, "GET", s.url+"/v1/leases/"+leaseID, "", n.owner())
		return r.body["lease"].(map[string]any)["status"] == "ACTIVE", nil
	})
	// The lease's before_end_lease event is due at its start too (the lease is shorter than
	// the hour's notice): an update that meets it being fired is refused with a 409 that
	// says to try again, as a client does.
	n.waitFor(t, "the active lease grown", 30*time.Second, func() (bool, error) {
		r := ksCall(t, "PUT", s.url+"/v1/leases/"+leaseID, fmt.Sprintf(`{"reservations": [{"id": %q, "min": 2, "max": 2, "hypervisor_properties": ""}]}`, rid), n.owner())
		if r.status == 409 && strings.Contains(fmt.Sprint(r.body["error_message"]), "try again") {
			return false, nil
		}
		if r.status != 200 {
			return false, fmt.Errorf("growing the active lease: %s", r)
		}
		return true, nil
	})
	n.waitFor(t, "both hosts in the reservation's aggregate", 30*time.Second, func() (bool, error) {
		a := n.aggregate(t, rid)
		return a != nil && slices.Equal(slices.Sorted(slices.Values(a.Hosts)), hosts) && len(n.aggregate(t, openstack.DefaultFreepool).Hosts) == 0, nil
	})
	end := time.Now().UTC().Add(2 * time.Second).Truncate(time.Second)
	if r := ksCall(t, "PUT", s.url+"/v1/leases/"+leaseID, fmt.Sprintf(`{"end_date": %q}`, end.Format("2006-01-02 15:04:05")), n.owner()); r.status != 200 {
		t.Fatalf("moving the end: %s", r)
	}
	n.waitFor(t, "both hosts back in the freepool", time.Minute, func() (bool, error) {
		return n.aggregate(t, rid) == nil && slices.Equal(slices.Sorted(slices.Values(n.aggregate(t, openstack.DefaultFreepool).Hosts)), hosts), nil
	})
}

// An instance reservation, as Blazar's tempest test_instance_reservation: once the lease
// is ACTIVE a server booted with the flavor named after the reservation becomes ACTIVE on
// a host of the reservation's aggregate; a second one (beyond amount) finds no host, nor
// does one of an ordinary flavor; the end deletes the server, the flavor and the aggregate.
func TestOpenStackDriverInstanceReservation(t *testing.T) {
	n := needNova(t)
	hosts := n.reset(t)
	plainFlavor, imageID := n.bootable(t)
	s := n.serve(t, hosts)
	n.instanceScenario(t, s, hosts, plainFlavor, imageID,
		`{"resource_type": "virtual:instance", "amount": 1, "vcpus": 1, "memory_mb": 64, "disk_gb": 0, "affinity": false}`, nil)
}

// The same with a flavor:instance reservation of a flavor registered in Climate, as
// Blazar's tempest test_flavor_reservation: the reservation's flavor copies its extra
// specs and adds Blazar's.
func TestOpenStackDriverFlavorReservation(t *testing.T) {
	n := needNova(t)
	hosts := n.reset(t)
	plainFlavor, imageID := n.bootable(t)
	s := n.serve(t, hosts)
	r := ksCall(t, "POST", s.url+"/v1/flavors", `{"name": "climate-flavor-test", "vcpus": 1, "ram": 64, "disk": 0,
		"extra_specs": {"hw:cpu_policy": "shared"}}`, nil)
	if r.status != 201 {
		t.Fatalf("registering a flavor: %s", r)
	}
	id := r.body["flavor"].(map[string]any)["id"].(string)
	n.instanceScenario(t, s, hosts, plainFlavor, imageID, fmt.Sprintf(`{"resource_type": "flavor:instance", "flavor_id": %q, "amount": 1}`, id),
		map[string]string{"hw:cpu_policy": "shared"})
}

// With the driver, a flavor:instance reservation may name a flavor of Nova's that Climate's
// registry does not have, as Blazar's reads Nova's: its sizes (and extra specs) are Nova's.
func TestOpenStackDriverNovaFlavorReservation(t *testing.T) {
	n := needNova(t)
	hosts := n.reset(t)
	plainFlavor, imageID := n.bootable(t)
	s := n.serve(t, hosts)
	n.instanceScenario(t, s, hosts, plainFlavor, imageID, fmt.Sprintf(`{"resource_type": "flavor:instance", "flavor_id": %q, "amount": 1}`, plainFlavor), nil)
	r := ksCall(t, "POST", s.url+"/v1/leases", `{"name": "ghost", "start_date": "2050-01-01 10:00", "end_date": "2050-01-01 11:00",
		"reservations": [{"resource_type": "flavor:instance", "flavor_id": "no-such-flavor", "amount": 1}]}`, n.owner())
	if r.status != 400 || !strings.Contains(r.raw, "no-such-flavor") {
		t.Fatalf("a lease of a flavor neither Climate nor Nova has: %s, want a 400 naming it", r)
	}
}

// instanceScenario leases reservation (one instance reservation of amount 1) from 2 s
// ahead and checks Blazar's instance behaviour in Nova; the reservation's flavor must have
// the extra specs specs besides Blazar's.
func (n *testNova) instanceScenario(t *testing.T, s *server, hosts []string, plainFlavor, imageID, reservation string, specs map[string]string) {
	t.Helper()
	start := time.Now().UTC().Add(2 * time.Second).Truncate(time.Second)
	r := ksCall(t, "POST", s.url+"/v1/leases", fmt.Sprintf(`{"name": "slots", "start_date": %q, "end_date": %q, "reservations": [%s]}`,
		start.Format("2006-01-02 15:04:05"), start.Add(time.Hour).Format("2006-01-02 15:04:05"), reservation), n.owner())
	if r.status != 201 {
		t.Fatalf("lease: %s", r)
	}
	lease := r.body["lease"].(map[string]any)
	leaseID := lease["id"].(string)
	rid := lease["reservations"].([]any)[0].(map[string]any)["id"].(string)
	var status any
	var group string // the reservation's server_group_id, if it has one
	n.waitFor(t, "the lease ACTIVE", 30*time.Second, func() (bool, error) {
		l := ksCall(t, "GET", s.url+"/v1/leases/"+leaseID, "", n.owner()).body["lease"].(map[string]any)
		if status = l["status"]; status == "ERROR" {
			return false, fmt.Errorf("the lease failed: %v", l)
		}
		group, _ = l["reservations"].([]any)[0].(map[string]any)["server_group_id"].(string)
		return status == "ACTIVE", nil
	})
	fl, err := flavors.Get(context.Background(), n.compute, rid).Extract()
	must(t, err)
	if fl.Name != "reservation:"+rid || fl.IsPublic || fl.VCPUs != 1 || fl.RAM != 64 {
		t.Fatalf("the reservation's flavor: %+v", fl)
	}
	got, err := flavors.ListExtraSpecs(context.Background(), n.compute, rid).Extract()
	must(t, err)
	want := map[string]string{"aggregate_instance_extra_specs:reservation": rid,
		"resources:CUSTOM_RESERVATION_" + strings.ToUpper(strings.ReplaceAll(rid, "-", "_")): "1"}
	for k, v := range specs {
		want[k] = v
	}
	if group != "" {
		want["affinity_id"] = group
	}
	if !maps.Equal(got, want) {
		t.Fatalf("the reservation flavor's extra specs: %v, want %v", got, want)
	}
	agg := n.aggregate(t, rid)
	if agg == nil || agg.Metadata["reservation"] != rid || agg.Metadata["filter_tenant_id"] != n.project || len(agg.Hosts) != 1 {
		t.Fatalf("the reservation's aggregate: %+v", agg)
	}

	// As Blazar's tempest test, into the reservation's server group when it has one.
	var hints map[string]any
	if group != "" {
		hints = map[string]any{"group": group}
	}
	first := n.boot(t, "slot-1", rid, imageID, hints)
	if host := n.active(t, first); host != agg.Hosts[0] {
		t.Fatalf("the reserved server is on %s, want %s (the reservation's host)", host, agg.Hosts[0])
	}
	if group != "" {
		g, err := servergroups.Get(context.Background(), n.compute, group).Extract()
		must(t, err)
		if g.Name != "reservation:"+rid || !slices.Equal(g.Members, []string{first}) || agg.Metadata["affinity_id"] != group {
			t.Fatalf("the reservation's server group: %+v (aggregate metadata %v), want reservation:%s with member %s", g, agg.Metadata, rid, first)
		}
	}
	errored := func(id, what string) {
		t.Helper()
		n.waitFor(t, what+" in ERROR", 2*time.Minute, func() (bool, error) {
			sv, err := n.server(t, id)
			if err != nil || sv == nil {
				return false, err
			}
			if sv.Status == "ACTIVE" {
				return false, fmt.Errorf("%s became ACTIVE on %s", what, sv.Host)
			}
			return sv.Status == "ERROR", nil
		})
		must(t, servers.Delete(context.Background(), n.compute, id).ExtractErr())
	}
	errored(n.boot(t, "slot-2", rid, imageID, nil), "a server beyond the reservation's amount")
	errored(n.boot(t, "plain", plainFlavor, imageID, nil), "a server of an ordinary flavor")

	end := time.Now().UTC().Add(2 * time.Second).Truncate(time.Second)
	if r := ksCall(t, "PUT", s.url+"/v1/leases/"+leaseID, fmt.Sprintf(`{"end_date": %q}`, end.Format("2006-01-02 15:04:05")), n.owner()); r.status != 200 {
		t.Fatalf("moving the end: %s", r)
	}
	cleaned := n.waitFor(t, "the end's clean-up", 2*time.Minute, func() (bool, error) {
		sv, err := n.server(t, first)
		if err != nil || sv != nil {
			return false, err
		}
		_, err = flavors.Get(context.Background(), n.compute, rid).Extract()
		return gophercloud.ResponseCodeIs(err, 404) && n.aggregate(t, rid) == nil && n.serverGroups(t, rid) == 0, nil
	})
	t.Logf("instance lease end → server, flavor and aggregate deleted: %s", cleaned.Sub(end).Round(time.Millisecond))
	if got := slices.Sorted(slices.Values(n.aggregate(t, openstack.DefaultFreepool).Hosts)); !slices.Equal(got, hosts) {
		t.Fatalf("freepool %v after an instance lease, want %v", got, hosts)
	}
}

// The driver's instance actions, each run twice against the real Nova and Placement (as
// after a takeover), leave what one run leaves: one flavor, one aggregate, one inventory;
// after the end nothing: no flavor, aggregate, inventory or resource class.
func TestOpenStackDriverInstanceActionsTwice(t *testing.T) {
	n := needNova(t)
	hosts := n.reset(t)
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "climate.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	h := &climate.Host{HypervisorHostname: hosts[1], ServiceName: hosts[1], Reservable: true}
	if err := st.Update(ctx, func(tx climate.Tx) error { return tx.InsertHost(ctx, h) }); err != nil {
		t.Fatal(err)
	}
	clients, err := openstack.Connect(ctx, openstack.Auth{URL: n.ksURL, Username: "admin", Password: "adminpass", Project: "admin"})
	if err != nil {
		t.Fatal(err)
	}
	d := openstack.New(openstack.Config{Compute: clients.Compute, Placement: clients.Placement, Store: st, Backoff: 100 * time.Millisecond})
	rid := climate.NewID()
	l := &climate.Lease{ID: climate.NewID(), ProjectID: n.project, Reservations: []climate.Reservation{{
		ID: rid, ResourceType: openstack.InstanceType, Amount: 2, Size: climate.Size{VCPUs: 1, MemoryMB: 64},
		Allocations: []climate.Allocation{{ResourceID: h.ID, Slots: 2}}}}}
	rc := "CUSTOM_RESERVATION_" + strings.ToUpper(strings.ReplaceAll(rid, "-", "_"))
	inventory := func() (total int, found bool) {
		t.Helper()
		var providers struct {
			List []struct {
				UUID string `json:"uuid"`
			} `json:"resource_providers"`
		}
		_, err := n.placement.Get(ctx, n.placement.ServiceURL("resource_providers")+"?name=blazar_"+hosts[1], &providers, nil)
		must(t, err)
		if len(providers.List) != 1 {
			t.Fatalf("providers named blazar_%s: %v", hosts[1], providers.List)
		}
		var inv struct {
			Total int `json:"total"`
		}
		_, err = n.placement.Get(ctx, n.placement.ServiceURL("resource_providers", providers.List[0].UUID, "inventories", rc), &inv, nil)
		if gophercloud.ResponseCodeIs(err, 404) {
			return 0, false
		}
		must(t, err)
		return inv.Total, true
	}
	for range 2 {
		if err := d.OnStart(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	if total, ok := inventory(); !ok || total != 2 {
		t.Fatalf("inventory of %s: %d (found %v), want 2", rc, total, ok)
	}
	named := 0
	for _, a := range n.aggregates(t) {
		if a.Name == rid {
			named++
		}
	}
	if named != 1 {
		t.Fatalf("%d aggregates named %s, want 1", named, rid)
	}
	for range 2 {
		if err := d.OnEnd(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := inventory(); ok {
		t.Fatal("the inventory is left after the end")
	}
	if _, err := flavors.Get(ctx, n.compute, rid).Extract(); !gophercloud.ResponseCodeIs(err, 404) {
		t.Fatalf("the flavor after the end: %v", err)
	}
	if a := n.aggregate(t, rid); a != nil {
		t.Fatalf("the aggregate after the end: %+v", a)
	}
	if _, err := n.placement.Get(ctx, n.placement.ServiceURL("resource_classes", rc), nil, nil); !gophercloud.ResponseCodeIs(err, 404) {
		t.Fatalf("the resource class after the end: %v", err)
	}
}

// The host monitor (Blazar's polling monitor) against the real Nova: the reserved host's
// compute service disabled, its host goes into maintenance and healing gives the active
// lease the other host, which the driver moves into the reservation's aggregate while the
// disabled one goes back to the freepool; enabled again, the maintenance window closes.
func TestOpenStackDriverMonitorHeals(t *testing.T) {
	n := needNova(t)
	hosts := n.reset(t)
	log := &bench.CappedBuffer{Max: 4 << 20}
	s := n.serveWith(t, hosts, func(o *serveOptions) { o.driver.monitor, o.logTo = 300*time.Millisecond, log })
	took := n.healsWhenDisabled(t, s, hosts, log)
	t.Logf("compute service disabled → replacement host in the aggregate (polling every 300 ms): %s", took.Round(time.Millisecond))
}

// The same with Nova's notifications instead of the poll (Blazar's notification monitor):
// Nova (.ci/nova/40-configs.sh) sends versioned notifications to its RabbitMQ vhost, and
// climate serve --nova-notifications binds its queue there; service.update of the disabled
// compute service heals, the one of its enabling closes the window.
func TestOpenStackDriverNotificationsHeal(t *testing.T) {
	n := needNova(t)
	broker := os.Getenv("CLIMATE_TEST_NOVA_AMQP")
	if broker == "" {
		broker = "amqp://guest:guest@127.0.0.1:5672/climate-nova" // .ci/nova's vhost
	}
	hosts := n.reset(t)
	log := &bench.CappedBuffer{Max: 4 << 20}
	s := n.serveWith(t, hosts, func(o *serveOptions) {
		o.logTo = log
		o.driver.notifications, o.driver.notifyExch, o.driver.notifyTopics = broker, openstack.DefaultNovaExchange, []string{openstack.DefaultNovaTopic}
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("climate serve's log:\n%s", log)
		}
	})
	// Bound to Nova's exchange before Nova is touched (the log cannot signal).
	n.waitFor(t, "the listener bound to Nova's notifications", 30*time.Second, func() (bool, error) {
		return strings.Contains(log.String(), "nova notifications: listening"), nil
	})
	took := n.healsWhenDisabled(t, s, hosts, log)
	t.Logf("compute service disabled → replacement host in the aggregate (Nova's notifications, no polling): %s", took.Round(time.Millisecond))
	out := log.String()
	if !strings.Contains(out, "via=notification") || strings.Contains(out, "via=poll") {
		t.Fatalf("the decisions did not come from Nova's notifications alone:\n%s", out)
	}
	if u, _ := url.Parse(broker); u != nil {
		if pw, ok := u.User.Password(); ok && strings.Contains(out, ":"+pw+"@") {
			t.Fatal("the log shows the broker's password")
		}
	}
}

// healsWhenDisabled leases one host on s, disables its nova-compute service and waits
// for healing to give the active lease the other host, which the driver moves into the
// reservation's aggregate while the disabled one goes back to the freepool, under the
// monitor's window; enabled again, the window closes. It returns the time from the
// disabling to the other host in the aggregate.
func (n *testNova) healsWhenDisabled(t *testing.T, s *server, hosts []string, log fmt.Stringer) time.Duration {
	t.Helper()
	ctx := context.Background()
	setService := func(host string, status services.ServiceStatus) {
		t.Helper()
		pages, err := services.List(n.compute, services.ListOpts{Binary: "nova-compute", Host: host}).AllPages(ctx)
		must(t, err)
		list, err := services.ExtractServices(pages)
		must(t, err)
		if len(list) != 1 {
			t.Fatalf("nova-compute services on %s: %v", host, list)
		}
		_, err = services.Update(ctx, n.compute, list[0].ID, services.UpdateOpts{Status: status}).Extract()
		must(t, err)
	}
	// Any one host: healing may then replace it by the other.
	start := time.Now().UTC().Add(2 * time.Second).Truncate(time.Second)
	r := ksCall(t, "POST", s.url+"/v1/leases", fmt.Sprintf(`{"name": "monitored", "start_date": %q, "end_date": %q,
		"reservations": [{"resource_type": "physical:host", "min": 1, "max": 1, "hypervisor_properties": "", "resource_properties": ""}]}`,
		start.Format("2006-01-02 15:04:05"), start.Add(time.Hour).Format("2006-01-02 15:04:05")), n.owner())
	if r.status != 201 {
		t.Fatalf("lease: %s", r)
	}
	leaseID := r.body["lease"].(map[string]any)["id"].(string)
	rid := r.body["lease"].(map[string]any)["reservations"].([]any)[0].(map[string]any)["id"].(string)
	var failed, other string
	n.waitFor(t, "a host in the reservation's aggregate", 30*time.Second, func() (bool, error) {
		a := n.aggregate(t, rid)
		if a == nil || len(a.Hosts) != 1 {
			return false, nil
		}
		failed, other = a.Hosts[0], hosts[0]
		if other == failed {
			other = hosts[1]
		}
		return true, nil
	})
	t.Cleanup(func() { setService(failed, services.ServiceEnabled) })
	var hostID string
	for _, h := range ksCall(t, "GET", s.url+"/v1/os-hosts", "", nil).body["hosts"].([]any) {
		if h := h.(map[string]any); h["hypervisor_hostname"] == failed {
			hostID = h["id"].(string)
		}
	}

	disabled := time.Now() // the request's start: Nova notifies before it answers
	setService(failed, services.ServiceDisabled)
	t.Logf("the disabling request took %s", time.Since(disabled).Round(time.Millisecond))
	healed := n.waitFor(t, "the other host in the aggregate, the failed one in the freepool", 30*time.Second, func() (bool, error) {
		a := n.aggregate(t, rid)
		return a != nil && slices.Equal(a.Hosts, []string{other}) && slices.Equal(n.aggregate(t, openstack.DefaultFreepool).Hosts, []string{failed}), nil
	})
	// When the monitor decided, from its log line's time (the polls above see it only to
	// 100 ms): detection apart from the Nova calls that move the hosts.
	for _, line := range strings.Split(log.String(), "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.Contains(line, "host out of service") && strings.HasPrefix(f[0], "time=") {
			if at, err := time.Parse(time.RFC3339Nano, strings.TrimPrefix(f[0], "time=")); err == nil {
				t.Logf("compute service disabled → host out of service (the monitor's log line): %s", at.Sub(disabled).Round(time.Millisecond))
			}
		}
	}
	windows := ksCall(t, "GET", s.url+"/v1/os-hosts/"+hostID+"/maintenances", "", nil)
	if list, _ := windows.body["maintenances"].([]any); len(list) != 1 || !strings.Contains(windows.raw, openstack.MonitorReason) {
		t.Fatalf("the failed host's maintenance windows: %s", windows)
	}
	if r := ksCall(t, "GET", s.url+"/v1/leases/"+leaseID, "", n.owner()); r.body["lease"].(map[string]any)["status"] != "ACTIVE" {
		t.Fatalf("the healed lease: %s", r)
	}

	setService(failed, services.ServiceEnabled)
	n.waitFor(t, "the monitor's window closed", 30*time.Second, func() (bool, error) {
		r := ksCall(t, "GET", s.url+"/v1/os-hosts/"+hostID+"/maintenances", "", nil)
		list, ok := r.body["maintenances"].([]any)
		if !ok {
			return false, fmt.Errorf("maintenance windows: %s", r)
		}
		return len(list) == 0, nil
	})
	return healed.Sub(disabled)
}

// A floating IP reservation against the real neutron-server (.ci/nova with NEUTRON=real),
// as Blazar's plugin: at the start Neutron has the address as a floating IP of the
// project, tagged blazar and reservation:<id>; at the end it is gone.
func TestOpenStackDriverFloatingIPReservation(t *testing.T) {
	n := needNova(t)
	netID := n.externalNetwork(t)
	hosts := n.reset(t)
	const addr = "172.24.4.10"
	fip := func() map[string]any {
		t.Helper()
		if list := n.floatingIPs(t, "floating_ip_address="+addr); len(list) > 0 {
			return list[0]
		}
		return nil
	}
	n.deleteFloatingIP(t, addr) // an interrupted run's
	s := n.serve(t, hosts)
	if r := ksCall(t, "POST", s.url+"/v1/floatingips", fmt.Sprintf(`{"floating_network_id": %q, "floating_ip_address": %q}`, netID, addr), nil); r.status != 201 {
		t.Fatalf("registering %s: %s", addr, r)
	}
	start := time.Now().UTC().Add(2 * time.Second).Truncate(time.Second)
	r := ksCall(t, "POST", s.url+"/v1/leases", fmt.Sprintf(`{"name": "fip", "start_date": %q, "end_date": %q,
		"reservations": [{"resource_type": "virtual:floatingip", "network_id": %q, "amount": 1}]}`,
		start.Format("2006-01-02 15:04:05"), start.Add(time.Hour).Format("2006-01-02 15:04:05"), netID), n.owner())
	if r.status != 201 {
		t.Fatalf("lease: %s", r)
	}
	leaseID := r.body["lease"].(map[string]any)["id"].(string)
	rid := r.body["lease"].(map[string]any)["reservations"].([]any)[0].(map[string]any)["id"].(string)
	made := n.waitFor(t, "the floating IP in Neutron, tagged", 30*time.Second, func() (bool, error) {
		f := fip()
		tags, _ := f["tags"].([]any)
		return f != nil && slices.Contains(tags, any("reservation:"+rid)), nil
	})
	t.Logf("lease start → floating IP in Neutron: %s", made.Sub(start).Round(time.Millisecond))
	f := fip()
	tags, _ := f["tags"].([]any)
	if f["project_id"] != n.project || f["floating_network_id"] != netID || !slices.Contains(tags, any("blazar")) || !slices.Contains(tags, any("reservation:"+rid)) {
		t.Fatalf("the reservation's floating IP: %v", f)
	}
	// The start is done once the lease is ACTIVE (the address exists a moment before):
	// until then an update is refused as the lease is STARTING.
	n.waitFor(t, "the lease ACTIVE", 30*time.Second, func() (bool, error) {
		r := ksCall(t, "GET", s.url+"/v1/leases/"+leaseID, "", n.owner())
		return r.body["lease"].(map[string]any)["status"] == "ACTIVE", nil
	})
	end := time.Now().UTC().Add(2 * time.Second).Truncate(time.Second)
	if r := ksCall(t, "PUT", s.url+"/v1/leases/"+leaseID, fmt.Sprintf(`{"end_date": %q}`, end.Format("2006-01-02 15:04:05")), n.owner()); r.status != 200 {
		t.Fatalf("moving the end: %s", r)
	}
	gone := n.waitFor(t, "the floating IP deleted", 30*time.Second, func() (bool, error) { return fip() == nil, nil })
	t.Logf("lease end → floating IP deleted: %s", gone.Sub(end).Round(time.Millisecond))
	n.waitFor(t, "the lease TERMINATED", 30*time.Second, func() (bool, error) {
		r := ksCall(t, "GET", s.url+"/v1/leases/"+leaseID, "", n.owner())
		return r.body["lease"].(map[string]any)["status"] == "TERMINATED", nil
	})
}

// externalNetwork returns the id of the external network climate-ext and its subnet
// 172.24.4.0/24, made as an operator makes them unless there (kept across runs). Without
// the real neutron-server (the stub has no floating IPs) the test is skipped, or fails
// with CLIMATE_TEST_NEUTRON_REQUIRED=1.
func (n *testNova) externalNetwork(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	var ext struct {
		Extensions []struct {
			Alias string `json:"alias"`
		} `json:"extensions"`
	}
	_, err := n.network.Get(ctx, n.network.ServiceURL("extensions"), &ext, nil)
	if err != nil || !slices.ContainsFunc(ext.Extensions, func(e struct {
		Alias string `json:"alias"`
	}) bool {
		return e.Alias == "router"
	}) {
		if os.Getenv("CLIMATE_TEST_NEUTRON_REQUIRED") == "1" {
			t.Fatalf("CLIMATE_TEST_NEUTRON_REQUIRED=1 but Neutron has no floating IPs (the stub?): %v", err)
		}
		t.Skip("Neutron is the stub: bring .ci/nova up with NEUTRON=real (CI does)")
	}
	var nets struct {
		Networks []struct {
			ID string `json:"id"`
		} `json:"networks"`
	}
	_, err = n.network.Get(ctx, n.network.ServiceURL("networks")+"?name=climate-ext", &nets, nil)
	must(t, err)
	if len(nets.Networks) > 0 {
		return nets.Networks[0].ID
	}
	var created struct {
		Network struct {
			ID string `json:"id"`
		} `json:"network"`
	}
	_, err = n.network.Post(ctx, n.network.ServiceURL("networks"), map[string]any{"network": map[string]any{"name": "climate-ext",
		"router:external": true, "provider:network_type": "flat", "provider:physical_network": "physnet1"}}, &created, nil)
	must(t, err)
	// Reserved addresses lie outside the pool Neutron hands addresses out of (Blazar
	// refuses the others).
	_, err = n.network.Post(ctx, n.network.ServiceURL("subnets"), map[string]any{"subnet": map[string]any{"network_id": created.Network.ID,
		"cidr": "172.24.4.0/24", "ip_version": 4, "enable_dhcp": false, "gateway_ip": "172.24.4.1",
		"allocation_pools": []map[string]string{{"start": "172.24.4.100", "end": "172.24.4.200"}}}}, nil, nil)
	must(t, err)
	return created.Network.ID
}

// floatingIPs lists Neutron's floating IPs matching query (e.g. "tags=reservation:<id>").
func (n *testNova) floatingIPs(t *testing.T, query string) []map[string]any {
	t.Helper()
	var list struct {
		FloatingIPs []map[string]any `json:"floatingips"`
	}
	_, err := n.network.Get(context.Background(), n.network.ServiceURL("floatingips")+"?"+query, &list, nil)
	must(t, err)
	return list.FloatingIPs
}

// deleteFloatingIP deletes the floating IP with address addr, if any.
func (n *testNova) deleteFloatingIP(t *testing.T, addr string) {
	t.Helper()
	for _, f := range n.floatingIPs(t, "floating_ip_address="+addr) {
		_, err := n.network.Delete(context.Background(), n.network.ServiceURL("floatingips", f["id"].(string)), nil)
		must(t, ignore404(err))
	}
}

// serverGroups counts the server groups named after reservation rid (every project's).
func (n *testNova) serverGroups(t *testing.T, rid string) int {
	t.Helper()
	return len(n.serverGroupIDs(t, rid))
}

// serverGroupIDs returns the ids of the server groups named after reservation rid.
func (n *testNova) serverGroupIDs(t *testing.T, rid string) []string {
	t.Helper()
	pages, err := servergroups.List(n.compute, servergroups.ListOpts{AllProjects: true}).AllPages(context.Background())
	must(t, err)
	all, err := servergroups.ExtractServerGroups(pages)
	must(t, err)
	var ids []string
	for _, g := range all {
		if g.Name == "reservation:"+rid {
			ids = append(ids, g.ID)
		}
	}
	return ids
}

// Registering a floating IP with --driver openstack checks it against Neutron, as Blazar's
// FloatingIPPool: an unknown network and an address Neutron may hand out (in an allocation
// pool, or the gateway) are 400s, an address in none of the network's subnets a 404; a good
// one is registered with its subnet.
func TestOpenStackDriverFloatingIPRegistration(t *testing.T) {
	n := needNova(t)
	netID := n.externalNetwork(t)
	var subnets struct {
		Subnets []struct {
			ID string `json:"id"`
		} `json:"subnets"`
	}
	_, err := n.network.Get(context.Background(), n.network.ServiceURL("subnets")+"?network_id="+netID, &subnets, nil)
	must(t, err)
	if len(subnets.Subnets) != 1 {
		t.Fatalf("subnets of climate-ext: %v", subnets.Subnets)
	}
	s := n.serve(t, nil)
	register := func(network, addr string) apiResponse {
		return ksCall(t, "POST", s.url+"/v1/floatingips", fmt.Sprintf(`{"floating_network_id": %q, "floating_ip_address": %q}`, network, addr), nil)
	}
	for _, tc := range []struct {
		network, addr string
		status        int
		want          string
	}{
		{"no-such-network", "172.24.4.30", 400, "Failed to find network no-such-network"},
		{netID, "172.24.4.150", 400, "The floating IP 172.24.4.150 is used in allocation_pools or gateway_ip in subnet " + subnets.Subnets[0].ID},
		{netID, "172.24.4.1", 400, "is used in allocation_pools or gateway_ip"},
		{netID, "10.9.9.9", 404, "Valid subnet for the floating IP 10.9.9.9 is not found."},
	} {
		if r := register(tc.network, tc.addr); r.status != tc.status || !strings.Contains(r.raw, tc.want) {
			t.Errorf("registering %s on %s: %s; want %d with %q", tc.addr, tc.network, r, tc.status, tc.want)
		}
	}
	r := register(netID, "172.24.4.30")
	if r.status != 201 {
		t.Fatalf("registering 172.24.4.30: %s", r)
	}
	if f := r.body["floatingip"].(map[string]any); f["subnet_id"] != subnets.Subnets[0].ID {
		t.Fatalf("the registered address: %v, want subnet_id %s", f, subnets.Subnets[0].ID)
	}
}

// An active instance reservation that an update grows from one slot to two gets its
// placement inventory raised (through the lease.update notification), as Blazar raises it:
// a second server of the reservation's flavor then boots, where before the update it
// found no room; the end deletes both and every inventory.
func TestOpenStackDriverActiveInstanceReservationGrows(t *testing.T) {
	n := needNova(t)
	hosts := n.reset(t)
	_, imageID := n.bootable(t)
	s := n.serve(t, hosts)
	start := time.Now().UTC().Add(2 * time.Second).Truncate(time.Second)
	r := ksCall(t, "POST", s.url+"/v1/leases", fmt.Sprintf(`{"name": "grows", "start_date": %q, "end_date": %q, "reservations": [
		{"resource_type": "virtual:instance", "amount": 1, "vcpus": 1, "memory_mb": 64, "disk_gb": 0, "affinity": true, "resource_properties": ""}]}`,
		start.Format("2006-01-02 15:04:05"), start.Add(time.Hour).Format("2006-01-02 15:04:05")), n.owner())
	if r.status != 201 {
		t.Fatalf("lease: %s", r)
	}
	leaseID := r.body["lease"].(map[string]any)["id"].(string)
	rid := r.body["lease"].(map[string]any)["reservations"].([]any)[0].(map[string]any)["id"].(string)
	rc := "CUSTOM_RESERVATION_" + strings.ToUpper(strings.ReplaceAll(rid, "-", "_"))
	n.waitFor(t, "the lease ACTIVE", 30*time.Second, func() (bool, error) {
		r := ksCall(t, "GET", s.url+"/v1/leases/"+leaseID, "", n.owner())
		return r.body["lease"].(map[string]any)["status"] == "ACTIVE", nil
	})
	if got := n.inventories(t, rc); len(got) != 1 || slices.Collect(maps.Values(got))[0] != 1 {
		t.Fatalf("inventories of %s: %v, want one of 1", rc, got)
	}
	first := n.boot(t, "slot-1", rid, imageID, nil)
	n.active(t, first)

	if r := ksCall(t, "PUT", s.url+"/v1/leases/"+leaseID, fmt.Sprintf(`{"reservations": [{"id": %q, "amount": 2}]}`, rid), n.owner()); r.status != 200 {
		t.Fatalf("growing the active instance reservation: %s", r)
	}
	updated := time.Now()
	raised := n.waitFor(t, "the inventory raised to 2", 30*time.Second, func() (bool, error) {
		total := 0
		for _, v := range n.inventories(t, rc) {
			total += v
		}
		return total == 2, nil
	})
	t.Logf("update → inventory raised: %s", raised.Sub(updated).Round(time.Millisecond))
	second := n.boot(t, "slot-2", rid, imageID, nil)
	n.active(t, second)

	end := time.Now().UTC().Add(2 * time.Second).Truncate(time.Second)
	if r := ksCall(t, "PUT", s.url+"/v1/leases/"+leaseID, fmt.Sprintf(`{"end_date": %q}`, end.Format("2006-01-02 15:04:05")), n.owner()); r.status != 200 {
		t.Fatalf("moving the end: %s", r)
	}
	n.waitFor(t, "both servers deleted and no inventory left", time.Minute, func() (bool, error) {
		a, err := n.server(t, first)
		if err != nil {
			return false, err
		}
		b, err := n.server(t, second)
		return a == nil && b == nil && len(n.inventories(t, rc)) == 0, err
	})
}

// inventories returns the totals of resource class rc by the placement provider that
// has an inventory of it.
func (n *testNova) inventories(t *testing.T, rc string) map[string]int {
	t.Helper()
	ctx := context.Background()
	var providers struct {
		List []struct {
			UUID string `json:"uuid"`
			Name string `json:"name"`
		} `json:"resource_providers"`
	}
	_, err := n.placement.Get(ctx, n.placement.ServiceURL("resource_providers"), &providers, nil)
	must(t, err)
	out := map[string]int{}
	for _, p := range providers.List {
		var inv struct {
			Total int `json:"total"`
		}
		_, err := n.placement.Get(ctx, n.placement.ServiceURL("resource_providers", p.UUID, "inventories", rc), &inv, nil)
		if gophercloud.ResponseCodeIs(err, 404) {
			continue
		}
		must(t, err)
		out[p.Name] = inv.Total
	}
	return out
}

// Hosts registered from Nova carry their compute node's placement traits as extra
// capabilities, so flavor:instance's trait:T=required|forbidden picks hosts as Blazar's
// placement query does: with CUSTOM_CLIMATE_GPU set on the first hypervisor only, a
// reservation requiring it gets the first host's slots, one forbidding it the other's.
func TestOpenStackDriverHostTraits(t *testing.T) {
	n := needNova(t)
	hosts := n.reset(t)
	ctx := context.Background()
	const trait = "CUSTOM_CLIMATE_GPU"
	_, err := n.placement.Put(ctx, n.placement.ServiceURL("traits", trait), nil, nil, &gophercloud.RequestOpts{OkCodes: []int{201, 204}})
	must(t, err)
	setTraits := func(hypervisor string, edit func([]string) []string) {
		t.Helper()
		var providers struct {
			List []struct {
				UUID string `json:"uuid"`
			} `json:"resource_providers"`
		}
		_, err := n.placement.Get(ctx, n.placement.ServiceURL("resource_providers")+"?name="+hypervisor, &providers, nil)
		must(t, err)
		if len(providers.List) != 1 {
			t.Fatalf("providers named %s: %v", hypervisor, providers.List)
		}
		u := n.placement.ServiceURL("resource_providers", providers.List[0].UUID, "traits")
		var cur struct {
			Traits     []string `json:"traits"`
			Generation int      `json:"resource_provider_generation"`
		}
		_, err = n.placement.Get(ctx, u, &cur, nil)
		must(t, err)
		_, err = n.placement.Put(ctx, u, map[string]any{"traits": edit(cur.Traits), "resource_provider_generation": cur.Generation}, nil,
			&gophercloud.RequestOpts{OkCodes: []int{200}})
		must(t, err)
	}
	without := func(ts []string) []string { return slices.DeleteFunc(ts, func(s string) bool { return s == trait }) }
	setTraits(hosts[0], func(ts []string) []string { return append(without(ts), trait) })
	t.Cleanup(func() { setTraits(hosts[0], without) })

	s := n.serve(t, hosts)
	for _, h := range ksCall(t, "GET", s.url+"/v1/os-hosts", "", nil).body["hosts"].([]any) {
		h := h.(map[string]any)
		if got, want := h[trait], h["hypervisor_hostname"] == hosts[0]; (got == "true") != want {
			t.Fatalf("host %v: %s = %v, want it %v", h["hypervisor_hostname"], trait, got, map[bool]string{true: "true", false: "absent"}[want])
		}
	}
	flavor := func(name, value string) string {
		t.Helper()
		r := ksCall(t, "POST", s.url+"/v1/flavors", fmt.Sprintf(`{"name": %q, "vcpus": 1, "ram": 64, "disk": 0, "extra_specs": {"trait:%s": %q}}`, name, trait, value), nil)
		if r.status != 201 {
			t.Fatalf("registering flavor %s: %s", name, r)
		}
		return r.body["flavor"].(map[string]any)["id"].(string)
	}
	gpu, noGPU := flavor("climate-gpu", "required"), flavor("climate-no-gpu", "forbidden")
	start := time.Now().UTC().Add(2 * time.Second).Truncate(time.Second)
	r := ksCall(t, "POST", s.url+"/v1/leases", fmt.Sprintf(`{"name": "traits", "start_date": %q, "end_date": %q, "reservations": [
		{"resource_type": "flavor:instance", "flavor_id": %q, "amount": 1}, {"resource_type": "flavor:instance", "flavor_id": %q, "amount": 1}]}`,
		start.Format("2006-01-02 15:04:05"), start.Add(time.Hour).Format("2006-01-02 15:04:05"), gpu, noGPU), n.owner())
	if r.status != 201 {
		t.Fatalf("lease: %s", r)
	}
	leaseID := r.body["lease"].(map[string]any)["id"].(string)
	want := map[string]string{} // reservation id → its host
	for _, res := range r.body["lease"].(map[string]any)["reservations"].([]any) {
		res := res.(map[string]any)
		want[res["id"].(string)] = hosts[1]
		if res["flavor_id"] != nil && strings.Contains(res["resource_properties"].(string), `"required"`) {
			want[res["id"].(string)] = hosts[0]
		}
	}
	n.waitFor(t, "the lease ACTIVE", 30*time.Second, func() (bool, error) {
		r := ksCall(t, "GET", s.url+"/v1/leases/"+leaseID, "", n.owner())
		return r.body["lease"].(map[string]any)["status"] == "ACTIVE", nil
	})
	for rid, host := range want {
		if a := n.aggregate(t, rid); a == nil || !slices.Equal(a.Hosts, []string{host}) {
			t.Fatalf("the aggregate of reservation %s: %+v, want it holding %s", rid, a, host)
		}
	}
	if r := ksCall(t, "DELETE", s.url+"/v1/leases/"+leaseID, "", n.owner()); r.status != 204 {
		t.Fatalf("deleting the lease: %s", r)
	}
}
