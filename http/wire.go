package http

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"climate"
	"climate/http/api"
)

// Blazar's wire formats. Lease dates and event times go out as oslo's PERFECT_TIME_FORMAT
// (python-blazarclient parses that exact form for --prolong-for and friends); created_at
// and updated_at go out as Python's isoformat(' ').
const (
	perfectTimeFormat = api.TimeFormat
	apiDateFormat     = api.DateFormat
)

// dateLayouts are the input forms accepted for dates, besides "now": Blazar's minute form,
// with seconds, RFC 3339, and the form this API writes, so output can be fed back.
var dateLayouts = []string{apiDateFormat, "2006-01-02 15:04:05", time.RFC3339Nano, "2006-01-02T15:04:05.999999", "2006-01-02T15:04"}

// parseDate parses a request date; all dates without an offset are UTC.
func parseDate(s string) (climate.Date, bool) {
	s = strings.TrimSpace(s)
	switch s {
	case "now":
		return climate.Date{Now: true}, true
	case "earliest":
		return climate.Date{Earliest: true}, true
	}
	for _, layout := range dateLayouts {
		// The zero time is refused: climate.Date reads it as "not given", so it would be
		// reported missing on create and silently ignored on update.
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil && !t.IsZero() {
			return climate.Date{Time: t.UTC()}, true
		}
	}
	return climate.Date{}, false
}

// The wire shapes are shared with the Go client (package api).
type (
	leaseJSON       = api.Lease
	reservationJSON = api.Reservation
	eventJSON       = api.Event
)

// toHostJSON renders a host with its extra capabilities flattened in, as Blazar does, and
// its power state (Climate's extension) once power management recorded one.
func toHostJSON(h *climate.Host, now time.Time) map[string]any {
	out := make(map[string]any, 16+len(h.Extra))
	for k, v := range h.Extra {
		out[k] = v
	}
	out["id"] = h.ID
	out["hypervisor_hostname"] = h.HypervisorHostname
	out["service_name"] = h.ServiceName
	out["vcpus"] = h.VCPUs
	out["memory_mb"] = h.MemoryMB
	out["local_gb"] = h.LocalGB
	out["cpu_info"] = h.CPUInfo
	out["hypervisor_type"] = h.HypervisorType
	out["hypervisor_version"] = h.HypervisorVersion
	out["availability_zone"] = h.AvailabilityZone
	out["trust_id"] = h.TrustID
	out["reservable"] = h.Reservable
	out["status"] = nil
	out["created_at"] = api.FormatCreated(h.CreatedAt)
	out["updated_at"] = api.FormatUpdated(h.UpdatedAt)
	if p := h.Power; p != nil {
		out["power_state"] = string(p.State)
		out["power_state_changed_at"] = api.FormatCreated(p.ChangedAt)
		out["powered_off_hours"] = api.Hours(p.OffFor(now))
	}
	return out
}

// object is a decoded JSON object whose values are checked key by key, so that every type
// error names the parameter (Blazar's "Malformed parameter <name>").
type object map[string]json.RawMessage

func malformed(key, want string) error {
	return climate.Errorf(climate.CodeInvalid, "Malformed parameter %s: expected %s", key, want)
}

func isNull(raw json.RawMessage) bool { return string(raw) == "null" }

// str returns a string field; absent or null gives nil.
func (o object) str(key string) (*string, error) {
	raw, ok := o[key]
	if !ok || isNull(raw) {
		return nil, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, malformed(key, "a string")
	}
	return &s, nil
}

// text returns a string field that may come as a JSON number (a Nova flavor id such as
// 42, which Blazar's client sends as a number), in its decimal form.
func (o object) text(key string) (*string, error) {
	var n json.Number
	if raw, ok := o[key]; ok && json.Unmarshal(raw, &n) == nil {
		s := n.String()
		return &s, nil
	}
	return o.str(key)
}

// strings returns a list-of-strings field; absent or null gives nil. Blazar's client
// sends required_floatingips as a JSON list; a string holding one is accepted too.
func (o object) strings(key string) (*[]string, error) {
	raw, ok := o[key]
	if !ok || isNull(raw) {
		return nil, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		var s string
		if json.Unmarshal(raw, &s) != nil || json.Unmarshal([]byte(s), &list) != nil {
			return nil, malformed(key, "a list of strings")
		}
	}
	if len(list) > climate.MaxReservations {
		return nil, climate.Errorf(climate.CodeInvalid, "%s has %d entries, at most %d", key, len(list), climate.MaxReservations)
	}
	return &list, nil
}

// integer returns an integer field. Int-like strings ("2") are accepted, as Blazar's
// clients send them, and converted rather than crashing later as Blazar does.
func (o object) integer(key string) (*int, error) {
	raw, ok := o[key]
	if !ok || isNull(raw) {
		return nil, nil
	}
	var n json.Number
	if err := json.Unmarshal(raw, &n); err != nil {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return nil, malformed(key, "an integer")
		}
		n = json.Number(strings.TrimSpace(s))
	}
	v, err := strconv.ParseInt(string(n), 10, 32)
	if err != nil {
		return nil, malformed(key, "an integer")
	}
	i := int(v)
	return &i, nil
}

// query returns a property-query field. Blazar sends a JSON string holding the query; a
// bare JSON array is accepted too and kept in its string form.
func (o object) query(key string) (*string, error) {
	raw, ok := o[key]
	if !ok || isNull(raw) {
		return nil, nil
	}
	trimmed := strings.TrimSpace(string(raw))
	if strings.HasPrefix(trimmed, "[") {
		return &trimmed, nil
	}
	return o.str(key)
}

// date returns a date field; absent or null gives an unset date.
func (o object) date(key string) (climate.Date, error) {
	s, err := o.str(key)
	if err != nil || s == nil {
		return climate.Date{}, err
	}
	d, ok := parseDate(*s)
	if !ok {
		return climate.Date{}, climate.Errorf(climate.CodeInvalid,
			"%s is an invalid date. Required format: %%Y-%%m-%%d %%H:%%M (also accepted: %%Y-%%m-%%d %%H:%%M:%%S, RFC 3339, \"now\")", *s)
	}
	if !d.Now && !d.Earliest {
		if err := climate.CheckDate(key, d.Time); err != nil {
			return climate.Date{}, err
		}
	}
	return d, nil
}

// only rejects keys outside allowed, so a typo is reported rather than ignored.
func (o object) only(what string, allowed ...string) error {
	for k := range o {
		found := false
		for _, a := range allowed {
			if k == a {
				found = true
				break
			}
		}
		if !found {
			return climate.Errorf(climate.CodeInvalid, "Unknown parameter %q in %s (accepted: %s)", k, what, strings.Join(allowed, ", "))
		}
	}
	return nil
}

// objects decodes a field holding an array of JSON objects.
func (o object) objects(key string) ([]object, error) {
	raw, ok := o[key]
	if !ok || isNull(raw) {
		return nil, nil
	}
	var out []object
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, malformed(key, "a list of objects")
	}
	for _, item := range out {
		if item == nil {
			return nil, malformed(key, "a list of objects")
		}
	}
	return out, nil
}

func decodeReservation(o object, update bool) (climate.ReservationRequest, error) {
	var r climate.ReservationRequest
	var err error
	// Every type's keys; each type refuses the others' (resource.Type.New).
	keys := []string{"resource_type", "min", "max", "hypervisor_properties", "resource_properties", "before_end",
		"network_id", "amount", "required_floatingips", "vcpus", "memory_mb", "disk_gb", "affinity", "flavor_id"}
	if update {
		keys = append(keys, "id")
		id, err := o.str("id")
		if err != nil {
			return r, err
		}
		if id != nil {
			r.ID = *id
		}
	}
	if t, err := o.str("resource_type"); err != nil {
		return r, err
	} else if t != nil {
		r.ResourceType = *t
	}
	if err := o.only("a reservation", keys...); err != nil {
		return r, err
	}
	if r.Min, err = o.integer("min"); err != nil {
		return r, err
	}
	if r.Max, err = o.integer("max"); err != nil {
		return r, err
	}
	if r.HypervisorProperties, err = o.query("hypervisor_properties"); err != nil {
		return r, err
	}
	if r.ResourceProperties, err = o.query("resource_properties"); err != nil {
		return r, err
	}
	if r.BeforeEnd, err = o.str("before_end"); err != nil {
		return r, err
	}
	if r.NetworkID, err = o.str("network_id"); err != nil {
		return r, err
	}
	if r.Amount, err = o.integer("amount"); err != nil {
		return r, err
	}
	if r.RequiredFloatingIPs, err = o.strings("required_floatingips"); err != nil {
		return r, err
	}
	if r.VCPUs, err = o.integer("vcpus"); err != nil {
		return r, err
	}
	if r.MemoryMB, err = o.integer("memory_mb"); err != nil {
		return r, err
	}
	if r.DiskGB, err = o.integer("disk_gb"); err != nil {
		return r, err
	}
	if r.FlavorID, err = o.text("flavor_id"); err != nil {
		return r, err
	}
	r.Affinity, err = o.affinity("affinity")
	return r, err
}

// affinity returns an instance reservation's affinity: nil when the key is absent; its
// Value nil for null and the strings Blazar reads as None, else the boolean oslo's
// strutils.bool_from_string(strict=True) reads (true/false, "True", "yes", "0", 1, …).
func (o object) affinity(key string) (*climate.Affinity, error) {
	raw, ok := o[key]
	if !ok {
		return nil, nil
	}
	if isNull(raw) {
		return &climate.Affinity{}, nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, malformed(key, "true, false or null")
	}
	text := strings.ToLower(strings.TrimSpace(fmt.Sprint(v)))
	var b bool
	switch text {
	case "none", "null":
		return &climate.Affinity{}, nil
	case "1", "t", "true", "on", "y", "yes":
		b = true
	case "0", "f", "false", "off", "n", "no":
		b = false
	default:
		return nil, malformed(key, "true, false or null")
	}
	return &climate.Affinity{Value: &b}, nil
}

func decodeReservations(o object, update bool) ([]climate.ReservationRequest, error) {
	items, err := o.objects("reservations")
	if err != nil {
		return nil, err
	}
	out := make([]climate.ReservationRequest, 0, len(items))
	for _, item := range items {
		r, err := decodeReservation(item, update)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// beforeEndDate decodes before_end_date, which has no "now" form.
func beforeEndDate(o object) (*time.Time, error) { return optionalInstant(o, "before_end_date") }

// beforeStartDate decodes before_start_date (Climate's extension), a date.
func beforeStartDate(o object) (*time.Time, error) { return optionalInstant(o, "before_start_date") }

// optionalInstant decodes a date field that must be a point in time, nil when absent.
func optionalInstant(o object, key string) (*time.Time, error) {
	t, err := o.instant(key)
	if err != nil || t.IsZero() {
		return nil, err
	}
	return &t, nil
}

func parseDuration(s string) (time.Duration, bool) { return api.ParseDuration(s) }

// duration returns a duration field ("4h", "2d", …); absent or null gives zero.
func (o object) duration(key string) (time.Duration, error) {
	s, err := o.str(key)
	if err != nil || s == nil {
		return 0, err
	}
	d, ok := parseDuration(*s)
	if !ok {
		return 0, climate.Errorf(climate.CodeInvalid, "%s %q is not a positive duration: use forms like 90m, 4h, 2d or 1d12h", key, *s)
	}
	return d, nil
}

// boolean returns a boolean field; absent or null gives false.
func (o object) boolean(key string) (bool, error) {
	raw, ok := o[key]
	if !ok || isNull(raw) {
		return false, nil
	}
	switch string(raw) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, malformed(key, "true or false")
}

// instant returns a date field that must be a point in time (not "now" or "earliest").
func (o object) instant(key string) (time.Time, error) {
	d, err := o.date(key)
	if err != nil || !d.IsSet() {
		return time.Time{}, err
	}
	if d.Now || d.Earliest {
		return time.Time{}, climate.Errorf(climate.CodeInvalid, "%s must be a date", key)
	}
	return d.Time, nil
}

func decodeLeaseRequest(o object) (climate.LeaseRequest, error) {
	var req climate.LeaseRequest
	if err := o.only("a lease", "name", "start_date", "end_date", "before_end_date", "before_start_date", "reservations", "events",
		"duration", "deadline", "dry_run", "lease_type", "retry_until", "priority", "max_retries", "preemptible", "on_preempt"); err != nil {
		return req, err
	}
	var err error
	if t, err := o.str("lease_type"); err != nil {
		return req, err
	} else if t != nil {
		req.Type = climate.LeaseType(*t)
	}
	if req.RetryUntil, err = o.instant("retry_until"); err != nil {
		return req, err
	}
	if p, err := o.integer("priority"); err != nil {
		return req, err
	} else if p != nil {
		req.Priority = *p
	}
	if n, err := o.integer("max_retries"); err != nil {
		return req, err
	} else if n != nil {
		req.MaxRetries = *n
	}
	if req.Preemptible, err = o.boolean("preemptible"); err != nil {
		return req, err
	}
	if a, err := o.str("on_preempt"); err != nil {
		return req, err
	} else if a != nil {
		req.OnPreempt = climate.PreemptAction(*a)
	}
	if req.Duration, err = o.duration("duration"); err != nil {
		return req, err
	}
	if req.Deadline, err = o.instant("deadline"); err != nil {
		return req, err
	}
	if req.DryRun, err = o.boolean("dry_run"); err != nil {
		return req, err
	}
	name, err := o.str("name")
	if err != nil {
		return req, err
	}
	if name != nil {
		req.Name = *name
	}
	if req.Start, err = o.date("start_date"); err != nil {
		return req, err
	}
	if req.End, err = o.date("end_date"); err != nil {
		return req, err
	}
	if req.BeforeEnd, err = beforeEndDate(o); err != nil {
		return req, err
	}
	if req.BeforeStart, err = beforeStartDate(o); err != nil {
		return req, err
	}
	if err := noUserEvents(o); err != nil {
		return req, err
	}
	req.Reservations, err = decodeReservations(o, false)
	return req, err
}

// noEarliest refuses "earliest" where only lease creation accepts it.
func noEarliest(key string, d climate.Date) error {
	if d.Earliest {
		return climate.Errorf(climate.CodeInvalid, "%s \"earliest\" is only accepted when creating a lease", key)
	}
	return nil
}

// noUserEvents accepts the empty "events" list python-blazarclient always sends. Blazar
// stores user events verbatim and never fires them; Climate refuses them instead.
func noUserEvents(o object) error {
	events, err := o.objects("events")
	if err != nil {
		return err
	}
	if len(events) > 0 {
		return climate.Errorf(climate.CodeInvalid, "User-defined events are not supported: the service creates start_lease, end_lease and before_end_lease events itself")
	}
	return nil
}

func decodeLeaseUpdate(o object) (climate.LeaseUpdate, error) {
	var u climate.LeaseUpdate
	if err := o.only("a lease update", "name", "start_date", "end_date", "before_end_date", "before_start_date", "reservations", "events"); err != nil {
		return u, err
	}
	var err error
	if u.Name, err = o.str("name"); err != nil {
		return u, err
	}
	if u.Start, err = o.date("start_date"); err != nil {
		return u, err
	}
	if u.End, err = o.date("end_date"); err != nil {
		return u, err
	}
	if err := errors.Join(noEarliest("start_date", u.Start), noEarliest("end_date", u.End)); err != nil {
		return u, err
	}
	if u.BeforeEnd, err = beforeEndDate(o); err != nil {
		return u, err
	}
	if u.BeforeStart, err = beforeStartDate(o); err != nil {
		return u, err
	}
	if err := noUserEvents(o); err != nil {
		return u, err
	}
	u.Reservations, err = decodeReservations(o, true)
	return u, err
}

// decodeHostFields turns a host request's JSON object into string fields: strings as they
// are, numbers as written, booleans as true/false.
func decodeHostFields(o object) (map[string]string, error) {
	out := make(map[string]string, len(o))
	for k, raw := range o {
		var v any
		dec := json.NewDecoder(strings.NewReader(string(raw)))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			return nil, malformed(k, "a string, number or boolean")
		}
		switch v := v.(type) {
		case string:
			out[k] = v
		case json.Number:
			out[k] = v.String()
		case bool:
			out[k] = strconv.FormatBool(v)
		default:
			return nil, malformed(k, "a string, number or boolean")
		}
	}
	return out, nil
}
