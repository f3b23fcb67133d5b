package openstack

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/aggregates"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/flavors"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/tokens"

	"climate"
	"climate/sqlite"
)

// realNova connects to the real Nova CI brings up (.ci/nova; CLIMATE_TEST_NOVA is its
// Keystone URL, admin/adminpass), or skips.
func realNova(t *testing.T) *Clients {
	t.Helper()
	u := os.Getenv("CLIMATE_TEST_NOVA")
	if u == "" {
		if os.Getenv("CLIMATE_TEST_NOVA_REQUIRED") == "1" {
			t.Fatal("CLIMATE_TEST_NOVA_REQUIRED=1 but CLIMATE_TEST_NOVA is not set")
		}
		t.Skip("no real Nova: set CLIMATE_TEST_NOVA to the Keystone URL of .ci/nova's (CI does)")
	}
	c, err := Connect(context.Background(), Auth{URL: u, Username: "admin", Password: "adminpass", Project: "admin"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Placement == nil {
		t.Fatal("no placement in the catalog")
	}
	return c
}

// Every action of an instance reservation run twice against the real Nova and Placement
// (as after a takeover) leaves what one run leaves: one flavor, one aggregate, one
// inventory; and after the end nothing: no flavor, aggregate, inventory or resource class.
func TestInstanceActionsTwiceOnRealNova(t *testing.T) {
	c := realNova(t)
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "climate.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	h := &climate.Host{HypervisorHostname: "fake-2", ServiceName: "fake-2", Reservable: true}
	if err := st.Update(ctx, func(tx climate.Tx) error { return tx.InsertHost(ctx, h) }); err != nil {
		t.Fatal(err)
	}
	d := New(Config{Compute: c.Compute, Placement: c.Placement, Store: st, Backoff: 100 * time.Millisecond})
	if _, err := d.freepool(ctx); err != nil {
		t.Skipf("the test Nova has no freepool yet: %v", err)
	}
	project, err := c.Compute.ProviderClient.GetAuthResult().(tokens.CreateResult).ExtractProject()
	if err != nil {
		t.Fatal(err)
	}
	rid := climate.NewID()
	l := &climate.Lease{ID: climate.NewID(), ProjectID: project.ID, Reservations: []climate.Reservation{{
		ID: rid, ResourceType: InstanceType, Amount: 2, Size: climate.Size{VCPUs: 1, MemoryMB: 64},
		Allocations: []climate.Allocation{{ResourceID: h.ID, Slots: 2}}}}}
	rc := resourceClass(rid)
	inventory := func() (total int, found bool) {
		t.Helper()
		p, err := d.reservationProvider(ctx, "fake-2")
		if err != nil {
			t.Fatal(err)
		}
		var inv struct {
			Total int `json:"total"`
		}
		_, err = c.Placement.Get(ctx, c.Placement.ServiceURL("resource_providers", p.UUID, "inventories", rc), &inv, nil)
		if gophercloud.ResponseCodeIs(err, 404) {
			return 0, false
		}
		if err != nil {
			t.Fatal(err)
		}
		return inv.Total, true
	}
	for range 2 {
		if err := d.OnStart(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	if total, ok := inventory(); !ok || total != 2 {
		t.Fatalf("inventory of %s: %v (found %v), want 2", rc, total, ok)
	}
	all, err := d.aggregates(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(slices.DeleteFunc(all, func(a aggregates.Aggregate) bool { return a.Name != rid })); n != 1 {
		t.Fatalf("%d aggregates named %s, want 1", n, rid)
	}
	for range 2 {
		if err := d.OnEnd(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := inventory(); ok {
		t.Fatal("the inventory is left after the end")
	}
	if _, err := flavors.Get(ctx, c.Compute, rid).Extract(); !gophercloud.ResponseCodeIs(err, 404) {
		t.Fatalf("the flavor after the end: %v", err)
	}
	if a, err := d.findAggregate(ctx, rid); err != nil || a != nil {
		t.Fatalf("the aggregate after the end: %+v, %v", a, err)
	}
	_, err = c.Placement.Get(ctx, c.Placement.ServiceURL("resource_classes", rc), nil, nil)
	if !gophercloud.ResponseCodeIs(err, 404) {
		t.Fatalf("the resource class after the end: %v", err)
	}
	if holders, err := d.providers(ctx, url.Values{"resources": {rc + ":1"}}); err == nil {
		t.Fatalf("providers of a deleted class: %v", holders)
	}
}
