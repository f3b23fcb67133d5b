package api

import (
	"time"

	"climate"
)

// Limits are a project's limits, budget and prices as the API shows them (Climate's
// extension): GET and PUT /v1/projects/{project_id}/limits, with what the project was
// charged and its open leases (booked, not over). Null limits do not bound;
// durations are seconds; prices are per resource-hour of each class (host, vcpu,
// floatingip), all of them shown, defaults included.
type Limits struct {
	ProjectID        string                    `json:"project_id"`
	MaxHosts         *int                      `json:"max_hosts"`
	MaxVCPUs         *int                      `json:"max_vcpus"`
	MaxFloatingIPs   *int                      `json:"max_floating_ips"`
	MaxLeases        *int                      `json:"max_leases"`
	MaxLeaseDuration *int64                    `json:"max_lease_duration"`
	MaxAdvance       *int64                    `json:"max_advance"`
	Budget           *float64                  `json:"budget"`
	Charged          float64                   `json:"charged"`
	OpenLeases       int                       `json:"open_leases"`
	Remaining        *float64                  `json:"remaining"`
	Prices           map[string]float64        `json:"prices"`
	Multipliers      []climate.PriceMultiplier `json:"multipliers"`
	Exempt           bool                      `json:"exempt"`
	UpdatedAt        *string                   `json:"updated_at"`
}

// LimitsOf is a project's account as the API shows it.
func LimitsOf(a *climate.ProjectAccount) Limits {
	l := a.Limits
	out := Limits{ProjectID: l.ProjectID, MaxHosts: l.MaxHosts, MaxVCPUs: l.MaxVCPUs, MaxFloatingIPs: l.MaxFloatingIPs,
		MaxLeases: l.MaxLeases, MaxLeaseDuration: seconds(l.MaxLeaseDuration), MaxAdvance: seconds(l.MaxAdvance),
		Budget: l.Budget, Charged: a.Charged, OpenLeases: a.OpenLeases, Prices: map[string]float64{}, Multipliers: l.Prices.Multipliers,
		Exempt: l.Exempt, UpdatedAt: FormatUpdated(l.UpdatedAt)}
	if out.Multipliers == nil {
		out.Multipliers = []climate.PriceMultiplier{}
	}
	for _, c := range climate.UsageClasses {
		out.Prices[c] = l.Prices.Price(c)
	}
	if l.Budget != nil {
		left := *l.Budget - a.Charged
		out.Remaining = &left
	}
	return out
}

func seconds(d *time.Duration) *int64 {
	if d == nil {
		return nil
	}
	s := int64(*d / time.Second)
	return &s
}

// Usage is one reservation's usage as the API shows it: GET /v1/usage. Hours are
// resource-hours of its class (host-hours, vCPU-hours, IP-hours) within the query's
// window; cost is what the hours held there cost; charged is what the reservation
// charges its project's budget now (its whole reserved window while open).
type Usage struct {
	ProjectID     string  `json:"project_id"`
	LeaseID       string  `json:"lease_id"`
	LeaseName     string  `json:"lease_name"`
	ReservationID string  `json:"reservation_id"`
	ResourceType  string  `json:"resource_type"`
	Class         string  `json:"class"`
	StartDate     string  `json:"start_date"`
	EndDate       string  `json:"end_date"`
	ReservedHours float64 `json:"reserved_hours"`
	HeldHours     float64 `json:"held_hours"`
	Cost          float64 `json:"cost"`
	Charged       float64 `json:"charged"`
	Status        string  `json:"status"`
}

// UsageOf is a reservation's usage as the API shows it.
func UsageOf(u *climate.ReservationUsage) Usage {
	st := "closed"
	if u.Open {
		st = "open"
	}
	return Usage{ProjectID: u.ProjectID, LeaseID: u.LeaseID, LeaseName: u.LeaseName, ReservationID: u.ReservationID,
		ResourceType: u.ResourceType, Class: u.Class, StartDate: FormatTime(u.Start), EndDate: FormatTime(u.End),
		ReservedHours: round(u.ReservedHours), HeldHours: round(u.HeldHours), Cost: round(u.Cost), Charged: round(u.Charged), Status: st}
}

// round keeps six decimals: figures summed from seconds need no more, and the noise of
// float sums goes.
func round(v float64) float64 {
	const scale = 1e6
	if v >= 0 {
		return float64(int64(v*scale+0.5)) / scale
	}
	return -float64(int64(-v*scale+0.5)) / scale
}
