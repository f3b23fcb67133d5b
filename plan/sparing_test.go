package plan_test

import (
	"fmt"
	"math/rand"
	"testing"
	"time"

	"climate"
	"climate/plan"
)

func gpuFilter(h *climate.Host) bool { return h.Extra["gpu"] == "true" }

// Once a request has asked for GPU hosts, an unfiltered request takes a plain host while
// one is free, even where a GPU host fits tighter in time; with sparing off it takes the
// tighter GPU host. A rebuilt index keeps the filters it was given.
func TestSparingKeepsScarceHostsForTheirRequests(t *testing.T) {
	hosts := []climate.Host{
		{ID: "gpu", Reservable: true, Extra: map[string]string{"gpu": "true"}},
		{ID: "plain", Reservable: true, Extra: map[string]string{"gpu": "false"}},
	}
	// The GPU host is booked from 12:00: a 10:00–12:00 request fits it exactly.
	booked := []climate.Allocation{{LeaseID: "b", ResourceID: "gpu", Start: at(12, 0), End: at(14, 0)}}
	unfiltered := plan.HostRequest{Window: plan.Window{Start: at(10, 0), End: at(12, 0)}, Min: 1, Max: 1}
	gpuOnly := plan.HostRequest{Window: plan.Window{Start: at(15, 0), End: at(16, 0)}, Min: 1, Max: 1, Match: gpuFilter, FilterKey: "gpu"}
	for _, c := range []struct {
		name  string
		opts  []plan.Option
		asked bool
		want  string
	}{
		{"sparing, no filter seen yet: best fit", nil, false, "gpu"},
		{"sparing, after a GPU request", nil, true, "plain"},
		{"sparing off, after a GPU request: best fit", []plan.Option{plan.WithSparing(false)}, true, "gpu"},
	} {
		x := plan.NewIndex(hosts, booked, c.opts...)
		if c.asked {
			if _, _, err := x.PlaceHosts(gpuOnly); err != nil {
				t.Fatal(err)
			}
		}
		if got, _, err := x.PlaceHosts(unfiltered); err != nil || got[0] != c.want {
			t.Errorf("%s: %v, %v; want %s", c.name, got, err, c.want)
		}
	}
	x := plan.NewIndex(hosts, booked)
	_, _, _ = x.PlaceHosts(gpuOnly)
	rebuilt := plan.NewIndex(hosts, booked)
	rebuilt.KeepFilters(x)
	if got, _, _ := rebuilt.PlaceHosts(unfiltered); got[0] != "plain" {
		t.Errorf("a rebuilt index forgot the GPU filter: %v", got)
	}
}

// BenchmarkSparing replays one mixed workload with sparing on and off and reports how
// many requests were satisfied: 200 hosts, 10% with a GPU; over two weeks, 3,000 requests
// arrive in time order, 80% for 1–4 hosts of any kind, 20% for 1–2 GPU hosts, each for
// 1–12 hours from a start up to two days ahead.
func BenchmarkSparing(b *testing.B) {
	const nHosts, nRequests = 200, 3000
	hosts := make([]climate.Host, nHosts)
	for i := range hosts {
		hosts[i] = climate.Host{ID: fmt.Sprint(i), Reservable: true, Extra: map[string]string{"gpu": fmt.Sprint(i%10 == 0)}}
	}
	type request struct {
		req plan.HostRequest
		gpu bool
	}
	rng := rand.New(rand.NewSource(1))
	var reqs []request
	now := at(0, 0)
	for range nRequests {
		now = now.Add(time.Duration(rng.Intn(13)) * time.Minute)
		start := now.Add(time.Duration(rng.Intn(48*60)) * time.Minute)
		w := plan.Window{Start: start, End: start.Add(time.Duration(1+rng.Intn(12)) * time.Hour)}
		if rng.Intn(5) == 0 {
			n := 1 + rng.Intn(2)
			reqs = append(reqs, request{plan.HostRequest{Window: w, Min: n, Max: n, Match: gpuFilter, FilterKey: "gpu"}, true})
		} else {
			n := 1 + rng.Intn(4)
			reqs = append(reqs, request{plan.HostRequest{Window: w, Min: n, Max: n}, false})
		}
	}
	for _, sparing := range []bool{false, true} {
		b.Run(fmt.Sprintf("sparing=%v", sparing), func(b *testing.B) {
			var ok, gpuOK, gpuAsked int
			for range b.N {
				x := plan.NewIndex(hosts, nil, plan.WithSparing(sparing))
				ok, gpuOK, gpuAsked = 0, 0, 0
				for i, r := range reqs {
					got, _, err := x.PlaceHosts(r.req)
					if r.gpu {
						gpuAsked++
					}
					if err != nil {
						continue
					}
					ok++
					if r.gpu {
						gpuOK++
					}
					add := make([]climate.Allocation, len(got))
					for j, h := range got {
						add[j] = climate.Allocation{LeaseID: fmt.Sprint(i), ResourceID: h, Start: r.req.Window.Start, End: r.req.Window.End}
					}
					x.Apply(nil, add)
				}
			}
			b.ReportMetric(float64(ok), "satisfied")
			b.ReportMetric(float64(gpuOK), "gpu-satisfied")
			b.Logf("sparing=%v: %d of %d requests satisfied; GPU requests %d of %d", sparing, ok, len(reqs), gpuOK, gpuAsked)
		})
	}
}
