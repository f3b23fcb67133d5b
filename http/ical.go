package http

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"

	"climate"
	"climate/ical"
)

// rawBody is an answer that is not JSON: its bytes as they are, with their content type.
type rawBody struct {
	contentType, disposition string
	data                     []byte
}

// leasesCalendar answers GET /v1/leases.ics: the leases the caller may list (the same
// filters as GET /v1/leases) as an iCalendar file, one event per lease over its window.
func (s *Server) leasesCalendar(r *http.Request, who climate.Identity) (int, any, error) {
	q, err := leaseQueryOf(r)
	if err != nil {
		return 0, nil, err
	}
	var events []ical.Event
	_, err = s.Leases.ListLeases(r.Context(), who, q, func(batch []climate.Lease) error {
		for i := range batch {
			events = append(events, calendarEvent(&batch[i]))
		}
		return nil
	})
	if err != nil {
		return 0, nil, err
	}
	var b bytes.Buffer
	name := "Climate leases of project " + who.ProjectID
	if who.IsAdmin() && q.ProjectID == "" {
		name = "Climate leases"
	}
	if err := ical.Write(&b, "-//Climate//Leases//EN", name, events); err != nil {
		return 0, nil, err
	}
	return http.StatusOK, &rawBody{contentType: "text/calendar; charset=utf-8", disposition: `inline; filename="climate-leases.ics"`, data: b.Bytes()}, nil
}

// calendarEvent is a lease as a calendar event: its window, its name, what it holds.
// A lease still waiting or to start is tentative; one that never started and never will
// (it gave up or failed) is cancelled.
func calendarEvent(l *climate.Lease) ical.Event {
	var d strings.Builder
	fmt.Fprintf(&d, "Lease %s (%s), project %s.", l.ID, l.Status, l.ProjectID)
	for _, r := range l.Reservations {
		ids := make([]string, 0, len(r.Allocations))
		for _, a := range r.Allocations {
			ids = append(ids, a.ResourceID)
		}
		fmt.Fprintf(&d, "\n%s: %d held", r.ResourceType, len(ids))
		if len(ids) > 0 {
			fmt.Fprintf(&d, " (%s)", strings.Join(ids, ", "))
		}
	}
	status := "CONFIRMED"
	switch l.Status {
	case climate.LeasePending, climate.LeaseWaiting, climate.LeaseInProgress:
		status = "TENTATIVE"
	case climate.LeaseFailed, climate.LeaseTimedOut:
		status = "CANCELLED"
	}
	stamp := l.CreatedAt
	if !l.UpdatedAt.IsZero() {
		stamp = l.UpdatedAt
	}
	return ical.Event{UID: l.ID + "@climate", Start: l.Start, End: l.End, Summary: l.Name, Description: d.String(), Status: status, Stamp: stamp}
}
