package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"climate"
)

func floatingIPIDs(fs []climate.FloatingIP) []string {
	out := []string{}
	for _, f := range fs {
		out = append(out, f.ID)
	}
	return out
}

func getFloatingIP(t *testing.T, s climate.Store, id string) *climate.FloatingIP {
	t.Helper()
	var f *climate.FloatingIP
	view(t, s, func(tx climate.Tx) (err error) {
		f, err = tx.GetFloatingIP(ctx, id)
		return err
	})
	return f
}

func checkFloatingIP(t *testing.T, what string, got *climate.FloatingIP, written climate.FloatingIP) {
	t.Helper()
	if got == nil {
		t.Fatalf("%s: got nil", what)
	}
	want := written
	want.CreatedAt, want.UpdatedAt = ts(want.CreatedAt), ts(want.UpdatedAt)
	if !reflect.DeepEqual(*got, want) {
		t.Errorf("%s:\n got %+v\nwant %+v", what, *got, want)
	}
	for _, tm := range []time.Time{got.CreatedAt, got.UpdatedAt} {
		if !tm.IsZero() && tm.Location() != time.UTC {
			t.Errorf("%s: time %v is not UTC", what, tm)
		}
	}
}

// testFloatingIPs: floating IPs round-trip every field, list in creation order (then id),
// refuse a taken id and an address already registered on the same network (the same
// address on another network is another IP), report unknown ids as not found, and vanish
// with a rolled-back transaction.
func testFloatingIPs(t *testing.T, s climate.Store) {
	full := climate.FloatingIP{ID: "f-b", FloatingNetworkID: "net-1", SubnetID: "sub-1", Address: "172.24.4.101",
		Reservable: true, CreatedAt: t0, UpdatedAt: t0.Add(time.Second)}
	// Same created_at as f-b: the id breaks the tie. No subnet, never updated, not reservable.
	sameTime := climate.FloatingIP{ID: "f-a", FloatingNetworkID: "net-1", Address: "2001:db8::1", CreatedAt: t0}
	// The same address as f-b on another network; created earlier, inserted later.
	otherNet := climate.FloatingIP{ID: "f-z", FloatingNetworkID: "net-2", Address: "172.24.4.101", Reservable: true,
		CreatedAt: t0.Add(-time.Hour)}
	update(t, s, func(tx climate.Tx) error {
		for _, f := range []climate.FloatingIP{full, sameTime, otherNet} {
			if err := tx.InsertFloatingIP(ctx, &f); err != nil {
				return fmt.Errorf("InsertFloatingIP %s: %w", f.ID, err)
			}
		}
		return nil
	})
	checkFloatingIP(t, "GetFloatingIP f-b", getFloatingIP(t, s, "f-b"), full)
	checkFloatingIP(t, "GetFloatingIP f-a", getFloatingIP(t, s, "f-a"), sameTime)
	checkFloatingIP(t, "GetFloatingIP f-z", getFloatingIP(t, s, "f-z"), otherNet)

	view(t, s, func(tx climate.Tx) error {
		fs, err := tx.ListFloatingIPs(ctx)
		if err != nil {
			return err
		}
		if got, want := floatingIPIDs(fs), []string{"f-z", "f-a", "f-b"}; !reflect.DeepEqual(got, want) {
			t.Errorf("ListFloatingIPs = %v, want %v", got, want)
		}
		if len(fs) == 3 {
			checkFloatingIP(t, "ListFloatingIPs[2]", &fs[2], full)
		}
		return nil
	})

	// A taken id.
	err := s.Update(ctx, func(tx climate.Tx) error {
		dup := full
		dup.Address = "172.24.4.200"
		return tx.InsertFloatingIP(ctx, &dup)
	})
	wantCode(t, "InsertFloatingIP with a taken id", err, climate.CodeConflict)
	// A taken address on the same network: a conflict that names the address and network,
	// and the transaction stays usable (the next write in it is kept).
	err = s.Update(ctx, func(tx climate.Tx) error {
		dup := climate.FloatingIP{ID: "f-dup", FloatingNetworkID: "net-1", Address: "172.24.4.101", CreatedAt: t0}
		err := tx.InsertFloatingIP(ctx, &dup)
		wantCode(t, "InsertFloatingIP with a taken address", err, climate.CodeConflict)
		if err == nil || !strings.Contains(err.Error(), "172.24.4.101") || !strings.Contains(err.Error(), "net-1") {
			t.Errorf("duplicate address: %v, want a message naming the address and network", err)
		}
		ok := climate.FloatingIP{ID: "f-c", FloatingNetworkID: "net-1", Address: "172.24.4.102", CreatedAt: t0.Add(time.Hour)}
		return tx.InsertFloatingIP(ctx, &ok)
	})
	if err != nil {
		t.Fatalf("insert after a refused duplicate: %v", err)
	}
	getFloatingIP(t, s, "f-c")

	// Unknown ids.
	view(t, s, func(tx climate.Tx) error {
		_, err := tx.GetFloatingIP(ctx, "nope")
		wantCode(t, "GetFloatingIP unknown", err, climate.CodeNotFound)
		return nil
	})
	err = s.Update(ctx, func(tx climate.Tx) error { return tx.DeleteFloatingIP(ctx, "nope") })
	wantCode(t, "DeleteFloatingIP unknown", err, climate.CodeNotFound)

	// Delete, then the address is free again on its network.
	update(t, s, func(tx climate.Tx) error { return tx.DeleteFloatingIP(ctx, "f-b") })
	view(t, s, func(tx climate.Tx) error {
		_, err := tx.GetFloatingIP(ctx, "f-b")
		wantCode(t, "GetFloatingIP deleted", err, climate.CodeNotFound)
		return nil
	})
	again := climate.FloatingIP{ID: "f-b2", FloatingNetworkID: "net-1", Address: "172.24.4.101", Reservable: true, CreatedAt: t0}
	update(t, s, func(tx climate.Tx) error { a := again; return tx.InsertFloatingIP(ctx, &a) })
	checkFloatingIP(t, "re-registered address", getFloatingIP(t, s, "f-b2"), again)

	// A rolled-back insert leaves nothing.
	boom := errors.New("boom")
	err = s.Update(ctx, func(tx climate.Tx) error {
		f := climate.FloatingIP{ID: "f-rb", FloatingNetworkID: "net-3", Address: "10.0.0.1", CreatedAt: t0}
		if err := tx.InsertFloatingIP(ctx, &f); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Update: %v, want boom", err)
	}
	view(t, s, func(tx climate.Tx) error {
		_, err := tx.GetFloatingIP(ctx, "f-rb")
		wantCode(t, "GetFloatingIP rolled back", err, climate.CodeNotFound)
		return nil
	})
	// Writes in a read transaction are refused.
	err = s.View(ctx, func(tx climate.Tx) error {
		f := climate.FloatingIP{ID: "f-ro", FloatingNetworkID: "net-3", Address: "10.0.0.2", CreatedAt: t0}
		return tx.InsertFloatingIP(ctx, &f)
	})
	if err == nil {
		t.Errorf("InsertFloatingIP in View: no error")
	}
}

// testFloatingIPInventoryRevision: floating IPs are inventory, so inserting and deleting
// one moves InventoryRevision as a host does, and a planner's cached view notices.
func testFloatingIPInventoryRevision(t *testing.T, s climate.Store) {
	var last int64
	view(t, s, func(tx climate.Tx) (err error) { last, err = tx.InventoryRevision(ctx); return err })
	step := func(what string, write func(climate.Tx) error) {
		t.Helper()
		update(t, s, write)
		var rev int64
		view(t, s, func(tx climate.Tx) (err error) { rev, err = tx.InventoryRevision(ctx); return err })
		if rev <= last {
			t.Errorf("after %s: inventory revision %d, want above %d", what, rev, last)
		}
		last = rev
	}
	f := climate.FloatingIP{ID: "f-1", FloatingNetworkID: "net-1", Address: "172.24.4.1", Reservable: true, CreatedAt: t0}
	step("InsertFloatingIP", func(tx climate.Tx) error { g := f; return tx.InsertFloatingIP(ctx, &g) })
	step("DeleteFloatingIP", func(tx climate.Tx) error { return tx.DeleteFloatingIP(ctx, f.ID) })
}
