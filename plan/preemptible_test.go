package plan_test

import (
	"testing"
	"time"

	"climate"
	"climate/plan"
)

// A preemptible request holds each host until the window's end or the host's next
// booking less the cleaning time, takes no host held at its start or free for less than
// the minimum run, and, with idleFirst, takes hosts reserved later before free ones.
func TestPlacePreemptible(t *testing.T) {
	const clean = 15 * time.Minute
	hosts := []climate.Host{{ID: "free", Reservable: true}, {ID: "reserved", Reservable: true}, {ID: "soon", Reservable: true}, {ID: "busy", Reservable: true}}
	x := plan.NewIndex(hosts, []climate.Allocation{
		{LeaseID: "r", ResourceID: "reserved", Start: at(14, 0), End: at(16, 0)},
		{LeaseID: "s", ResourceID: "soon", Start: at(10, 20), End: at(16, 0)},
		{LeaseID: "b", ResourceID: "busy", Start: at(9, 0), End: at(10, 5)}, // with its cleaning, until 10:20
	}, plan.WithCleaning(clean))
	req := plan.HostRequest{Window: plan.Window{Start: at(10, 0), End: at(20, 0)}, Min: 1, Max: 4}
	runs, _, err := x.PlacePreemptible(req, 10*time.Minute, false)
	if err != nil {
		t.Fatal(err)
	}
	want := []plan.Run{{ID: "free", End: at(20, 0)}, {ID: "reserved", End: at(13, 45)}}
	if len(runs) != 2 || runs[0] != want[0] || runs[1] != want[1] {
		t.Errorf("runs %v; want %v (soon is free 5 minutes, less than the notice; busy is held at the start)", runs, want)
	}
	req.Max = 1
	if runs, _, _ := x.PlacePreemptible(req, 10*time.Minute, true); len(runs) != 1 || runs[0].ID != "reserved" {
		t.Errorf("idleFirst: %v; want the host reserved later", runs)
	}
	if runs, _, _ := x.PlacePreemptible(req, 10*time.Minute, false); len(runs) != 1 || runs[0].ID != "free" {
		t.Errorf("longest first: %v; want the free host", runs)
	}
	req.Min = 3
	if _, _, err := x.PlacePreemptible(req, 10*time.Minute, false); climate.ErrorCode(err) != climate.CodeConflict {
		t.Errorf("3 hosts: %v; want a 409", err)
	}
}

// A preemptible hold is free to a request that starts at or after ReclaimFrom and after
// the hold's start plus the cleaning time; to any other request it is busy. A host that
// needs no taking back is chosen first.
func TestReclaimPreemptibleHolds(t *testing.T) {
	const clean = 10 * time.Minute
	hosts := []climate.Host{{ID: "h", Reservable: true}, {ID: "g", Reservable: true}}
	x := plan.NewIndex(hosts, []climate.Allocation{
		{LeaseID: "p", ResourceID: "h", Start: at(10, 0), End: at(20, 0), Preemptible: true},
		{LeaseID: "q", ResourceID: "g", Start: at(10, 0), End: at(20, 0)},
	}, plan.WithCleaning(clean))
	place := func(s, e, reclaim time.Time) ([]string, error) {
		ids, _, err := x.PlaceHosts(plan.HostRequest{Window: plan.Window{Start: s, End: e}, Min: 1, Max: 1, ReclaimFrom: reclaim})
		return ids, err
	}
	for _, c := range []struct {
		name       string
		s, reclaim time.Time
		ok         bool
	}{
		{"no reclaim", at(12, 0), time.Time{}, false},
		{"starts before the horizon", at(12, 0), at(12, 30), false},
		{"starts at the horizon", at(12, 30), at(12, 30), true},
		{"within the cleaning time of the hold's start", at(10, 5), at(10, 0), false},
		{"just after it", at(10, 10), at(10, 0), false}, // the hold would keep nothing: [10:00, 10:00)
		{"later", at(10, 11), at(10, 0), true},
	} {
		ids, err := place(c.s, c.s.Add(time.Hour), c.reclaim)
		if (err == nil) != c.ok || (c.ok && ids[0] != "h") {
			t.Errorf("%s: %v, %v; want ok %v", c.name, ids, err, c.ok)
		}
	}
	// With a host simply free as well, that one goes first.
	y := plan.NewIndex(append(hosts, climate.Host{ID: "z", Reservable: true}), []climate.Allocation{
		{LeaseID: "p", ResourceID: "h", Start: at(10, 0), End: at(20, 0), Preemptible: true},
	})
	if ids, _, err := y.PlaceHosts(plan.HostRequest{Window: plan.Window{Start: at(12, 0), End: at(13, 0)}, Min: 2, Max: 2, ReclaimFrom: at(11, 0)}); err != nil || ids[0] == "h" || ids[1] == "h" {
		t.Errorf("two of three hosts, one held preemptibly: %v, %v; want the two free ones", ids, err)
	}
}
