package main

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"strings"
	"testing"
	"time"

	"climate/sqlite"
	"climate/workload"
)

// BenchmarkCreateLeaseHTTP measures lease creation through a running server's HTTP API on
// the blazar-90d book (shared/bench/WORKLOAD.md) at H=1,000/R=10,000 and H=5,000/R=50,000:
// each request asks for 10 hosts (floatingip: 10 of 1,000 floating IPs, beside the book)
// over the workload's next request window; instance posts the instance workload's next
// virtual:instance request (1–8 slots of one of 8 sizes, mixed affinity, 1–72 h) on its
// own book of 1,000 hosts and 10,000 instance leases (workload.GenerateInstances). Run with
// -benchtime=200x.
func BenchmarkCreateLeaseHTTP(b *testing.B) {
	for _, run := range []struct {
		kind string
		h, r int
	}{{"plain", 1000, 10000}, {"filtered", 1000, 10000}, {"floatingip", 1000, 10000}, {"instance", 1000, 10000},
		{"plain", 5000, 50000}, {"filtered", 5000, 50000}} {
		kind := run.kind
		b.Run(fmt.Sprintf("H=%d/%s", run.h, kind), func(b *testing.B) {
			dir := b.TempDir()
			st, err := sqlite.Open(context.Background(), filepath.Join(dir, "climate.db"))
			if err != nil {
				b.Fatal(err)
			}
			gen := workload.Generate
			if kind == "instance" {
				gen = workload.GenerateInstances
			}
			if err := workload.Load(context.Background(), st, gen(run.h, run.r), nil); err != nil {
				b.Fatal(err)
			}
			st.Close()
			// The server's goroutines (HTTP, writer, engine) inherit this label and the
			// client's loop gets its own, so a CPU profile (-cpuprofile, then pprof
			// -tagfocus side=server) tells the two apart and leaves out the book's load.
			pprof.SetGoroutineLabels(pprof.WithLabels(context.Background(), pprof.Labels("side", "server")))
			s := startServer(b, serveOptions{dataDir: dir}).url
			pprof.SetGoroutineLabels(pprof.WithLabels(context.Background(), pprof.Labels("side", "client")))
			defer pprof.SetGoroutineLabels(context.Background())
			props := `"hypervisor_properties": "", "resource_properties": ""`
			if kind == "filtered" {
				props = fmt.Sprintf(`"hypervisor_properties": %q, "resource_properties": %q`, workload.FilteredHypervisorProperties, workload.FilteredResourceProperties)
			}
			res := `"resource_type": "physical:host", "min": 10, "max": 10, ` + props
			if kind == "floatingip" { // 10 of 1,000 addresses instead of 10 hosts
				for i := range 1000 {
					body := fmt.Sprintf(`{"floating_network_id": "ext", "floating_ip_address": "10.0.%d.%d"}`, i/256, i%256)
					resp, err := http.Post(s+"/v1/floatingips", "application/json", strings.NewReader(body))
					if err != nil || resp.StatusCode != 201 {
						b.Fatalf("floating IP: %v %v", resp, err)
					}
					resp.Body.Close()
				}
				res = `"resource_type": "virtual:floatingip", "network_id": "ext", "amount": 10`
			}
			windows := workload.Windows(b.N)
			var instances []workload.InstanceRequest
			if kind == "instance" {
				instances = workload.InstanceRequests(b.N)
			}
			latencies := make([]time.Duration, 0, b.N)
			created, full := 0, 0
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				w := windows[i]
				if kind == "instance" {
					q := instances[i]
					affinity := "null"
					if q.Affinity != nil {
						affinity = fmt.Sprint(*q.Affinity)
					}
					w, res = q.Window, fmt.Sprintf(`"resource_type": "virtual:instance", "amount": %d, "vcpus": %d, "memory_mb": %d, "disk_gb": %d, "affinity": %s, "resource_properties": ""`,
						q.Amount, q.Size.VCPUs, q.Size.MemoryMB, q.Size.DiskGB, affinity)
				}
				body := fmt.Sprintf(`{"name": "bench-%d", "start_date": %q, "end_date": %q, "reservations": [{%s}]}`,
					i, w.Start.Format("2006-01-02 15:04"), w.End.Format("2006-01-02 15:04"), res)
				t0 := time.Now()
				resp, err := http.Post(s+"/v1/leases", "application/json", strings.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
				latencies = append(latencies, time.Since(t0))
				switch resp.StatusCode {
				case 201:
					created++
				case 409:
					full++
				default:
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
			b.StopTimer()
			sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
			b.ReportMetric(float64(latencies[len(latencies)/2].Microseconds())/1000, "median-ms")
			b.ReportMetric(float64(latencies[len(latencies)*99/100].Microseconds())/1000, "p99-ms")
			b.ReportMetric(float64(created), "created")
			b.ReportMetric(float64(full), "no-capacity")
		})
	}
}
