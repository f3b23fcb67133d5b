package bench

import (
	"fmt"
	"io"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"

	"climate"
	"climate/plan"
	"climate/resource"
	"climate/resource/floatingip"
	"climate/workload"
)

// benchTypes are bench plan's --types.
type benchTypes struct{ host, instance, floatingIP bool }

func parseBenchTypes(s string) (benchTypes, error) {
	var t benchTypes
	for _, part := range strings.Split(s, ",") {
		switch strings.TrimSpace(part) {
		case "host":
			t.host = true
		case "instance":
			t.instance = true
		case "floatingip":
			t.floatingIP = true
		default:
			return t, fmt.Errorf("--types %q: want a comma-separated list of host, instance and floatingip", s)
		}
	}
	return t, nil
}

// planInstanceScaleReport is bench plan's instance-slot result at one scale: the
// instance workload's book (workload.GenerateInstances) and its requests.
type planInstanceScaleReport struct {
	Hosts int `json:"hosts"`
	// InstanceLeases is R, the instance leases asked of the generator; Leases those in the
	// book (R less the few no host could take, plus a whole-host lease after every tenth).
	InstanceLeases  int     `json:"instance_leases"`
	Leases          int     `json:"leases"`
	SlotAllocations int     `json:"slot_allocations"`
	HostAllocations int     `json:"host_allocations"`
	VCPUBookedPct   float64 `json:"vcpu_booked_pct"` // share of the vCPU-hours of the 21 days booked
	GenerateSeconds float64 `json:"generate_seconds"`
	IndexBuildMS    float64 `json:"index_build_ms"`
	// Requests per kind: mixed (the requests' own affinities), none, affinity,
	// anti-affinity (every request with that affinity).
	Requests []planSlotsKindReport `json:"requests"`
}

type planSlotsKindReport struct {
	Kind     string  `json:"kind"`
	MedianUS float64 `json:"median_us"`
	P99US    float64 `json:"p99_us"`
	// Refused counts the requests refused for want of room (409).
	Refused int `json:"refused"`
}

// planFloatingIPReport is bench plan's floating-IP result for one ADDRESSES:ALLOCATIONS.
type planFloatingIPReport struct {
	Addresses   int                 `json:"addresses"`
	Networks    int                 `json:"networks"`
	Allocations int                 `json:"allocations"`
	Requests    planSlotsKindReport `json:"requests"`
}

// floatingIPNetworks is how many external networks bench plan spreads the addresses over.
const floatingIPNetworks = 10

func benchInstanceScale(sc benchScale, n int, p *progressLine) (*planInstanceScaleReport, error) {
	p.set("instances %s: generating the book", sc)
	t0 := time.Now()
	book := workload.GenerateInstances(sc.hosts, sc.leases)
	rep := &planInstanceScaleReport{Hosts: sc.hosts, InstanceLeases: sc.leases, Leases: len(book.Leases),
		GenerateSeconds: round(time.Since(t0).Seconds(), 3)}
	allocs := book.AllocationsByLease()
	vcpus := make(map[string]int, len(book.Hosts))
	capacity := 0.0
	for _, h := range book.Hosts {
		vcpus[h.ID] = h.VCPUs
		capacity += float64(h.VCPUs) * workload.InstanceHorizonHours
	}
	booked := 0.0
	for _, a := range allocs {
		hours := a.End.Sub(a.Start).Hours()
		if a.Shared() {
			rep.SlotAllocations++
			booked += float64(a.Slots*a.Size.VCPUs) * hours
		} else {
			rep.HostAllocations++
			booked += float64(vcpus[a.ResourceID]) * hours
		}
	}
	if capacity > 0 {
		rep.VCPUBookedPct = round(100*booked/capacity, 1)
	}

	p.set("instances %s: building the index", sc)
	t0 = time.Now()
	x := plan.NewIndex(book.Hosts, allocs)
	rep.IndexBuildMS = millis(time.Since(t0))

	reqs := workload.InstanceRequests(n)
	yes, no := true, false
	for _, kind := range []struct {
		name     string
		affinity func(workload.InstanceRequest) *bool
	}{
		{"mixed", func(q workload.InstanceRequest) *bool { return q.Affinity }},
		{"none", func(workload.InstanceRequest) *bool { return nil }},
		{"affinity", func(workload.InstanceRequest) *bool { return &yes }},
		{"anti-affinity", func(workload.InstanceRequest) *bool { return &no }},
	} {
		p.set("instances %s: planning %s requests", sc, kind.name)
		request := func(q workload.InstanceRequest) plan.SlotsRequest {
			return plan.SlotsRequest{Window: plan.Window{Start: q.Window.Start, End: q.Window.End}, Amount: q.Amount, Size: q.Size,
				Affinity: kind.affinity(q)}
		}
		_, _ = x.PlaceSlots(request(reqs[0])) // caches the candidate list, untimed
		runtime.GC()
		lat := make([]time.Duration, len(reqs))
		r := planSlotsKindReport{Kind: kind.name}
		for i, q := range reqs {
			req := request(q)
			t0 := time.Now()
			_, err := x.PlaceSlots(req)
			lat[i] = time.Since(t0)
			if err != nil {
				if climate.ErrorCode(err) != climate.CodeConflict {
					return nil, fmt.Errorf("instances %s, request %d: %w", sc, i, err)
				}
				r.Refused++
			}
		}
		med, p99 := medianP99(lat)
		r.MedianUS, r.P99US = micros(med), micros(p99)
		rep.Requests = append(rep.Requests, r)
	}
	runtime.KeepAlive(x)
	return rep, nil
}

// benchFloatingIPs times floating-IP planning (floatingip.Type.Plan, as the manager calls
// it) over sc.hosts addresses on 10 networks with sc.leases existing allocations.
func benchFloatingIPs(sc benchScale, n int, p *progressLine) (*planFloatingIPReport, error) {
	p.set("floating IPs %s: generating", sc)
	fips := workload.FloatingIPs(sc.hosts, floatingIPNetworks)
	allocs := workload.FloatingIPAllocations(fips, sc.leases)
	v := resource.NewView(nil, fips, nil, allocs)
	rep := &planFloatingIPReport{Addresses: len(fips), Networks: floatingIPNetworks, Allocations: len(allocs)}
	reqs := workload.FloatingIPRequests(n, fips, floatingIPNetworks)
	ft := floatingip.Type{}
	plan1 := func(q workload.FloatingIPRequest) error {
		l := &climate.Lease{ID: "bench", Start: q.Window.Start, End: q.Window.End}
		r := climate.Reservation{ResourceType: floatingip.Name, NetworkID: q.Network, Amount: q.Amount}
		if q.Required != "" {
			r.RequiredFloatingIPs = []string{q.Required}
		}
		_, err := ft.Plan(v, l, &r, nil, nil, 0)
		return err
	}
	for k := range floatingIPNetworks { // cache each network's candidate list, untimed
		_ = plan1(workload.FloatingIPRequest{Window: reqs[0].Window, Network: workload.FloatingIPNetwork(k), Amount: 1})
	}
	p.set("floating IPs %s: planning", sc)
	runtime.GC()
	lat := make([]time.Duration, len(reqs))
	r := planSlotsKindReport{Kind: "floatingip"}
	for i, q := range reqs {
		t0 := time.Now()
		err := plan1(q)
		lat[i] = time.Since(t0)
		if err != nil {
			if climate.ErrorCode(err) != climate.CodeConflict {
				return nil, fmt.Errorf("floating IPs %s, request %d: %w", sc, i, err)
			}
			r.Refused++
		}
	}
	med, p99 := medianP99(lat)
	r.MedianUS, r.P99US = micros(med), micros(p99)
	rep.Requests = r
	runtime.KeepAlive(v)
	return rep, nil
}

func writePlanSlotsTables(w io.Writer, rep *planReport) error {
	if len(rep.Instances) > 0 {
		fmt.Fprintf(w, "\nInstance slots (virtual:instance, plan.PlaceSlots): H hosts of 32–128 vCPUs and 128–512 GB, R instance leases of\n"+
			"1–8 slots over 1–3 hosts and a whole-host lease after every tenth, over 21 days; %d requests per kind of 1–8 slots of\n"+
			"8 sizes over 1–72 h (mixed: half without affinity, a quarter each with affinity and anti-affinity)\n\n", rep.Windows)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "SCALE H:R\tLEASES\tSLOT ALLOCATIONS\tHOST ALLOCATIONS\tVCPU-HOURS BOOKED\tBOOK GENERATION\tINDEX BUILD")
		for _, s := range rep.Instances {
			fmt.Fprintf(tw, "%d:%d\t%d\t%d\t%d\t%.1f%%\t%.2f s\t%.1f ms\n", s.Hosts, s.InstanceLeases, s.Leases, s.SlotAllocations, s.HostAllocations,
				s.VCPUBookedPct, s.GenerateSeconds, s.IndexBuildMS)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "SCALE H:R\tREQUEST\tMEDIAN\tP99\tREFUSED")
		for _, s := range rep.Instances {
			for _, r := range s.Requests {
				fmt.Fprintf(tw, "%d:%d\tinstance %s\t%s\t%s\t%d/%d\n", s.Hosts, s.InstanceLeases, r.Kind, formatMicros(r.MedianUS), formatMicros(r.P99US), r.Refused, rep.Windows)
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(rep.FloatingIPs) > 0 {
		fmt.Fprintf(w, "\nFloating IPs (virtual:floatingip, floatingip.Type.Plan): addresses on %d networks, existing allocations over 90 days;\n"+
			"%d requests of 1–4 addresses of one network over 1–72 h, half of them requiring one address\n\n", floatingIPNetworks, rep.Windows)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ADDRESSES\tALLOCATIONS\tMEDIAN\tP99\tREFUSED")
		for _, f := range rep.FloatingIPs {
			r := f.Requests
			fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%d/%d\n", f.Addresses, f.Allocations, formatMicros(r.MedianUS), formatMicros(r.P99US), r.Refused, rep.Windows)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(rep.Instances)+len(rep.FloatingIPs) > 0 {
		fmt.Fprintln(w, "\nREFUSED: requests refused for want of room in the window (409).")
	}
	return nil
}
