package main

import (
	"climate/bench"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/flavors"

	"climate/openstack"
	"climate/postgres"
)

// Two replicas of climate serve --driver openstack on one PostgreSQL schema, against the
// real Nova and neutron-server. A lease with a host, an instance and a floating IP
// reservation starts; whichever replica's engine runs the start freezes right after one
// OpenStack change (the hidden --test-openstack-freeze-… flags) and is SIGKILLed there,
// its lease STARTING. The other replica takes the start over when the claim lapses and
// completes it: one aggregate per reservation, one flavor, one server group (the one the
// reservation records), one floating IP; the reservation's flavor boots into its group. At the end nothing is left in Nova, Placement or Neutron
// but the freepool holding every host.
func TestOpenStackDriverTakeoverOnPostgres(t *testing.T) {
	// $HOST is the host reservation's host: frozen there, it is in both its reservation's
	// aggregate and the freepool; $SLOTHOST the instance reservation's: its flavor is made,
	// its inventory not. The server group is made by the creation's delivery or by the
	// start, whichever comes first; the rest by the start.
	for _, at := range []string{"add host $HOST to", "add host $SLOTHOST to", "create server group", "create floating IP"} {
		t.Run(strings.ReplaceAll(at, " ", "_"), func(t *testing.T) { takeoverScenario(t, at) })
	}
}

func takeoverScenario(t *testing.T, freezeAt string) {
	n := needNova(t)
	netID := n.externalNetwork(t)
	dsn := postgres.TestDSN(t)
	bin := climateBinary(t)
	hosts := n.reset(t)
	if len(hosts) < 2 {
		t.Fatalf("hypervisors %v: want 2", hosts)
	}
	const addr = "172.24.4.20"
	n.deleteFloatingIP(t, addr) // an interrupted run's
	_, imageID := n.bootable(t)
	frozen := filepath.Join(t.TempDir(), "frozen")
	freezeAt = strings.NewReplacer("$HOST", hosts[0], "$SLOTHOST", hosts[1]).Replace(freezeAt)
	args := []string{"--database", dsn, "--driver", "openstack", "--keystone-url", n.ksURL, "--keystone-username", "admin",
		"--keystone-password", "adminpass", "--keystone-project", "admin", "--openstack-retry-wait", "200ms"}
	// Hosts and the address are registered by a replica that never freezes (adding a host
	// to the freepool is a change too).
	setup := startReplicas(t, bin, 1, nil, args...)[0]
	for _, h := range hosts {
		if r := ksCall(t, "POST", setup.URL+"/v1/os-hosts", fmt.Sprintf(`{"name": %q}`, h), nil); r.status != 201 {
			t.Fatalf("registering %s: %s", h, r)
		}
	}
	if r := ksCall(t, "POST", setup.URL+"/v1/floatingips", fmt.Sprintf(`{"floating_network_id": %q, "floating_ip_address": %q}`, netID, addr), nil); r.status != 201 {
		t.Fatalf("registering %s: %s", addr, r)
	}
	setup.Stop()
	logs := []*bench.CappedBuffer{{Max: 16 << 20}, {Max: 16 << 20}}
	replicas := startReplicas(t, bin, 2, []io.Writer{logs[0], logs[1]}, append(args, "--test-openstack-freeze-at", freezeAt, "--test-openstack-freeze-file", frozen)...)
	t.Cleanup(func() {
		if t.Failed() {
			for i, l := range logs {
				t.Logf("replica %d's log:\n%s", i, l.String())
			}
		}
	})
	a := replicas[0]
	// The first host whole, a slot on the other (a host reserved whole has no slots).
	start := time.Now().UTC().Add(3 * time.Second).Truncate(time.Second)
	body := fmt.Sprintf(`{"name": "taken-over", "start_date": %q, "end_date": %q, "reservations": [
		{"resource_type": "physical:host", "min": 1, "max": 1, "hypervisor_properties": "[\"==\", \"$hypervisor_hostname\", \"%s\"]", "resource_properties": ""},
		{"resource_type": "virtual:instance", "amount": 1, "vcpus": 1, "memory_mb": 64, "disk_gb": 0, "affinity": false, "resource_properties": ""},
		{"resource_type": "virtual:floatingip", "network_id": %q, "amount": 1}]}`,
		start.Format("2006-01-02 15:04:05"), start.Add(time.Hour).Format("2006-01-02 15:04:05"), hosts[0], netID)
	// The creation makes the server group before it answers: it may be the one frozen, so
	// it is sent aside and the lease read back from the list.
	created := make(chan createAnswer, 1)
	go func() { created <- postJSON(a.URL+"/v1/leases", body, n.owner()) }()
	var leaseID, hostRID, instRID, fipRID string
	var rids map[string]string // reservation ids by resource type
	readLease := func(s *bench.Server) {
		t.Helper()
		r := ksCall(t, "GET", s.URL+"/v1/leases", "", n.owner())
		list, _ := r.body["leases"].([]any)
		if len(list) != 1 {
			t.Fatalf("leases: %s, want the one made", r)
		}
		lease := list[0].(map[string]any)
		leaseID, rids = lease["id"].(string), map[string]string{}
		for _, res := range lease["reservations"].([]any) {
			res := res.(map[string]any)
			rids[res["resource_type"].(string)] = res["id"].(string)
		}
	}
	var group string // the instance reservation's server_group_id
	status := func(s *bench.Server) string {
		t.Helper()
		r := ksCall(t, "GET", s.URL+"/v1/leases/"+leaseID, "", n.owner())
		l, ok := r.body["lease"].(map[string]any)
		if !ok {
			t.Fatalf("the lease: %s", r)
		}
		if l["status"] == "ERROR" {
			t.Fatalf("the lease failed: %s", r.raw)
		}
		for _, res := range l["reservations"].([]any) {
			if res := res.(map[string]any); res["id"] == instRID {
				group, _ = res["server_group_id"].(string)
			}
		}
		return l["status"].(string)
	}

	// The replica running the start freezes after the change and says who it is.
	var line string
	n.waitFor(t, "a replica frozen after "+freezeAt, 30*time.Second, func() (bool, error) {
		data, err := os.ReadFile(frozen)
		if os.IsNotExist(err) {
			return false, nil
		}
		line = string(data)
		return strings.HasSuffix(line, "\n"), err
	})
	pid, err := strconv.Atoi(strings.Fields(line)[0])
	if err != nil {
		t.Fatalf("the freeze file: %q", line)
	}
	var victim, survivor *bench.Server
	for i, s := range replicas {
		if s.Cmd.Process.Pid == pid {
			victim, survivor = s, replicas[1-i]
		}
	}
	if victim == nil {
		t.Fatalf("the frozen process %d is neither replica", pid)
	}
	readLease(survivor)
	hostRID, instRID, fipRID = rids["physical:host"], rids[openstack.InstanceType], rids[openstack.FloatingIPType]
	frozenIn := status(survivor)
	switch got := frozenIn; {
	case got == "STARTING":
	case got == "PENDING" && strings.HasPrefix(freezeAt, "create server group"): // frozen in the creation's delivery
	default:
		t.Fatalf("the lease is %s while its start is frozen after %q, want STARTING", got, strings.TrimSpace(line))
	}
	if freezeAt == "add host "+hosts[0]+" to" {
		agg, free := n.aggregate(t, hostRID), n.aggregate(t, openstack.DefaultFreepool)
		if agg == nil || !slices.Contains(agg.Hosts, hosts[0]) || !slices.Contains(free.Hosts, hosts[0]) {
			t.Fatalf("frozen after adding %s to the reservation's aggregate: aggregate %+v, freepool %v; want it in both", hosts[0], agg, free.Hosts)
		}
	}
	if err := victim.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	victim.Stop()
	if answer := <-created; victim != a && answer.status != 201 {
		t.Fatalf("the lease's creation: %d %s %v", answer.status, answer.body, answer.err)
	} // else its process was killed before it answered
	t.Logf("SIGKILLed the replica frozen after %q (the lease %s)", strings.TrimSpace(line), frozenIn)

	done := n.waitFor(t, "the start completed by the other replica", time.Minute, func() (bool, error) {
		return status(survivor) == "ACTIVE", nil
	})
	t.Logf("kill → lease ACTIVE through the other replica: %s", done.Sub(killed).Round(time.Millisecond))

	// One of each, where Blazar puts them.
	named := func(name string) (out [][]string) {
		for _, a := range n.aggregates(t) {
			if a.Name == name {
				out = append(out, slices.Sorted(slices.Values(a.Hosts)))
			}
		}
		return out
	}
	if got := named(hostRID); len(got) != 1 || !slices.Equal(got[0], hosts[:1]) {
		t.Fatalf("aggregates of the host reservation: %v, want one holding [%s]", got, hosts[0])
	}
	if got := named(instRID); len(got) != 1 || !slices.Equal(got[0], hosts[1:2]) {
		t.Fatalf("aggregates of the instance reservation: %v, want one holding [%s]", got, hosts[1])
	}
	if got := named(openstack.DefaultFreepool); len(got) != 1 || !slices.Equal(got[0], hosts[1:2]) {
		t.Fatalf("the freepool: %v, want [%s] (the instance reservation's host stays in it)", got, hosts[1])
	}
	pages, err := flavors.ListDetail(n.compute, flavors.ListOpts{AccessType: flavors.AllAccess}).AllPages(context.Background())
	must(t, err)
	all, err := flavors.ExtractFlavors(pages)
	must(t, err)
	if c := len(slices.DeleteFunc(all, func(f flavors.Flavor) bool { return f.Name != "reservation:"+instRID })); c != 1 {
		t.Fatalf("%d flavors named reservation:%s, want 1", c, instRID)
	}
	if groups := n.serverGroupIDs(t, instRID); !slices.Equal(groups, []string{group}) {
		t.Fatalf("server groups of the instance reservation: %v, want one, its server_group_id %s", groups, group)
	}
	if fips := n.floatingIPs(t, "tags=reservation:"+fipRID); len(fips) != 1 || fips[0]["floating_ip_address"] != addr {
		t.Fatalf("floating IPs of the reservation: %v, want one, %s", fips, addr)
	}
	// The reservation's flavor boots on its host, into its server group.
	srv := n.boot(t, "slot", instRID, imageID, map[string]any{"group": group})
	if on := n.active(t, srv); on != hosts[1] {
		t.Fatalf("the reserved server is on %s, want %s", on, hosts[1])
	}

	end := time.Now().UTC().Add(2 * time.Second).Truncate(time.Second)
	if r := ksCall(t, "PUT", survivor.URL+"/v1/leases/"+leaseID, fmt.Sprintf(`{"end_date": %q}`, end.Format("2006-01-02 15:04:05")), n.owner()); r.status != 200 {
		t.Fatalf("moving the end: %s", r)
	}
	cleaned := n.waitFor(t, "the lease TERMINATED", 2*time.Minute, func() (bool, error) {
		return status(survivor) == "TERMINATED", nil
	})
	t.Logf("lease end → TERMINATED with Nova cleaned: %s", cleaned.Sub(end).Round(time.Millisecond))
	if all := n.aggregates(t); len(all) != 1 || all[0].Name != openstack.DefaultFreepool || !slices.Equal(slices.Sorted(slices.Values(all[0].Hosts)), hosts) {
		t.Fatalf("aggregates after the end: %+v, want only the freepool with %v", all, hosts)
	}
	if sv, err := n.server(t, srv); err != nil || sv != nil {
		t.Fatalf("the reservation's server after the end: %+v, %v", sv, err)
	}
	if _, err := flavors.Get(context.Background(), n.compute, instRID).Extract(); !gophercloud.ResponseCodeIs(err, 404) {
		t.Fatalf("the reservation's flavor after the end: %v", err)
	}
	if groups := n.serverGroupIDs(t, instRID); len(groups) != 0 {
		t.Fatalf("server groups left after the end: %v", groups)
	}
	rc := "CUSTOM_RESERVATION_" + strings.ToUpper(strings.ReplaceAll(instRID, "-", "_"))
	if _, err := n.placement.Get(context.Background(), n.placement.ServiceURL("resource_classes", rc), nil, nil); !gophercloud.ResponseCodeIs(err, 404) {
		t.Fatalf("the resource class after the end: %v", err)
	}
	if fips := n.floatingIPs(t, "floating_ip_address="+addr); len(fips) != 0 {
		t.Fatalf("floating IPs left after the end: %v", fips)
	}
}

// createAnswer is what a POST got: a status and body, or an error (no answer).
type createAnswer struct {
	status int
	body   string
	err    error
}

// postJSON POSTs body to url with headers, for a goroutine (no testing.T).
func postJSON(url, body string, headers map[string]string) createAnswer {
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		return createAnswer{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return createAnswer{err: err}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return createAnswer{status: resp.StatusCode, body: string(data), err: err}
}
