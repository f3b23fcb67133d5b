package storetest

import (
	"reflect"
	"strconv"
	"testing"
	"time"

	"climate"
)

func insertHost(t *testing.T, s climate.Store, h *climate.Host) {
	t.Helper()
	update(t, s, func(tx climate.Tx) error { return tx.InsertHost(ctx, h) })
}

// checkHost compares a host the store returned with what was written; a nil and an empty
// Extra are the same.
func checkHost(t *testing.T, got *climate.Host, written climate.Host) {
	t.Helper()
	want := written
	want.CreatedAt, want.UpdatedAt = ts(want.CreatedAt), ts(want.UpdatedAt)
	if len(want.Extra) == 0 {
		want.Extra = nil
	}
	g := *got
	if len(g.Extra) == 0 {
		g.Extra = nil
	}
	if !reflect.DeepEqual(g, want) {
		t.Errorf("host %s:\n got %+v\nwant %+v", written.ID, g, want)
	}
}

func computeHost(name string, created time.Time, extra map[string]string) *climate.Host {
	return &climate.Host{
		HypervisorHostname: name, ServiceName: "svc-" + name, VCPUs: 8, MemoryMB: 16384, LocalGB: 100,
		CPUInfo: `{"arch": "x86_64"}`, HypervisorType: "QEMU", HypervisorVersion: 6002000,
		AvailabilityZone: "nova", TrustID: "trust-" + name, Reservable: true, Extra: extra, CreatedAt: created,
	}
}

func testHosts(t *testing.T, s climate.Store) {
	a := computeHost("a", t0.Add(time.Second), map[string]string{"gpu": "a100", "rack": "r1"})
	b := computeHost("b", t0, nil) // created before a: listed first
	b.Reservable = false
	insertHost(t, s, a)
	insertHost(t, s, b)

	view(t, s, func(tx climate.Tx) error {
		got, err := tx.GetHost(ctx, a.ID)
		if err != nil {
			return err
		}
		checkHost(t, got, *a)
		if got.CreatedAt.Location() != time.UTC {
			t.Errorf("CreatedAt in %v, want UTC", got.CreatedAt.Location())
		}
		hosts, err := tx.ListHosts(ctx)
		if err != nil {
			return err
		}
		if len(hosts) != 2 {
			t.Fatalf("ListHosts: %d hosts, want 2", len(hosts))
		}
		checkHost(t, &hosts[0], *b)
		checkHost(t, &hosts[1], *a)
		_, err = tx.GetHost(ctx, "nope")
		wantCode(t, "GetHost unknown", err, climate.CodeNotFound)
		if msg := climate.ErrorMessage(err); msg != "Object with {'host_id': 'nope'} not found" {
			t.Errorf("GetHost unknown: message %q, want Blazar's", msg)
		}
		return nil
	})

	// UpdateHost rewrites every field and replaces the extras.
	upd := *a
	upd.HypervisorHostname, upd.ServiceName, upd.VCPUs, upd.MemoryMB, upd.LocalGB = "a2", "svc-a2", 16, 32768, 200
	upd.CPUInfo, upd.HypervisorType, upd.HypervisorVersion, upd.AvailabilityZone = "{}", "KVM", 7, "az2"
	upd.TrustID, upd.Reservable, upd.UpdatedAt = "trust-2", false, t0.Add(time.Minute)
	upd.Extra = map[string]string{"gpu": "h100", "zone": "z1"}
	update(t, s, func(tx climate.Tx) error { return tx.UpdateHost(ctx, &upd) })
	view(t, s, func(tx climate.Tx) error {
		got, err := tx.GetHost(ctx, a.ID)
		if err != nil {
			return err
		}
		checkHost(t, got, upd)
		return nil
	})

	err := s.Update(ctx, func(tx climate.Tx) error {
		return tx.UpdateHost(ctx, &climate.Host{ID: "nope", HypervisorHostname: "nope", CreatedAt: t0})
	})
	wantCode(t, "UpdateHost unknown", err, climate.CodeNotFound)
	err = s.Update(ctx, func(tx climate.Tx) error { return tx.DeleteHost(ctx, "nope") })
	wantCode(t, "DeleteHost unknown", err, climate.CodeNotFound)

	update(t, s, func(tx climate.Tx) error { return tx.DeleteHost(ctx, a.ID) })
	view(t, s, func(tx climate.Tx) error {
		_, err := tx.GetHost(ctx, a.ID)
		wantCode(t, "GetHost after delete", err, climate.CodeNotFound)
		hosts, err := tx.ListHosts(ctx)
		if err != nil || len(hosts) != 1 || hosts[0].ID != b.ID {
			t.Errorf("ListHosts after delete: %+v, %v; want only b", hosts, err)
		}
		return nil
	})
}

func testHostIDs(t *testing.T, s climate.Store) {
	var hosts []*climate.Host
	for i, name := range []string{"a", "b"} {
		h := computeHost(name, t0, nil)
		insertHost(t, s, h)
		if want := strconv.Itoa(i + 1); h.ID != want {
			t.Errorf("host %s: assigned id %q, want %q", name, h.ID, want)
		}
		hosts = append(hosts, h)
	}
	explicit := computeHost("c", t0, nil)
	explicit.ID = "compute-c"
	insertHost(t, s, explicit)
	if explicit.ID != "compute-c" {
		t.Errorf("explicit id became %q", explicit.ID)
	}
	// Ids are never reused, even the highest one after it is deleted.
	update(t, s, func(tx climate.Tx) error { return tx.DeleteHost(ctx, hosts[1].ID) })
	d := computeHost("d", t0, nil)
	insertHost(t, s, d)
	if n, err := strconv.Atoi(d.ID); err != nil || n <= 2 {
		t.Errorf("host after deleting %q: id %q, want a number above 2", hosts[1].ID, d.ID)
	}
	view(t, s, func(tx climate.Tx) error {
		for _, h := range []*climate.Host{hosts[0], explicit, d} {
			got, err := tx.GetHost(ctx, h.ID)
			if err != nil {
				return err
			}
			checkHost(t, got, *h)
		}
		return nil
	})
	// The newest auto-assigned id is not reused after its host is deleted either.
	update(t, s, func(tx climate.Tx) error { return tx.DeleteHost(ctx, d.ID) })
	e := computeHost("e", t0, nil)
	insertHost(t, s, e)
	if e.ID == d.ID {
		t.Errorf("host e reused id %q of the deleted newest host", e.ID)
	}
}

func testHostConflicts(t *testing.T, s climate.Store) {
	a := computeHost("compute-1", t0, map[string]string{"gpu": "a100"})
	b := computeHost("compute-2", t0, nil)
	insertHost(t, s, a)
	insertHost(t, s, b)

	err := s.Update(ctx, func(tx climate.Tx) error {
		return tx.InsertHost(ctx, computeHost("compute-1", t0, map[string]string{"new": "x"}))
	})
	wantCode(t, "InsertHost duplicate hostname", err, climate.CodeConflict)
	if msg := climate.ErrorMessage(err); msg != "Host compute-1 already exists" {
		t.Errorf("InsertHost duplicate hostname: message %q", msg)
	}
	dup := computeHost("compute-3", t0, nil)
	dup.ID = b.ID
	err = s.Update(ctx, func(tx climate.Tx) error { return tx.InsertHost(ctx, dup) })
	wantCode(t, "InsertHost duplicate id", err, climate.CodeConflict)
	renamed := *b
	renamed.HypervisorHostname = "compute-1"
	err = s.Update(ctx, func(tx climate.Tx) error { return tx.UpdateHost(ctx, &renamed) })
	wantCode(t, "UpdateHost to a taken hostname", err, climate.CodeConflict)

	view(t, s, func(tx climate.Tx) error {
		hosts, err := tx.ListHosts(ctx)
		if err != nil || len(hosts) != 2 {
			t.Fatalf("ListHosts after conflicts: %+v, %v; want 2 hosts", hosts, err)
		}
		checkHost(t, &hosts[0], *a)
		checkHost(t, &hosts[1], *b)
		props, err := tx.ListResourceProperties(ctx, climate.ResourceTypeHost)
		if err != nil || len(props) != 1 || props[0].Name != "gpu" {
			t.Errorf("properties after conflicts: %+v, %v; want only gpu", props, err)
		}
		return nil
	})
}

func testResourceProperties(t *testing.T, s climate.Store) {
	a := computeHost("a", t0, map[string]string{"gpu": "a100", "rack": "r1"})
	b := computeHost("b", t0, map[string]string{"gpu": "h100"})
	insertHost(t, s, a)
	insertHost(t, s, b)
	list := func() []climate.ResourceProperty {
		t.Helper()
		var props []climate.ResourceProperty
		view(t, s, func(tx climate.Tx) (err error) {
			props, err = tx.ListResourceProperties(ctx, climate.ResourceTypeHost)
			return err
		})
		return props
	}
	names := func(props []climate.ResourceProperty) []string {
		out := []string{}
		for _, p := range props {
			out = append(out, p.Name)
		}
		return out
	}
	props := list()
	if got := names(props); !reflect.DeepEqual(got, []string{"gpu", "rack"}) {
		t.Fatalf("properties: %v, want [gpu rack]", got)
	}
	for _, p := range props {
		if p.ID == "" || p.ResourceType != climate.ResourceTypeHost || p.Private {
			t.Errorf("implicit property %+v: want an id, type %s, public", p, climate.ResourceTypeHost)
		}
	}
	if props[0].ID == props[1].ID {
		t.Errorf("properties share id %q", props[0].ID)
	}

	b.Extra = map[string]string{"zone": "z1"}
	update(t, s, func(tx climate.Tx) error { return tx.UpdateHost(ctx, b) })
	if got := names(list()); !reflect.DeepEqual(got, []string{"gpu", "rack", "zone"}) {
		t.Errorf("properties after UpdateHost: %v, want [gpu rack zone]", got)
	}

	later := t0.Add(time.Hour)
	p := &climate.ResourceProperty{ResourceType: climate.ResourceTypeHost, Name: "gpu", Private: true, UpdatedAt: later}
	update(t, s, func(tx climate.Tx) error { return tx.UpdateResourceProperty(ctx, p) })
	props = list()
	if len(props) != 3 || !props[0].Private || !props[0].UpdatedAt.Equal(ts(later)) {
		t.Errorf("gpu after UpdateResourceProperty: %+v; want private, updated at %v", props[0], later)
	}
	if props[1].Private || props[2].Private {
		t.Errorf("other properties changed: %+v", props[1:])
	}
	p.Private = false
	update(t, s, func(tx climate.Tx) error { return tx.UpdateResourceProperty(ctx, p) })
	if props = list(); props[0].Private {
		t.Errorf("gpu after making it public again: %+v", props[0])
	}

	err := s.Update(ctx, func(tx climate.Tx) error {
		return tx.UpdateResourceProperty(ctx, &climate.ResourceProperty{ResourceType: climate.ResourceTypeHost, Name: "nope", Private: true})
	})
	wantCode(t, "UpdateResourceProperty unknown", err, climate.CodeNotFound)
	if msg := climate.ErrorMessage(err); msg != "Resource property nope not found" {
		t.Errorf("UpdateResourceProperty unknown: message %q", msg)
	}
	view(t, s, func(tx climate.Tx) error {
		other, err := tx.ListResourceProperties(ctx, "virtual:floatingip")
		if err != nil || len(other) != 0 {
			t.Errorf("properties of another resource type: %+v, %v; want none", other, err)
		}
		got, err := tx.GetHost(ctx, a.ID)
		if err != nil {
			return err
		}
		checkHost(t, got, *a)
		return nil
	})
}

func testInventoryRevision(t *testing.T, s climate.Store) {
	var last int64
	step := func(what string, grows bool, write func(climate.Tx) error) {
		t.Helper()
		update(t, s, write)
		var rev int64
		view(t, s, func(tx climate.Tx) (err error) { rev, err = tx.InventoryRevision(ctx); return err })
		if grows && rev <= last {
			t.Errorf("after %s: revision %d, want above %d", what, rev, last)
		}
		if !grows && rev != last {
			t.Errorf("after %s: revision %d, want unchanged %d", what, rev, last)
		}
		last = rev
	}
	step("nothing", false, func(tx climate.Tx) (err error) { last, err = tx.InventoryRevision(ctx); return err })
	h := computeHost("a", t0, map[string]string{"gpu": "a100"})
	step("InsertHost", true, func(tx climate.Tx) error { return tx.InsertHost(ctx, h) })
	step("UpdateHost", true, func(tx climate.Tx) error {
		h.Extra = map[string]string{"gpu": "h100"}
		return tx.UpdateHost(ctx, h)
	})
	step("UpdateResourceProperty", true, func(tx climate.Tx) error {
		return tx.UpdateResourceProperty(ctx, &climate.ResourceProperty{ResourceType: climate.ResourceTypeHost, Name: "gpu", Private: true})
	})
	l := newLease("l1", "p1", now, now.Add(time.Hour), h.ID)
	step("InsertLease", false, func(tx climate.Tx) error { return tx.InsertLease(ctx, l) })
	step("UpdateLease", false, func(tx climate.Tx) error {
		l.Name = "renamed"
		return tx.UpdateLease(ctx, l)
	})
	step("ClaimDueEvents", false, func(tx climate.Tx) error {
		_, err := tx.ClaimDueEvents(ctx, "run-1", now, now.Add(time.Minute), 10)
		return err
	})
	step("DeleteLease", false, func(tx climate.Tx) error { return tx.DeleteLease(ctx, "l1") })
	step("SetHostPower", false, func(tx climate.Tx) error {
		return tx.SetHostPower(ctx, &climate.HostPower{HostID: h.ID, State: climate.PowerOff, ChangedAt: now})
	})
	step("DeleteHost", true, func(tx climate.Tx) error { return tx.DeleteHost(ctx, h.ID) })
}

func testAllocationRevision(t *testing.T, s climate.Store) {
	var last int64
	step := func(what string, grows bool, write func(climate.Tx) error) {
		t.Helper()
		update(t, s, write)
		var rev int64
		view(t, s, func(tx climate.Tx) (err error) { rev, err = tx.AllocationRevision(ctx); return err })
		if grows && rev <= last {
			t.Errorf("after %s: allocation revision %d, want above %d", what, rev, last)
		}
		if !grows && rev != last {
			t.Errorf("after %s: allocation revision %d, want unchanged %d", what, rev, last)
		}
		last = rev
	}
	step("nothing", false, func(tx climate.Tx) (err error) { last, err = tx.AllocationRevision(ctx); return err })
	h := computeHost("a", t0, nil)
	step("InsertHost", false, func(tx climate.Tx) error { return tx.InsertHost(ctx, h) })
	l := newLease("l1", "p1", now, now.Add(time.Hour), h.ID)
	step("InsertLease", true, func(tx climate.Tx) error { return tx.InsertLease(ctx, l) })
	step("UpdateLease without allocation change", false, func(tx climate.Tx) error {
		l.Name, l.Status = "renamed", climate.LeaseActive
		return tx.UpdateLease(ctx, l)
	})
	step("ClaimDueEvents", false, func(tx climate.Tx) error {
		_, err := tx.ClaimDueEvents(ctx, "run-1", now, now.Add(time.Minute), 10)
		return err
	})
	step("UpdateLease moving the window", true, func(tx climate.Tx) error {
		l.End = l.End.Add(time.Hour)
		for i := range l.Reservations {
			for j := range l.Reservations[i].Allocations {
				l.Reservations[i].Allocations[j].End = l.End
			}
		}
		return tx.UpdateLease(ctx, l)
	})
	step("DeleteLease", true, func(tx climate.Tx) error { return tx.DeleteLease(ctx, "l1") })
}

// testHostPower: a host's power state is read with the host, written only by SetHostPower
// (UpdateHost keeps it), and goes with the host.
func testHostPower(t *testing.T, s climate.Store) {
	a := computeHost("a", t0, nil)
	b := computeHost("b", t0.Add(time.Second), nil)
	insertHost(t, s, a)
	insertHost(t, s, b)
	hostPower := func(id string) *climate.HostPower {
		t.Helper()
		var p *climate.HostPower
		view(t, s, func(tx climate.Tx) error {
			h, err := tx.GetHost(ctx, id)
			if err != nil {
				return err
			}
			p = h.Power
			hosts, err := tx.ListHosts(ctx)
			if err != nil {
				return err
			}
			for _, lh := range hosts {
				if lh.ID == id && !reflect.DeepEqual(lh.Power, p) {
					t.Errorf("host %s: ListHosts power %+v, GetHost %+v", id, lh.Power, p)
				}
			}
			return nil
		})
		return p
	}
	if p := hostPower(a.ID); p != nil {
		t.Fatalf("new host: power %+v, want none recorded", p)
	}

	off := climate.HostPower{HostID: a.ID, State: climate.PowerOff, ChangedAt: t0, OffBefore: 90*time.Minute + 1500*time.Microsecond}
	update(t, s, func(tx climate.Tx) error { return tx.SetHostPower(ctx, &off) })
	want := off
	want.ChangedAt = ts(t0)
	if got := hostPower(a.ID); got == nil || *got != want {
		t.Errorf("after SetHostPower: %+v, want %+v", got, want)
	}
	if got := hostPower(b.ID); got != nil {
		t.Errorf("host b: power %+v, want none (only a was set)", got)
	}

	// Rewritten, not added; UpdateHost leaves it.
	on := want.Next(climate.PowerSwitchingOn, now)
	update(t, s, func(tx climate.Tx) error { return tx.SetHostPower(ctx, &on) })
	upd := *a
	upd.VCPUs, upd.UpdatedAt = 64, t0.Add(time.Minute)
	update(t, s, func(tx climate.Tx) error { return tx.UpdateHost(ctx, &upd) })
	if got := hostPower(a.ID); got == nil || *got != on {
		t.Errorf("after a second SetHostPower and UpdateHost: %+v, want %+v", got, on)
	}

	err := s.Update(ctx, func(tx climate.Tx) error {
		return tx.SetHostPower(ctx, &climate.HostPower{HostID: "nope", State: climate.PowerOn, ChangedAt: now})
	})
	wantCode(t, "SetHostPower unknown host", err, climate.CodeNotFound)
	update(t, s, func(tx climate.Tx) error { return tx.DeleteHost(ctx, a.ID) })
	err = s.Update(ctx, func(tx climate.Tx) error {
		return tx.SetHostPower(ctx, &climate.HostPower{HostID: a.ID, State: climate.PowerOn, ChangedAt: now})
	})
	wantCode(t, "SetHostPower deleted host", err, climate.CodeNotFound)
	err = s.View(ctx, func(tx climate.Tx) error {
		return tx.SetHostPower(ctx, &climate.HostPower{HostID: b.ID, State: climate.PowerOn, ChangedAt: now})
	})
	if err == nil {
		t.Error("SetHostPower in a View succeeded")
	}
}
