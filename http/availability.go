package http

import (
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"climate"
	"climate/http/api"
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

type slotJSON = api.Slot

func toSlotsJSON(slots []climate.Slot) []slotJSON {
	out := make([]slotJSON, 0, len(slots))
	for _, s := range slots {
		out = append(out, slotJSON{StartDate: api.FormatTime(s.Start), EndDate: api.FormatTime(s.End), FreeHosts: s.Free})
	}
	return out
}

// earliest answers GET /v1/availability/earliest (Climate's extension): the earliest
// windows of a duration in which count matching hosts are free.
func (s *Server) earliest(r *http.Request, who climate.Identity) (int, any, error) {
	p := newParams(r, "count", "duration", "after", "deadline", "limit", "hypervisor_properties", "resource_properties")
	q := climate.SlotQuery{
		Count: p.integer("count"), Duration: p.duration("duration"), After: p.time("after"), Deadline: p.time("deadline"),
		Limit: p.integer("limit"), HypervisorProperties: p.str("hypervisor_properties"), ResourceProperties: p.str("resource_properties"),
	}
	if p.err != nil {
		return 0, nil, p.err
	}
	if q.Count == 0 {
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
	p := newParams(r, "from", "to", "step", "hypervisor_properties", "resource_properties")
	q := climate.TimelineQuery{
		From: p.time("from"), To: p.time("to"), Step: p.duration("step"),
		HypervisorProperties: p.str("hypervisor_properties"), ResourceProperties: p.str("resource_properties"),
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
