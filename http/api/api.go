// Package api holds the shapes of Climate's REST API (Blazar's v1 wire format and Climate's
// extensions), shared by the server in package http and the Go client in http/client, so
// both sides read and write the same JSON.
package api

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"climate"
	"climate/resource/builtin"
)

// Wire date formats. Lease dates and event times go out as oslo's PERFECT_TIME_FORMAT
// (python-blazarclient parses that exact form); requests take Blazar's minute form.
const (
	TimeFormat = "2006-01-02T15:04:05.000000"
	DateFormat = "2006-01-02 15:04"
)

// ParseTime reads a time the server wrote (TimeFormat, UTC).
func ParseTime(s string) (time.Time, error) {
	return time.ParseInLocation(TimeFormat, s, time.UTC)
}

// ParseDuration reads a duration such as "90m", "4h", "2d" or "1d12h" (Go's syntax plus
// days). It accepts only positive durations up to climate.MaxDuration.
func ParseDuration(s string) (time.Duration, bool) {
	s = strings.TrimSpace(s)
	var days int64
	if i := strings.IndexByte(s, 'd'); i > 0 {
		n, err := strconv.ParseInt(s[:i], 10, 32)
		if err != nil {
			return 0, false
		}
		days, s = n, s[i+1:]
	}
	var rest time.Duration
	if s != "" {
		var err error
		if rest, err = time.ParseDuration(s); err != nil {
			return 0, false
		}
	}
	// Days are bounded before multiplying, so that no input overflows into a small or
	// negative value.
	if days > int64(climate.MaxDuration/(24*time.Hour)) || rest > climate.MaxDuration {
		return 0, false
	}
	d := time.Duration(days)*24*time.Hour + rest
	return d, d > 0 && d <= climate.MaxDuration
}

// Lease is a lease as the API returns it.
type Lease struct {
	ID           string        `json:"id"`
	Name         string        `json:"name"`
	StartDate    string        `json:"start_date"`
	EndDate      string        `json:"end_date"`
	Status       string        `json:"status"`
	Degraded     bool          `json:"degraded"`
	UserID       string        `json:"user_id"`
	ProjectID    string        `json:"project_id"`
	TrustID      string        `json:"trust_id"`
	CreatedAt    string        `json:"created_at"`
	UpdatedAt    *string       `json:"updated_at"`
	Reservations []Reservation `json:"reservations"`
	Events       []Event       `json:"events"`
	// Climate's lease types (absent for Blazar's leases): the type, when a waiting lease
	// gives up, its priority among waiting leases.
	LeaseType  string  `json:"lease_type,omitempty"`
	RetryUntil *string `json:"retry_until,omitempty"`
	Priority   int     `json:"priority,omitempty"`
	// A waiting lease's cap on re-plans and how many did not fit yet.
	MaxRetries int `json:"max_retries,omitempty"`
	Retries    int `json:"retries,omitempty"`
	// A preemptible lease (Climate's extension) and what it does when a host is taken
	// back: shrink or end.
	Preemptible bool   `json:"preemptible,omitempty"`
	OnPreempt   string `json:"on_preempt,omitempty"`
	// Cost is what the lease charges its project's budget now (Climate's extension): its
	// whole reserved window while it may still hold something, what it held once over.
	Cost *float64 `json:"cost,omitempty"`
}

// Reservation is one reservation of a lease.
type Reservation struct {
	ID               string  `json:"id"`
	LeaseID          string  `json:"lease_id"`
	ResourceID       string  `json:"resource_id"`
	ResourceType     string  `json:"resource_type"`
	Status           string  `json:"status"`
	MissingResources bool    `json:"missing_resources"`
	ResourcesChanged bool    `json:"resources_changed"`
	CreatedAt        string  `json:"created_at"`
	UpdatedAt        *string `json:"updated_at"`
	// Hosts and FloatingIPs are Climate's extension: the hosts (by hypervisor hostname) and
	// floating IPs (by address) the reservation holds, or on a dry run would.
	Hosts       []string `json:"hosts,omitempty"`
	FloatingIPs []string `json:"floatingips,omitempty"`
	// Fields are the keys of the reservation's type (min and max, amount and vcpus, …),
	// shown beside the common ones as Blazar shows them.
	Fields map[string]any `json:"-"`
}

// reservationJSON is Reservation without its methods, for encoding the common keys.
type reservationJSON Reservation

// MarshalJSON writes the common keys, then the type's in name order.
func (r Reservation) MarshalJSON() ([]byte, error) {
	out, err := json.Marshal(reservationJSON(r))
	if err != nil || len(r.Fields) == 0 {
		return out, err
	}
	out = out[:len(out)-1]
	for _, k := range slices.Sorted(maps.Keys(r.Fields)) {
		key, _ := json.Marshal(k)
		v, err := json.Marshal(r.Fields[k])
		if err != nil {
			return nil, err
		}
		out = append(append(append(append(out, ','), key...), ':'), v...)
	}
	return append(out, '}'), nil
}

// UnmarshalJSON reads the common keys into their fields and the rest into Fields.
func (r *Reservation) UnmarshalJSON(b []byte) error {
	var common reservationJSON
	if err := json.Unmarshal(b, &common); err != nil {
		return err
	}
	var all map[string]any
	if err := json.Unmarshal(b, &all); err != nil {
		return err
	}
	for _, k := range []string{"id", "lease_id", "resource_id", "resource_type", "status", "missing_resources",
		"resources_changed", "created_at", "updated_at", "hosts", "floatingips"} {
		delete(all, k)
	}
	*r = Reservation(common)
	if len(all) > 0 {
		r.Fields = all
	}
	return nil
}

// Event is one of a lease's events.
type Event struct {
	ID        string  `json:"id"`
	LeaseID   string  `json:"lease_id"`
	EventType string  `json:"event_type"`
	Time      string  `json:"time"`
	Status    string  `json:"status"`
	CreatedAt string  `json:"created_at"`
	UpdatedAt *string `json:"updated_at"`
}

// LeaseRequest creates a lease. Dates take "now", "YYYY-MM-DD HH:MM" or RFC 3339;
// StartDate "earliest" with Duration (and optionally Deadline) books the first window
// where the reservations fit. Reservations are Blazar's free-form dictionaries, e.g.
// {"resource_type": "physical:host", "min": 1, "max": 2, "resource_properties": "..."}.
type LeaseRequest struct {
	Name            string           `json:"name"`
	StartDate       string           `json:"start_date"`
	EndDate         string           `json:"end_date,omitempty"`
	BeforeEndDate   string           `json:"before_end_date,omitempty"`
	BeforeStartDate string           `json:"before_start_date,omitempty"` // Climate's extension
	Duration        string           `json:"duration,omitempty"`
	Deadline        string           `json:"deadline,omitempty"`
	DryRun          bool             `json:"dry_run,omitempty"`
	Reservations    []map[string]any `json:"reservations"`
	Events          []map[string]any `json:"events"`
	// Climate's lease types: immediate, retry, best_effort, scheduled; a waiting lease's
	// deadline and priority.
	LeaseType  string `json:"lease_type,omitempty"`
	RetryUntil string `json:"retry_until,omitempty"`
	Priority   int    `json:"priority,omitempty"`
	MaxRetries int    `json:"max_retries,omitempty"`
	// Preemptible leases run on capacity reserved for later and give it back (on_preempt
	// shrink, the default, or end).
	Preemptible bool   `json:"preemptible,omitempty"`
	OnPreempt   string `json:"on_preempt,omitempty"`
}

// LeaseUpdate changes a lease; empty fields are left as they are. Reservations name the
// reservation to change by "id".
type LeaseUpdate struct {
	Name            string           `json:"name,omitempty"`
	StartDate       string           `json:"start_date,omitempty"`
	EndDate         string           `json:"end_date,omitempty"`
	BeforeEndDate   string           `json:"before_end_date,omitempty"`
	BeforeStartDate string           `json:"before_start_date,omitempty"` // Climate's extension
	Reservations    []map[string]any `json:"reservations,omitempty"`
}

// Allocation lists the reservations holding one host.
type Allocation struct {
	ResourceID string `json:"resource_id"`
	// ResourceName is Climate's extension: the host's hypervisor hostname.
	ResourceName string                 `json:"resource_name,omitempty"`
	Reservations []AllocatedReservation `json:"reservations"`
}

// AllocatedReservation is a reservation holding a host over a window.
type AllocatedReservation struct {
	ID        string `json:"id"`
	LeaseID   string `json:"lease_id"`
	StartDate string `json:"start_date"`
	EndDate   string `json:"end_date"`
	// Slots is Climate's extension: the instance slots the reservation holds on the host
	// (absent when it holds the whole host).
	Slots int `json:"slots,omitempty"`
}

// Link is a link in a list answer: rel "next" is the next page of a paged list.
type Link struct {
	Rel  string `json:"rel"`
	Href string `json:"href"`
}

// Property is a host property (extra capability) known to the server.
type Property struct {
	Name    string   `json:"property"`
	Private *bool    `json:"private,omitempty"`
	Values  []string `json:"values,omitempty"`
}

// Slot is a window and how many matching hosts are free in it (availability extensions).
type Slot struct {
	StartDate string `json:"start_date"`
	EndDate   string `json:"end_date"`
	FreeHosts int    `json:"free_hosts"`
	// In a timeline asked for them (Climate's extension): instance slots of the asked
	// size and floating IPs of the asked network free for the whole bucket.
	FreeSlots       *int `json:"free_slots,omitempty"`
	FreeFloatingIPs *int `json:"free_floatingips,omitempty"`
}

// Timeline is the answer of GET /v1/availability/timeline.
type Timeline struct {
	MatchingHosts int    `json:"matching_hosts"`
	Timeline      []Slot `json:"timeline"`
}

// Error is the body of every error answer.
type Error struct {
	Code    int    `json:"error_code"`
	Message string `json:"error_message"`
	Name    string `json:"error_name"`
}

// Host is a compute host. On the wire its extra capabilities are flattened among the
// standard fields, as Blazar does; Extra holds them here.
type Host struct {
	ID                 string
	HypervisorHostname string
	ServiceName        string
	VCPUs              int
	MemoryMB           int
	LocalGB            int
	CPUInfo            string
	HypervisorType     string
	HypervisorVersion  int
	AvailabilityZone   string
	TrustID            string
	Reservable         bool
	CreatedAt          string
	UpdatedAt          *string
	// PowerState, PowerStateChangedAt and PoweredOffHours are Climate's extension, on
	// the wire only once power management has recorded the host's state.
	PowerState          string
	PowerStateChangedAt string
	PoweredOffHours     float64
	Extra               map[string]string
}

// hostPowerFields are the wire names of the power extension, written after hostFields.
var hostPowerFields = []string{"power_state", "power_state_changed_at", "powered_off_hours"}

// hostFields are the wire names of Host's standard fields, in the order they are written.
var hostFields = []string{"id", "hypervisor_hostname", "service_name", "vcpus", "memory_mb", "local_gb",
	"cpu_info", "hypervisor_type", "hypervisor_version", "availability_zone", "trust_id",
	"reservable", "status", "created_at", "updated_at"}

// MarshalJSON writes the flattened wire object: the standard fields in a fixed order, then
// the extra capabilities by name.
func (h Host) MarshalJSON() ([]byte, error) {
	std := []any{h.ID, h.HypervisorHostname, h.ServiceName, h.VCPUs, h.MemoryMB, h.LocalGB,
		h.CPUInfo, h.HypervisorType, h.HypervisorVersion, h.AvailabilityZone, h.TrustID,
		h.Reservable, nil, h.CreatedAt, h.UpdatedAt}
	var b bytes.Buffer
	b.WriteByte('{')
	write := func(k string, v any) error {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		vb, err := json.Marshal(v)
		b.Write(kb)
		b.WriteByte(':')
		b.Write(vb)
		return err
	}
	for i, k := range hostFields {
		if err := write(k, std[i]); err != nil {
			return nil, err
		}
	}
	if h.PowerState != "" {
		for i, v := range []any{h.PowerState, h.PowerStateChangedAt, h.PoweredOffHours} {
			if err := write(hostPowerFields[i], v); err != nil {
				return nil, err
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(h.Extra)) {
		if err := write(k, h.Extra[k]); err != nil {
			return nil, err
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON reads the flattened wire object; unknown keys become Extra.
func (h *Host) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	*h = Host{Extra: map[string]string{}}
	fields := map[string]any{
		"id": &h.ID, "hypervisor_hostname": &h.HypervisorHostname, "service_name": &h.ServiceName,
		"vcpus": &h.VCPUs, "memory_mb": &h.MemoryMB, "local_gb": &h.LocalGB, "cpu_info": &h.CPUInfo,
		"hypervisor_type": &h.HypervisorType, "hypervisor_version": &h.HypervisorVersion,
		"availability_zone": &h.AvailabilityZone, "trust_id": &h.TrustID, "reservable": &h.Reservable,
		"created_at": &h.CreatedAt, "updated_at": &h.UpdatedAt,
		"power_state": &h.PowerState, "power_state_changed_at": &h.PowerStateChangedAt, "powered_off_hours": &h.PoweredOffHours,
	}
	for k, raw := range m {
		if k == "status" {
			continue
		}
		if dst, ok := fields[k]; ok {
			if string(raw) == "null" {
				continue
			}
			if err := json.Unmarshal(raw, dst); err != nil {
				return fmt.Errorf("host field %s: %v", k, err)
			}
			continue
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			s = string(raw) // a number or boolean written without quotes
		}
		h.Extra[k] = s
	}
	return nil
}

// Hours renders a duration in hours, to the hundredth (36 s).
func Hours(d time.Duration) float64 { return math.Round(d.Hours()*100) / 100 }

// FormatTime writes a lease date or event time (oslo's PERFECT_TIME_FORMAT, UTC).
func FormatTime(t time.Time) string { return t.UTC().Format(TimeFormat) }

// FormatCreated formats a created_at or updated_at like Python's isoformat(' '): microseconds only when non-zero.
func FormatCreated(t time.Time) string {
	t = t.UTC()
	if t.Nanosecond()/1000 != 0 {
		return t.Format("2006-01-02 15:04:05.000000")
	}
	return t.Format("2006-01-02 15:04:05")
}

// FormatUpdated renders an updated_at: null when never set.
func FormatUpdated(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := FormatCreated(t)
	return &s
}

// LeaseOf is a lease as the API shows it (and notifications carry it).
func LeaseOf(l *climate.Lease) Lease {
	out := Lease{
		ID: l.ID, Name: l.Name, StartDate: FormatTime(l.Start), EndDate: FormatTime(l.End),
		Status: string(l.Status), Degraded: l.Degraded, UserID: l.UserID, ProjectID: l.ProjectID,
		TrustID: l.TrustID, CreatedAt: FormatCreated(l.CreatedAt), UpdatedAt: FormatUpdated(l.UpdatedAt),
		Reservations: make([]Reservation, 0, len(l.Reservations)),
		Events:       make([]Event, 0, len(l.Events)),
		LeaseType:    string(l.Type), Priority: l.Priority, MaxRetries: l.MaxRetries, Retries: l.Retries,
		Preemptible: l.Preemptible, OnPreempt: string(l.OnPreempt),
	}
	if !l.RetryUntil.IsZero() {
		until := FormatTime(l.RetryUntil)
		out.RetryUntil = &until
	}
	if l.Cost != nil {
		c := round(*l.Cost)
		out.Cost = &c
	}
	for _, r := range l.Reservations {
		out.Reservations = append(out.Reservations, Reservation{
			ID: r.ID, LeaseID: r.LeaseID, ResourceID: r.ID, ResourceType: r.ResourceType,
			Status: string(r.Status), MissingResources: r.MissingResources, ResourcesChanged: r.ResourcesChanged,
			CreatedAt: FormatCreated(r.CreatedAt), UpdatedAt: FormatUpdated(r.UpdatedAt),
			Fields: builtin.Fields(&r),
		})
	}
	// Events in time order (the store keeps them in no order): at one instant, as the
	// engine runs them (eventOrder).
	events := slices.Clone(l.Events)
	slices.SortStableFunc(events, func(a, b climate.Event) int {
		if c := a.Time.Compare(b.Time); c != 0 {
			return c
		}
		return cmp.Compare(eventOrder(a.Type), eventOrder(b.Type))
	})
	for _, e := range events {
		out.Events = append(out.Events, Event{
			ID: e.ID, LeaseID: e.LeaseID, EventType: string(e.Type), Time: FormatTime(e.Time),
			Status: string(e.Status), CreatedAt: FormatCreated(e.CreatedAt), UpdatedAt: FormatUpdated(e.UpdatedAt),
		})
	}
	return out
}

// NameResources fills out's Hosts and FloatingIPs, l's reservations' resources by name
// (hosts and addresses map their ids to names; an id in neither is shown as it is, under
// hosts), each once, in name order.
func NameResources(out *Lease, l *climate.Lease, hosts, addresses map[string]string) {
	for i, r := range l.Reservations {
		if i >= len(out.Reservations) {
			return
		}
		o := &out.Reservations[i]
		o.Hosts, o.FloatingIPs = nil, nil
		for _, a := range r.Allocations {
			if addr, ok := addresses[a.ResourceID]; ok {
				o.FloatingIPs = appendOnce(o.FloatingIPs, addr)
			} else if name, ok := hosts[a.ResourceID]; ok {
				o.Hosts = appendOnce(o.Hosts, name)
			} else {
				o.Hosts = appendOnce(o.Hosts, a.ResourceID)
			}
		}
		slices.Sort(o.Hosts) // one order whether the allocations come from a plan or the store
		slices.Sort(o.FloatingIPs)
	}
}

func appendOnce(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// eventOrder ranks event types that share an instant: a heads-up before the start, the
// start before what follows it, the end last.
func eventOrder(t climate.EventType) int {
	switch t {
	case climate.EventBeforeStartLease:
		return 0
	case climate.EventStartLease:
		return 1
	case climate.EventEndLease, climate.EventRetryDeadline:
		return 3
	}
	return 2
}
