package http

import (
	"encoding/json"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"climate"
	"climate/http/api"
	"climate/resource/floatingip"
	"climate/resource/instance"
)

// params reads a query string strictly: unknown keys and repeated keys are 400s.
type params struct {
	v   url.Values
	err error
}

func newParams(r *http.Request, allowed ...string) *params {
	p := &params{v: r.URL.Query()}
	for k, vs := range p.v {
		known := false
		for _, a := range allowed {
			known = known || a == k
		}
		if !known {
			sort.Strings(allowed)
			p.err = climate.Errorf(climate.CodeInvalid, "Unknown query parameter %q (accepted: %s)", k, strings.Join(allowed, ", "))
		} else if len(vs) > 1 {
			p.err = climate.Errorf(climate.CodeInvalid, "Query parameter %q is given %d times", k, len(vs))
		}
	}
	return p
}

func (p *params) str(key string) string { return p.v.Get(key) }

func (p *params) integer(key string) int {
	s := p.v.Get(key)
	if s == "" || p.err != nil {
		return 0
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		p.err = climate.Errorf(climate.CodeInvalid, "Query parameter %s=%q is not a non-negative integer", key, s)
	}
	return n
}

func (p *params) duration(key string) time.Duration {
	s := p.v.Get(key)
	if s == "" || p.err != nil {
		return 0
	}
	d, ok := parseDuration(s)
	if !ok {
		p.err = climate.Errorf(climate.CodeInvalid, "Query parameter %s=%q is not a positive duration: use forms like 90m, 4h, 2d or 1d12h", key, s)
	}
	return d
}

func (p *params) time(key string) time.Time {
	s := p.v.Get(key)
	if s == "" || p.err != nil {
		return time.Time{}
	}
	d, ok := parseDate(s)
	if !ok || d.Earliest {
		p.err = climate.Errorf(climate.CodeInvalid, "Query parameter %s=%q is an invalid date. Required format: %%Y-%%m-%%d %%H:%%M (also accepted: %%Y-%%m-%%d %%H:%%M:%%S, RFC 3339, \"now\")", key, s)
		return time.Time{}
	}
	if d.Now {
		return time.Now().UTC()
	}
	if err := climate.CheckDate("Query parameter "+key, d.Time); err != nil {
		p.err = err
	}
	return d.Time
}

// searchReservations reads an availability query's instance slot and floating IP
// parameters as the reservations a lease would ask for; each needs its amount (slots,
// floatingips) and is checked by its type as a lease's would be.
func (p *params) searchReservations(resourceProperties string) []climate.ReservationRequest {
	var out []climate.ReservationRequest
	keys := func(ks ...string) (given bool) {
		for _, k := range ks {
			given = given || p.v.Has(k)
		}
		return given
	}
	if keys("slots", "vcpus", "memory_mb", "disk_gb", "affinity") {
		rr := climate.ReservationRequest{ResourceType: instance.Name, ResourceProperties: &resourceProperties}
		for _, f := range []struct {
			key string
			to  **int
		}{{"slots", &rr.Amount}, {"vcpus", &rr.VCPUs}, {"memory_mb", &rr.MemoryMB}, {"disk_gb", &rr.DiskGB}} {
			if p.v.Has(f.key) {
				n := p.integer(f.key)
				*f.to = &n
			}
		}
		if rr.Amount == nil {
			p.setErr(climate.Errorf(climate.CodeInvalid, "Query parameter slots (how many instance slots) is required with vcpus, memory_mb, disk_gb or affinity"))
		}
		if rr.DiskGB == nil {
			zero := 0
			rr.DiskGB = &zero
		}
		if p.v.Has("affinity") {
			a, err := object{"affinity": json.RawMessage(strconv.Quote(p.v.Get("affinity")))}.affinity("affinity")
			p.setErr(err)
			rr.Affinity = a
		}
		out = append(out, rr)
	}
	if keys("floatingips", "network_id") {
		amount, network := p.integer("floatingips"), p.v.Get("network_id")
		if !p.v.Has("floatingips") {
			p.setErr(climate.Errorf(climate.CodeInvalid, "Query parameter floatingips (how many addresses) is required with network_id"))
		}
		out = append(out, climate.ReservationRequest{ResourceType: floatingip.Name, Amount: &amount, NetworkID: &network})
	}
	return out
}

// setErr keeps the first error.
func (p *params) setErr(err error) {
	if p.err == nil {
		p.err = err
	}
}

type slotJSON = api.Slot

func toSlotsJSON(slots []climate.Slot) []slotJSON {
	out := make([]slotJSON, 0, len(slots))
	for _, s := range slots {
		out = append(out, slotJSON{StartDate: api.FormatTime(s.Start), EndDate: api.FormatTime(s.End), FreeHosts: s.Free,
			FreeSlots: s.FreeSlots, FreeFloatingIPs: s.FreeFloatingIPs})
	}
	return out
}

// earliest answers GET /v1/availability/earliest (Climate's extension): the earliest
// windows of a duration in which count matching hosts are free, and with them slots
// instance slots of vcpus/memory_mb/disk_gb (affinity as in a reservation) on hosts
// matching resource_properties, and floatingips addresses of network_id.
func (s *Server) earliest(r *http.Request, who climate.Identity) (int, any, error) {
	p := newParams(r, "count", "duration", "after", "deadline", "limit", "hypervisor_properties", "resource_properties",
		"slots", "vcpus", "memory_mb", "disk_gb", "affinity", "floatingips", "network_id")
	q := climate.SlotQuery{
		Count: p.integer("count"), Duration: p.duration("duration"), After: p.time("after"), Deadline: p.time("deadline"),
		Limit: p.integer("limit"), HypervisorProperties: p.str("hypervisor_properties"), ResourceProperties: p.str("resource_properties"),
	}
	q.Reservations = p.searchReservations(q.ResourceProperties)
	if p.err != nil {
		return 0, nil, p.err
	}
	if q.Count == 0 && p.v.Get("count") == "" && len(q.Reservations) == 0 {
		q.Count = 1
	}
	slots, err := s.Availability.EarliestSlots(r.Context(), who, q)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, map[string]any{"slots": toSlotsJSON(slots)}, nil
}

// timeline answers GET /v1/availability/timeline (Climate's extension): how many matching
// hosts are free in each step of a range.
func (s *Server) timeline(r *http.Request, who climate.Identity) (int, any, error) {
	p := newParams(r, "from", "to", "step", "hypervisor_properties", "resource_properties", "vcpus", "memory_mb", "disk_gb", "network_id")
	q := climate.TimelineQuery{
		From: p.time("from"), To: p.time("to"), Step: p.duration("step"),
		HypervisorProperties: p.str("hypervisor_properties"), ResourceProperties: p.str("resource_properties"),
		NetworkID: p.str("network_id"),
	}
	if p.v.Has("vcpus") || p.v.Has("memory_mb") || p.v.Has("disk_gb") {
		q.SlotSize = &climate.Size{VCPUs: p.integer("vcpus"), MemoryMB: p.integer("memory_mb"), DiskGB: p.integer("disk_gb")}
	}
	if p.err != nil {
		return 0, nil, p.err
	}
	if q.Step == 0 {
		q.Step = time.Hour
	}
	tl, err := s.Availability.Timeline(r.Context(), who, q)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, map[string]any{"matching_hosts": tl.Matching, "timeline": toSlotsJSON(tl.Buckets)}, nil
}
