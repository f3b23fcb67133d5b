package http

import (
	"encoding/json"
	"net/http"
	"time"

	"climate"
	"climate/http/api"
)

// Fair use (Climate's extension): GET /v1/usage, and GET and PUT
// /v1/projects/{project_id}/limits.

// usage is the service for these routes: Server.Usage, or the hosts' service when it
// offers it (the manager does).
func (s *Server) usage() climate.UsageService {
	if s.Usage != nil {
		return s.Usage
	}
	us, _ := s.Hosts.(climate.UsageService)
	return us
}

func (s *Server) listUsage(r *http.Request, who climate.Identity) (int, any, error) {
	p := newParams(r, "project_id", "from", "to")
	q := climate.UsageQuery{ProjectID: p.str("project_id"), From: p.time("from"), To: p.time("to")}
	if p.err != nil {
		return 0, nil, p.err
	}
	return list(r, "usage", 0, func(emit func(any, string) error) (bool, error) {
		return false, s.usage().ListUsage(r.Context(), who, q, func(batch []climate.ReservationUsage) error {
			for i := range batch {
				u := api.UsageOf(&batch[i])
				if err := emit(u, u.ReservationID); err != nil {
					return err
				}
			}
			return nil
		})
	})
}

func (s *Server) getLimits(r *http.Request, who climate.Identity) (int, any, error) {
	a, err := s.usage().GetProjectLimits(r.Context(), who, r.PathValue("id"))
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, map[string]any{"limits": api.LimitsOf(a)}, nil
}

func (s *Server) updateLimits(r *http.Request, who climate.Identity) (int, any, error) {
	o, err := readObject(r)
	if err != nil {
		return 0, nil, err
	}
	if inner, ok := o["limits"]; ok && len(o) == 1 { // the shape GET answers with
		o = nil
		if err := json.Unmarshal(inner, &o); err != nil || o == nil {
			return 0, nil, malformed("limits", "an object")
		}
	}
	u, err := decodeLimitsUpdate(o)
	if err != nil {
		return 0, nil, err
	}
	a, err := s.usage().UpdateProjectLimits(r.Context(), who, r.PathValue("id"), u)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, map[string]any{"limits": api.LimitsOf(a)}, nil
}

func decodeLimitsUpdate(o object) (climate.LimitsUpdate, error) {
	var u climate.LimitsUpdate
	delete(o, "project_id") // shown by GET; the path names the project
	for _, k := range []string{"charged", "remaining", "updated_at"} {
		if _, ok := o[k]; ok {
			return u, climate.Errorf(climate.CodeInvalid, "%s is read-only", k)
		}
	}
	if err := o.only("project limits", "max_hosts", "max_vcpus", "max_floating_ips", "max_leases", "max_lease_duration",
		"max_advance", "budget", "prices", "multipliers", "exempt"); err != nil {
		return u, err
	}
	var err error
	for key, dst := range map[string]*climate.Patch[int]{"max_hosts": &u.MaxHosts, "max_vcpus": &u.MaxVCPUs,
		"max_floating_ips": &u.MaxFloatingIPs, "max_leases": &u.MaxLeases} {
		_, dst.Set = o[key]
		if dst.Value, err = o.integer(key); err != nil {
			return u, err
		}
	}
	for key, dst := range map[string]*climate.Patch[time.Duration]{"max_lease_duration": &u.MaxLeaseDuration, "max_advance": &u.MaxAdvance} {
		_, dst.Set = o[key]
		if dst.Value, err = o.seconds(key); err != nil {
			return u, err
		}
	}
	if raw, ok := o["budget"]; ok {
		u.Budget.Set = true
		if !isNull(raw) {
			var b float64
			if json.Unmarshal(raw, &b) != nil {
				return u, malformed("budget", "a number of units, or null")
			}
			u.Budget.Value = &b
		}
	}
	if raw, ok := o["prices"]; ok {
		u.PerHour.Set = true
		if !isNull(raw) {
			var p map[string]float64
			if json.Unmarshal(raw, &p) != nil {
				return u, malformed("prices", `an object of prices per resource-hour, such as {"host": 2, "vcpu": 0.1}`)
			}
			u.PerHour.Value = &p
		}
	}
	if raw, ok := o["multipliers"]; ok {
		u.Multipliers.Set = true
		if !isNull(raw) {
			var ms []climate.PriceMultiplier
			if json.Unmarshal(raw, &ms) != nil {
				return u, malformed("multipliers", `a list of {"property": …, "value": …, "factor": …}`)
			}
			u.Multipliers.Value = &ms
		}
	}
	if raw, ok := o["exempt"]; ok {
		u.Exempt.Set = true
		b, err := o.boolean("exempt")
		if err != nil {
			return u, err
		}
		if !isNull(raw) {
			u.Exempt.Value = &b
		}
	}
	return u, nil
}

// seconds returns a duration field given as a number of seconds or as a duration such
// as "7d"; absent or null gives nil.
func (o object) seconds(key string) (*time.Duration, error) {
	raw, ok := o[key]
	if !ok || isNull(raw) {
		return nil, nil
	}
	var n int64
	if json.Unmarshal(raw, &n) == nil {
		d := time.Duration(n) * time.Second
		if n <= 0 || n > int64(climate.MaxDuration/time.Second) {
			return nil, climate.Errorf(climate.CodeInvalid, "%s must be a positive number of seconds up to %d (or null for no limit)", key, int64(climate.MaxDuration/time.Second))
		}
		return &d, nil
	}
	d, err := o.duration(key)
	if err != nil {
		return nil, climate.Errorf(climate.CodeInvalid, "%s must be a number of seconds or a duration such as 12h or 7d (or null for no limit)", key)
	}
	return &d, nil
}
