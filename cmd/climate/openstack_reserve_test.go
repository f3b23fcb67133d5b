package main

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	gopheros "github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/flavors"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servergroups"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/projects"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/roles"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/tokens"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/trusts"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/users"

	"climate"
	"climate/keystone"
	"climate/openstack"
	"climate/sqlite"
)

// As Blazar's reserve_resource, a lease's creation makes in Nova, before it answers and
// long before its start:
// the host reservation's aggregate (Blazar's zone and owner, no host: the freepool keeps
// them), and for an instance reservation with affinity true the server group
// reservation:<id> (policy affinity) whose id the API shows as server_group_id, the
// private flavor (affinity_id among its extra specs, no project access yet), the aggregate
// (affinity_id in its metadata, no host) and the resource class. An update before the
// start that resizes the instance reservation makes its flavor again at the new size.
// Deleting the lease, never started, deletes all of them.
func TestOpenStackDriverReservesAtCreation(t *testing.T) {
	n := needNova(t)
	hosts := n.reset(t)
	s := n.serve(t, hosts)
	ctx := context.Background()
	start := time.Now().UTC().Add(time.Hour).Truncate(time.Second)
	r := ksCall(t, "POST", s.url+"/v1/leases", fmt.Sprintf(`{"name": "early", "start_date": %q, "end_date": %q, "reservations": [
		{"resource_type": "physical:host", "min": 1, "max": 1, "hypervisor_properties": "[\"==\", \"$hypervisor_hostname\", \"%s\"]", "resource_properties": ""},
		{"resource_type": "virtual:instance", "amount": 2, "vcpus": 1, "memory_mb": 64, "disk_gb": 0, "affinity": true, "resource_properties": ""}]}`,
		start.Format("2006-01-02 15:04:05"), start.Add(time.Hour).Format("2006-01-02 15:04:05"), hosts[0]), n.owner())
	if r.status != 201 {
		t.Fatalf("lease: %s", r)
	}
	created := time.Now()
	lease := r.body["lease"].(map[string]any)
	leaseID := lease["id"].(string)
	var hostRID, instRID, answered string
	for _, res := range lease["reservations"].([]any) {
		if res := res.(map[string]any); res["resource_type"] == "physical:host" {
			hostRID = res["id"].(string)
		} else {
			instRID, answered = res["id"].(string), res["server_group_id"].(string)
		}
	}
	rc := "CUSTOM_RESERVATION_" + strings.ToUpper(strings.ReplaceAll(instRID, "-", "_"))
	groupOf := func() string {
		t.Helper()
		l := ksCall(t, "GET", s.url+"/v1/leases/"+leaseID, "", n.owner()).body["lease"].(map[string]any)
		for _, res := range l["reservations"].([]any) {
			if res := res.(map[string]any); res["id"] == instRID {
				g, _ := res["server_group_id"].(string)
				return g
			}
		}
		t.Fatalf("no reservation %s in %v", instRID, l)
		return ""
	}
	var group *servergroups.ServerGroup
	ready := n.waitFor(t, "the reservations' artefacts in Nova", 30*time.Second, func() (bool, error) {
		id := groupOf()
		g, err := servergroups.Get(ctx, n.compute, id).Extract()
		if gophercloud.ResponseCodeIs(err, 404) {
			return false, nil // not made yet: the id is still Climate's own
		}
		if err != nil {
			return false, err
		}
		group = g
		_, err = flavors.Get(ctx, n.compute, instRID).Extract()
		if gophercloud.ResponseCodeIs(err, 404) {
			return false, nil
		}
		return err == nil && n.aggregate(t, hostRID) != nil && n.aggregate(t, instRID) != nil, err
	})
	t.Logf("lease created → aggregates, server group and flavor in Nova: %s", ready.Sub(created).Round(time.Millisecond))
	if answered != group.ID {
		t.Fatalf("the creation answered server_group_id %s, Nova's group is %s (Blazar's tempest test boots into the answered one)", answered, group.ID)
	}
	if group.Name != "reservation:"+instRID || group.Policy == nil || *group.Policy != "affinity" || group.ProjectID != n.project {
		t.Fatalf("the server group: %+v, want reservation:%s, policy affinity, project %s", group, instRID, n.project)
	}
	if a := n.aggregate(t, hostRID); a.AvailabilityZone != "blazar_"+hostRID || a.Metadata["blazar:owner"] != n.project || len(a.Hosts) != 0 {
		t.Fatalf("the host reservation's aggregate before the start: %+v", a)
	}
	if a := n.aggregate(t, instRID); a.Metadata["affinity_id"] != group.ID || a.Metadata["filter_tenant_id"] != n.project || len(a.Hosts) != 0 {
		t.Fatalf("the instance reservation's aggregate before the start: %+v", a)
	}
	if got := slices.Sorted(slices.Values(n.aggregate(t, openstack.DefaultFreepool).Hosts)); !slices.Equal(got, hosts) {
		t.Fatalf("the freepool before the start: %v, want %v", got, hosts)
	}
	specs, err := flavors.ListExtraSpecs(ctx, n.compute, instRID).Extract()
	must(t, err)
	want := map[string]string{"aggregate_instance_extra_specs:reservation": instRID, "resources:" + rc: "1", "affinity_id": group.ID}
	if !maps.Equal(specs, want) {
		t.Fatalf("the flavor's extra specs: %v, want %v", specs, want)
	}
	pages, err := flavors.ListAccesses(n.compute, instRID).AllPages(ctx)
	must(t, err)
	if access, err := flavors.ExtractAccesses(pages); err != nil || len(access) != 0 {
		t.Fatalf("access to the flavor before the start: %v, %v; want none", access, err)
	}
	if _, err := n.placement.Get(ctx, n.placement.ServiceURL("resource_classes", rc), nil, nil); err != nil {
		t.Fatalf("the resource class before the start: %v", err)
	}

	// Resized before its start: the flavor is made again at the new size, the group kept.
	if r := ksCall(t, "PUT", s.url+"/v1/leases/"+leaseID, fmt.Sprintf(`{"reservations": [{"id": %q, "vcpus": 2}]}`, instRID), n.owner()); r.status != 200 {
		t.Fatalf("resizing: %s", r)
	}
	n.waitFor(t, "the flavor made again with 2 vCPUs", 30*time.Second, func() (bool, error) {
		fl, err := flavors.Get(ctx, n.compute, instRID).Extract()
		if gophercloud.ResponseCodeIs(err, 404) {
			return false, nil
		}
		return err == nil && fl.VCPUs == 2, err
	})
	if got := groupOf(); got != group.ID || n.serverGroups(t, instRID) != 1 {
		t.Fatalf("after the resize: server_group_id %s and %d groups, want %s and 1", got, n.serverGroups(t, instRID), group.ID)
	}

	if r := ksCall(t, "DELETE", s.url+"/v1/leases/"+leaseID, "", n.owner()); r.status != 204 {
		t.Fatalf("deleting the lease: %s", r)
	}
	deleted := time.Now()
	gone := n.waitFor(t, "nothing of the deleted lease left in Nova", 30*time.Second, func() (bool, error) {
		_, err := flavors.Get(ctx, n.compute, instRID).Extract()
		if !gophercloud.ResponseCodeIs(err, 404) {
			return false, nil
		}
		_, err = n.placement.Get(ctx, n.placement.ServiceURL("resource_classes", rc), nil, nil)
		return gophercloud.ResponseCodeIs(err, 404) && n.serverGroups(t, instRID) == 0 && len(n.aggregates(t)) == 1, nil
	})
	t.Logf("lease deleted → nothing left in Nova: %s", gone.Sub(deleted).Round(time.Millisecond))
	if got := slices.Sorted(slices.Values(n.aggregate(t, openstack.DefaultFreepool).Hosts)); !slices.Equal(got, hosts) {
		t.Fatalf("the freepool after the deletion: %v, want %v", got, hosts)
	}
}

// The lease's creation delivery and its start may make an instance reservation's server
// group at once (a lease starting now): however many makers race, one group is left in
// Nova and it is the one the reservation records; the end deletes it.
func TestOpenStackDriverServerGroupRace(t *testing.T) {
	n := needNova(t)
	n.reset(t)
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "climate.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	clients, err := openstack.Connect(ctx, openstack.Auth{URL: n.ksURL, Username: "admin", Password: "adminpass", Project: "admin"})
	if err != nil {
		t.Fatal(err)
	}
	d := openstack.New(openstack.Config{Compute: clients.Compute, Placement: clients.Placement, Store: st, Backoff: 100 * time.Millisecond})
	now := time.Now().UTC().Truncate(time.Second)
	placeholder := climate.NewID() // Climate's own id, until Nova's is recorded
	l := &climate.Lease{ID: climate.NewID(), Name: "race", ProjectID: n.project, Start: now.Add(time.Hour), End: now.Add(2 * time.Hour),
		Status: climate.LeasePending, CreatedAt: now, Reservations: []climate.Reservation{{ID: climate.NewID(), ResourceType: openstack.InstanceType,
			Status: climate.ReservationPending, Amount: 1, Size: climate.Size{VCPUs: 1, MemoryMB: 64}, Affinity: new(bool),
			ServerGroupID: placeholder, CreatedAt: now}}}
	if err := st.Update(ctx, func(tx climate.Tx) error { return tx.InsertLease(ctx, l) }); err != nil {
		t.Fatal(err)
	}
	rid := l.Reservations[0].ID
	const makers = 4
	errs := make(chan error, makers)
	for range makers {
		go func() { errs <- d.Reserve(ctx, l) }()
	}
	for range makers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	var recorded string
	if err := st.View(ctx, func(tx climate.Tx) error {
		got, err := tx.GetLease(ctx, l.ID)
		if err == nil {
			recorded = got.Reservations[0].ServerGroupID
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	ids := n.serverGroupIDs(t, rid)
	if len(ids) != 1 || ids[0] != recorded || recorded == placeholder {
		t.Fatalf("%d makers: groups %v in Nova, %s recorded; want one, recorded", makers, ids, recorded)
	}
	if err := d.OnEnd(ctx, l); err != nil {
		t.Fatal(err)
	}
	if c := n.serverGroups(t, rid); c != 0 {
		t.Fatalf("%d server groups left after the end", c)
	}
}

// A server group is made in the lease owner's project, through the lease's Keystone trust
// (the service user's token scoped to the trust, as Blazar makes it with the owner's):
// Nova lets only that project boot into it. A project with a member, whose trust to the
// service user (admin) the lease carries, sees its reservation's group; the end deletes it.
func TestOpenStackDriverServerGroupInOwnersProject(t *testing.T) {
	n := needNova(t)
	n.reset(t)
	ctx := context.Background()
	admin := n.identity(t, "admin", "adminpass", "admin")
	project, userID := n.tenant(t, admin, "climate-tenant", "climate-tenant-user", "tenantpass")
	tenant := n.identity(t, "climate-tenant-user", "tenantpass", "climate-tenant")
	adminUser, err := admin.ProviderClient.GetAuthResult().(tokens.CreateResult).ExtractUser()
	must(t, err)
	trust, err := trusts.Create(ctx, tenant, trusts.CreateOpts{TrustorUserID: userID, TrusteeUserID: adminUser.ID, ProjectID: project,
		Impersonation: true, Roles: []trusts.Role{{Name: "member"}}}).Extract()
	must(t, err)
	t.Cleanup(func() { _ = trusts.Delete(context.Background(), admin, trust.ID).ExtractErr() })

	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "climate.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ks, err := keystone.New(ctx, keystone.Config{AuthURL: n.ksURL, Username: "admin", Password: "adminpass", Project: "admin"})
	if err != nil {
		t.Fatal(err)
	}
	clients, err := openstack.Connect(ctx, openstack.Auth{URL: n.ksURL, Username: "admin", Password: "adminpass", Project: "admin"})
	if err != nil {
		t.Fatal(err)
	}
	d := openstack.New(openstack.Config{Compute: clients.Compute, Placement: clients.Placement, Store: st, Trusts: keystone.Trusts{Client: ks},
		Backoff: 100 * time.Millisecond})
	now := time.Now().UTC().Truncate(time.Second)
	affinity := true
	l := &climate.Lease{ID: climate.NewID(), Name: "owned", ProjectID: project, UserID: userID, TrustID: trust.ID, Start: now.Add(time.Hour),
		End: now.Add(2 * time.Hour), Status: climate.LeasePending, CreatedAt: now, Reservations: []climate.Reservation{{ID: climate.NewID(),
			ResourceType: openstack.InstanceType, Status: climate.ReservationPending, Amount: 1, Size: climate.Size{VCPUs: 1, MemoryMB: 64},
			Affinity: &affinity, ServerGroupID: climate.NewID(), CreatedAt: now}}}
	if err := st.Update(ctx, func(tx climate.Tx) error { return tx.InsertLease(ctx, l) }); err != nil {
		t.Fatal(err)
	}
	if err := d.Reserve(ctx, l); err != nil {
		t.Fatal(err)
	}
	ids := n.serverGroupIDs(t, l.Reservations[0].ID)
	if len(ids) != 1 {
		t.Fatalf("server groups of the reservation: %v, want one", ids)
	}
	tenantCompute, err := gopheros.NewComputeV2(tenant.ProviderClient, gophercloud.EndpointOpts{})
	must(t, err)
	tenantCompute.Microversion = "2.13" // the group's project_id and user_id
	g, err := servergroups.Get(ctx, tenantCompute, ids[0]).Extract()
	if err != nil {
		t.Fatalf("the owner reading its reservation's server group: %s", openstack.Message(err))
	}
	if g.ProjectID != project || g.UserID != userID {
		t.Fatalf("the server group belongs to project %s, user %s; want the owner's, %s and %s", g.ProjectID, g.UserID, project, userID)
	}
	if err := d.OnEnd(ctx, l); err != nil {
		t.Fatal(err)
	}
	if ids := n.serverGroupIDs(t, l.Reservations[0].ID); len(ids) != 0 {
		t.Fatalf("server groups left after the end: %v", ids)
	}
}

// identity returns an identity client authenticated as user on project (Default domain).
func (n *testNova) identity(t *testing.T, user, password, project string) *gophercloud.ServiceClient {
	t.Helper()
	provider, err := gopheros.AuthenticatedClient(context.Background(), gophercloud.AuthOptions{IdentityEndpoint: n.ksURL, Username: user,
		Password: password, DomainName: "Default", Scope: &gophercloud.AuthScope{ProjectName: project, DomainName: "Default"}})
	if err != nil {
		t.Fatalf("authenticating as %s: %v", user, err)
	}
	c, err := gopheros.NewIdentityV3(provider, gophercloud.EndpointOpts{})
	must(t, err)
	return c
}

// tenant returns the ids of project and of user, a member of it with password, each made
// unless it exists (kept across runs).
func (n *testNova) tenant(t *testing.T, admin *gophercloud.ServiceClient, project, user, password string) (projectID, userID string) {
	t.Helper()
	ctx := context.Background()
	pages, err := projects.List(admin, projects.ListOpts{Name: project}).AllPages(ctx)
	must(t, err)
	ps, err := projects.ExtractProjects(pages)
	must(t, err)
	if len(ps) > 0 {
		projectID = ps[0].ID
	} else {
		p, err := projects.Create(ctx, admin, projects.CreateOpts{Name: project, DomainID: "default"}).Extract()
		must(t, err)
		projectID = p.ID
	}
	upages, err := users.List(admin, users.ListOpts{Name: user}).AllPages(ctx)
	must(t, err)
	us, err := users.ExtractUsers(upages)
	must(t, err)
	if len(us) > 0 {
		userID = us[0].ID
	} else {
		u, err := users.Create(ctx, admin, users.CreateOpts{Name: user, Password: password, DomainID: "default", DefaultProjectID: projectID}).Extract()
		must(t, err)
		userID = u.ID
	}
	rpages, err := roles.List(admin, roles.ListOpts{Name: "member"}).AllPages(ctx)
	must(t, err)
	rs, err := roles.ExtractRoles(rpages)
	must(t, err)
	if len(rs) != 1 {
		t.Fatalf("roles named member: %v", rs)
	}
	must(t, roles.Assign(ctx, admin, rs[0].ID, roles.AssignOpts{UserID: userID, ProjectID: projectID}).ExtractErr())
	return projectID, userID
}
