package api

import "climate"

// Maintenance is a host's maintenance window as the API shows it (Climate's extension):
// GET/POST /v1/os-hosts/{host_id}/maintenances. Start and end are written as lease dates;
// end is null for a window until further notice.
type Maintenance struct {
	ID        string  `json:"id"`
	HostID    string  `json:"host_id"`
	Start     string  `json:"start"`
	End       *string `json:"end"`
	Reason    string  `json:"reason"`
	CreatedAt string  `json:"created_at"`
}

// MaintenanceRequest takes a host out of service: POST /v1/os-hosts/{host_id}/maintenances.
// Start is a date or "now"; End a date, or nil (null) for until further notice.
type MaintenanceRequest struct {
	Start  string  `json:"start"`
	End    *string `json:"end"`
	Reason string  `json:"reason,omitempty"`
}

// Healing is what adding a window did to one reservation holding the host then: outcome
// replanned (moved before its start), replaced (given other hosts for the rest of its
// window), degraded (no replacement: flagged missing_resources), recovered (flags
// cleared) or skipped (its lease was changing; healed by the next window change).
type Healing struct {
	LeaseID       string   `json:"lease_id"`
	ReservationID string   `json:"reservation_id"`
	Outcome       string   `json:"outcome"`
	Down          []string `json:"down"`
	Hosts         []string `json:"hosts"`
	Detail        string   `json:"detail,omitempty"`
}

// MaintenanceOf is a window as the API shows it.
func MaintenanceOf(m *climate.Maintenance) Maintenance {
	out := Maintenance{ID: m.ID, HostID: m.HostID, Start: FormatTime(m.Start), Reason: m.Reason, CreatedAt: FormatCreated(m.CreatedAt)}
	if !m.UntilFurtherNotice() {
		end := FormatTime(m.End)
		out.End = &end
	}
	return out
}

// HealingOf lists healing outcomes as the API shows them ([] when none).
func HealingOf(hs []climate.Healing) []Healing {
	out := make([]Healing, 0, len(hs))
	for _, h := range hs {
		out = append(out, Healing{LeaseID: h.LeaseID, ReservationID: h.ReservationID, Outcome: string(h.Outcome),
			Down: nonNil(h.Down), Hosts: nonNil(h.Hosts), Detail: h.Detail})
	}
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
