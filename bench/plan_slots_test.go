package bench

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"climate"
	"climate/sqlite"
	"climate/workload"
)

// bruteRooms returns, per host of the instance book, how many slots of size fit over w
// beside the book's holds at every hour (0 when held whole at some hour).
func bruteRooms(b *workload.Book, w workload.Window, size climate.Size) []int {
	s, e := int(w.Start.Sub(workload.T0)/time.Hour), int(w.End.Sub(workload.T0)/time.Hour)
	var allocs []climate.Allocation
	for _, l := range b.Leases {
		for _, r := range l.Reservations {
			allocs = append(allocs, r.Allocations...)
		}
	}
	out := make([]int, len(b.Hosts))
	for i, h := range b.Hosts {
		room := 1 << 30
		for t := s; t < e; t++ {
			at, next := workload.T0.Add(time.Duration(t)*time.Hour), workload.T0.Add(time.Duration(t+1)*time.Hour)
			var load climate.Size
			whole := false
			for _, a := range allocs {
				if a.ResourceID == h.ID && climate.Overlaps(a.Start, a.End, at, next) {
					whole = whole || !a.Shared()
					load = load.Plus(a.Size.Times(a.Slots))
				}
			}
			n := 0
			for !whole && size.Times(n+1).Plus(load).Within(h.Capacity()) {
				n++
			}
			room = min(room, n)
		}
		out[i] = room
	}
	return out
}

// bench plan's instance and floating-IP cases: the books generated as the workload says,
// and as many refusals per kind as a brute-force count of room predicts.
func TestBenchPlanInstanceAndFloatingIPCases(t *testing.T) {
	stdout := runPlan(t, PlanOptions{Types: "instance,floatingip", Scales: "40:400", FloatingIPs: "300:2000", Windows: 30, Output: "json"})
	var raw map[string]any
	if err := json.Unmarshal([]byte(stdout), &raw); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, stdout)
	}
	for _, k := range []string{"instances", "floating_ips"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("missing %q", k)
		}
	}
	var rep planReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Scales) != 0 || len(rep.Instances) != 1 || len(rep.FloatingIPs) != 1 {
		t.Fatalf("%d host scales, %d instance scales, %d floating-IP cases; want 0, 1, 1", len(rep.Scales), len(rep.Instances), len(rep.FloatingIPs))
	}
	in := rep.Instances[0]
	book := workload.GenerateInstances(40, 400)
	slots, wholes := 0, 0
	for _, l := range book.Leases {
		for _, a := range l.Reservations[0].Allocations {
			if a.Shared() {
				slots++
			} else {
				wholes++
			}
		}
	}
	if in.Hosts != 40 || in.InstanceLeases != 400 || in.Leases != len(book.Leases) || in.SlotAllocations != slots || in.HostAllocations != wholes {
		t.Errorf("instance book %+v; want %d leases, %d slot and %d host allocations", in, len(book.Leases), slots, wholes)
	}
	if in.VCPUBookedPct <= 5 || in.VCPUBookedPct >= 95 {
		t.Errorf("%v%% of the vCPU-hours booked", in.VCPUBookedPct)
	}
	kinds := []string{"mixed", "none", "affinity", "anti-affinity"}
	if len(in.Requests) != len(kinds) {
		t.Fatalf("requests %+v", in.Requests)
	}
	reqs := workload.InstanceRequests(30)
	for k, r := range in.Requests {
		if r.Kind != kinds[k] || r.MedianUS <= 0 || r.P99US < r.MedianUS {
			t.Errorf("kind %d: %+v", k, r)
		}
		refused := 0
		for _, q := range reqs {
			rooms := bruteRooms(book, q.Window, q.Size)
			total, largest, hosts := 0, 0, 0
			for _, n := range rooms {
				total, largest = total+n, max(largest, n)
				if n > 0 {
					hosts++
				}
			}
			affinity := q.Affinity
			switch r.Kind {
			case "none":
				affinity = nil
			case "affinity":
				affinity = new(bool)
				*affinity = true
			case "anti-affinity":
				affinity = new(bool)
			}
			switch {
			case affinity == nil && total < q.Amount, affinity != nil && *affinity && largest < q.Amount, affinity != nil && !*affinity && hosts < q.Amount:
				refused++
			}
		}
		if r.Refused != refused {
			t.Errorf("%s: %d refused, brute force %d", r.Kind, r.Refused, refused)
		}
	}

	f := rep.FloatingIPs[0]
	fips := workload.FloatingIPs(300, floatingIPNetworks)
	allocs := workload.FloatingIPAllocations(fips, 2000)
	if f.Addresses != 300 || f.Networks != floatingIPNetworks || f.Allocations != len(allocs) {
		t.Errorf("floating IPs %+v; want 300 addresses, %d allocations", f, len(allocs))
	}
	refused := 0
	for _, q := range workload.FloatingIPRequests(30, fips, floatingIPNetworks) {
		free, requiredFree := 0, q.Required == ""
		for _, fip := range fips {
			if fip.FloatingNetworkID != q.Network {
				continue
			}
			busy := false
			for _, a := range allocs {
				busy = busy || (a.ResourceID == fip.ID && climate.Overlaps(a.Start, a.End, q.Window.Start, q.Window.End))
			}
			if !busy {
				free++
				requiredFree = requiredFree || fip.Address == q.Required
			}
		}
		if free < q.Amount || !requiredFree {
			refused++
		}
	}
	if r := f.Requests; r.Refused != refused || r.MedianUS <= 0 || r.P99US < r.MedianUS {
		t.Errorf("floating IPs: %+v; brute force refuses %d", r, refused)
	}

	table := runPlan(t, PlanOptions{Types: "instance,floatingip", Scales: "40:400", FloatingIPs: "300:2000", Windows: 5, Output: "table"})
	for _, want := range []string{"Instance slots", "40:400", "instance mixed", "instance anti-affinity", "Floating IPs", "300 ", "REFUSED"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	if strings.Contains(table, "BLAZAR") {
		t.Errorf("--types without host shows the host table:\n%s", table)
	}
}

// --type instance and floatingip post those reservations to a running server: every
// request is answered 201 or 409, and the leases each run created are deleted after it.
func TestBenchAPIInstanceAndFloatingIPAgainstRunningServer(t *testing.T) {
	for _, typ := range []string{"instance", "floatingip"} {
		t.Run(typ, func(t *testing.T) {
			dir := t.TempDir()
			ctx := context.Background()
			st, err := sqlite.Open(ctx, filepath.Join(dir, "climate.db"))
			if err != nil {
				t.Fatal(err)
			}
			book := workload.Generate(20, 100)
			if typ == "instance" {
				book = workload.GenerateInstances(20, 200)
			}
			if err := workload.Load(ctx, st, book, nil); err != nil {
				t.Fatal(err)
			}
			err = st.Update(ctx, func(tx climate.Tx) error {
				for _, f := range workload.FloatingIPs(50, 1) {
					if err := tx.InsertFloatingIP(ctx, &f); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			st.Close()
			url := serveDataDir(t, dir)

			rep := runAPIForTest(t, APIOptions{URL: url, Type: typ, Requests: 12, Clients: []int{1, 3}})
			checkAPIRuns(t, rep, []int{1, 3}, 12)
			if rep.Type != typ || rep.Runs[0].Created == 0 {
				t.Errorf("report: %+v", rep)
			}
			if _, leases, allocs := countStore(t, dir); leases != len(book.Leases) || allocs != book.Allocations() {
				t.Errorf("%d leases and %d allocations in the database after the runs, want the book's %d and %d", leases, allocs, len(book.Leases), book.Allocations())
			}
		})
	}
}
