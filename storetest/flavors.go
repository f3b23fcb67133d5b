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

func flavorIDs(fs []climate.Flavor) []string {
	out := []string{}
	for _, f := range fs {
		out = append(out, f.ID)
	}
	return out
}

func getFlavor(t *testing.T, s climate.Store, id string) *climate.Flavor {
	t.Helper()
	var f *climate.Flavor
	view(t, s, func(tx climate.Tx) (err error) {
		f, err = tx.GetFlavor(ctx, id)
		return err
	})
	return f
}

func checkFlavor(t *testing.T, what string, got *climate.Flavor, written climate.Flavor) {
	t.Helper()
	if got == nil {
		t.Fatalf("%s: got nil", what)
	}
	want := written
	want.CreatedAt, want.UpdatedAt = ts(want.CreatedAt), ts(want.UpdatedAt)
	if len(want.ExtraSpecs) == 0 {
		want.ExtraSpecs = nil // none comes back nil, whether written nil or empty
	}
	if !reflect.DeepEqual(*got, want) {
		t.Errorf("%s:\n got %+v\nwant %+v", what, *got, want)
	}
	for _, tm := range []time.Time{got.CreatedAt, got.UpdatedAt} {
		if !tm.IsZero() && tm.Location() != time.UTC {
			t.Errorf("%s: time %v is not UTC", what, tm)
		}
	}
}

// testFlavors: flavors round-trip every field (extra specs included; none, nil or empty,
// comes back nil), list in creation order (then id), refuse a taken id and a taken name
// naming which (and the transaction stays usable), report unknown ids as not found, free
// their id and name when deleted, vanish with a rolled-back transaction, and are refused
// in a read transaction.
func testFlavors(t *testing.T, s climate.Store) {
	full := climate.Flavor{ID: "fl-b", Name: "m1.large", VCPUs: 4, RAM: 8192, Disk: 80, Ephemeral: 10,
		ExtraSpecs: map[string]string{"trait:HW_CPU_X86_AVX2": "required", "resources:VGPU": "1", "hw:cpu_policy": "dedicated",
			"quota:note": `"quoted" {json} é`},
		CreatedAt: t0, UpdatedAt: t0.Add(time.Second)}
	// Same created_at as fl-b: the id breaks the tie. No extra specs (empty), never updated.
	sameTime := climate.Flavor{ID: "fl-a", Name: "m1.small", VCPUs: 1, RAM: 2048, Disk: 20, ExtraSpecs: map[string]string{}, CreatedAt: t0}
	// Created earlier, inserted later; no disk at all (a volume-backed flavor).
	earlier := climate.Flavor{ID: "fl-z", Name: "m1.tiny", VCPUs: 1, RAM: 512, CreatedAt: t0.Add(-time.Hour)}
	update(t, s, func(tx climate.Tx) error {
		for _, f := range []climate.Flavor{full, sameTime, earlier} {
			if err := tx.InsertFlavor(ctx, &f); err != nil {
				return fmt.Errorf("InsertFlavor %s: %w", f.ID, err)
			}
		}
		return nil
	})
	checkFlavor(t, "GetFlavor fl-b", getFlavor(t, s, "fl-b"), full)
	checkFlavor(t, "GetFlavor fl-a", getFlavor(t, s, "fl-a"), sameTime)
	checkFlavor(t, "GetFlavor fl-z", getFlavor(t, s, "fl-z"), earlier)

	view(t, s, func(tx climate.Tx) error {
		fs, err := tx.ListFlavors(ctx)
		if err != nil {
			return err
		}
		if got, want := flavorIDs(fs), []string{"fl-z", "fl-a", "fl-b"}; !reflect.DeepEqual(got, want) {
			t.Errorf("ListFlavors = %v, want %v", got, want)
		}
		if len(fs) == 3 {
			checkFlavor(t, "ListFlavors[2]", &fs[2], full)
		}
		return nil
	})

	// A taken id (under a free name), then a taken name (under a free id): each a conflict
	// naming what is taken, and the transaction stays usable (the next write is kept).
	err := s.Update(ctx, func(tx climate.Tx) error {
		dup := full
		dup.Name = "m1.other"
		err := tx.InsertFlavor(ctx, &dup)
		wantCode(t, "InsertFlavor with a taken id", err, climate.CodeConflict)
		if err == nil || !strings.Contains(err.Error(), "ID fl-b") {
			t.Errorf("taken id: %v, want a message naming the id", err)
		}
		dup = climate.Flavor{ID: "fl-new", Name: "m1.small", VCPUs: 2, RAM: 1024, CreatedAt: t0}
		err = tx.InsertFlavor(ctx, &dup)
		wantCode(t, "InsertFlavor with a taken name", err, climate.CodeConflict)
		if err == nil || !strings.Contains(err.Error(), "name m1.small") {
			t.Errorf("taken name: %v, want a message naming the name", err)
		}
		ok := climate.Flavor{ID: "fl-c", Name: "m1.medium", VCPUs: 2, RAM: 4096, Disk: 40, CreatedAt: t0.Add(time.Hour)}
		return tx.InsertFlavor(ctx, &ok)
	})
	if err != nil {
		t.Fatalf("insert after refused duplicates: %v", err)
	}
	getFlavor(t, s, "fl-c")
	// Names and ids are compared exactly: another case is another flavor.
	update(t, s, func(tx climate.Tx) error {
		f := climate.Flavor{ID: "FL-B", Name: "M1.LARGE", VCPUs: 1, RAM: 1, CreatedAt: t0.Add(2 * time.Hour)}
		return tx.InsertFlavor(ctx, &f)
	})

	// Unknown ids.
	view(t, s, func(tx climate.Tx) error {
		_, err := tx.GetFlavor(ctx, "nope")
		wantCode(t, "GetFlavor unknown", err, climate.CodeNotFound)
		if err == nil || !strings.Contains(err.Error(), "{'flavor_id': 'nope'}") {
			t.Errorf("GetFlavor unknown: %v, want Blazar's not found text", err)
		}
		return nil
	})
	err = s.Update(ctx, func(tx climate.Tx) error { return tx.DeleteFlavor(ctx, "nope") })
	wantCode(t, "DeleteFlavor unknown", err, climate.CodeNotFound)

	// Delete, then the id and the name are free again.
	update(t, s, func(tx climate.Tx) error { return tx.DeleteFlavor(ctx, "fl-b") })
	view(t, s, func(tx climate.Tx) error {
		_, err := tx.GetFlavor(ctx, "fl-b")
		wantCode(t, "GetFlavor deleted", err, climate.CodeNotFound)
		return nil
	})
	again := full
	again.CreatedAt, again.UpdatedAt, again.ExtraSpecs = t0.Add(3*time.Hour), time.Time{}, nil
	update(t, s, func(tx climate.Tx) error { a := again; return tx.InsertFlavor(ctx, &a) })
	checkFlavor(t, "re-registered flavor", getFlavor(t, s, "fl-b"), again)

	// A rolled-back insert leaves nothing.
	boom := errors.New("boom")
	err = s.Update(ctx, func(tx climate.Tx) error {
		f := climate.Flavor{ID: "fl-rb", Name: "rolled-back", VCPUs: 1, RAM: 1, CreatedAt: t0}
		if err := tx.InsertFlavor(ctx, &f); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Update: %v, want boom", err)
	}
	view(t, s, func(tx climate.Tx) error {
		_, err := tx.GetFlavor(ctx, "fl-rb")
		wantCode(t, "GetFlavor rolled back", err, climate.CodeNotFound)
		return nil
	})
	// Writes in a read transaction are refused.
	err = s.View(ctx, func(tx climate.Tx) error {
		f := climate.Flavor{ID: "fl-ro", Name: "read-only", VCPUs: 1, RAM: 1, CreatedAt: t0}
		return tx.InsertFlavor(ctx, &f)
	})
	if err == nil {
		t.Errorf("InsertFlavor in View: no error")
	}
	err = s.View(ctx, func(tx climate.Tx) error { return tx.DeleteFlavor(ctx, "fl-a") })
	if err == nil {
		t.Errorf("DeleteFlavor in View: no error")
	}
	getFlavor(t, s, "fl-a")
}

// testFlavorsNotInventory: a reservation copies its flavor's sizes, so flavors are not
// inventory: inserting and deleting one leaves InventoryRevision (and a planner's cached
// view) alone.
func testFlavorsNotInventory(t *testing.T, s climate.Store) {
	revision := func() (rev int64) {
		t.Helper()
		view(t, s, func(tx climate.Tx) (err error) { rev, err = tx.InventoryRevision(ctx); return err })
		return rev
	}
	before := revision()
	f := climate.Flavor{ID: "fl-1", Name: "m1.small", VCPUs: 1, RAM: 2048, Disk: 20, CreatedAt: t0}
	update(t, s, func(tx climate.Tx) error { g := f; return tx.InsertFlavor(ctx, &g) })
	if rev := revision(); rev != before {
		t.Errorf("after InsertFlavor: inventory revision %d, want %d", rev, before)
	}
	update(t, s, func(tx climate.Tx) error { return tx.DeleteFlavor(ctx, f.ID) })
	if rev := revision(); rev != before {
		t.Errorf("after DeleteFlavor: inventory revision %d, want %d", rev, before)
	}
}
