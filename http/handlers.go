package http

import (
	"cmp"
	"context"
	"net/http"

	"climate"
	"climate/http/api"
)

func (s *Server) listLeases(r *http.Request, who climate.Identity) (int, any, error) {
	q, err := leaseQueryOf(r)
	if err != nil {
		return 0, nil, err
	}
	return list(r, "leases", q.Limit, func(emit func(any, string) error) (bool, error) {
		return s.Leases.ListLeases(r.Context(), who, q, func(batch []climate.Lease) error {
			for i, l := range s.leasesJSON(r, batch) {
				if err := emit(l, batch[i].ID); err != nil {
					return err
				}
			}
			return nil
		})
	})
}

func (s *Server) createLease(r *http.Request, who climate.Identity) (int, any, error) {
	o, err := readObject(r)
	if err != nil {
		return 0, nil, err
	}
	req, err := decodeLeaseRequest(o)
	if err != nil {
		return 0, nil, err
	}
	l, err := s.Leases.CreateLease(r.Context(), who, req)
	if err != nil {
		return 0, nil, err
	}
	if req.DryRun {
		return http.StatusOK, map[string]any{"lease": s.leaseJSON(r, l), "dry_run": true}, nil
	}
	return http.StatusCreated, map[string]any{"lease": s.leaseJSON(r, l)}, nil
}

func (s *Server) getLease(r *http.Request, who climate.Identity) (int, any, error) {
	l, err := s.Leases.GetLease(r.Context(), who, r.PathValue("id"))
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, map[string]any{"lease": s.leaseJSON(r, l)}, nil
}

// resourceNamer names hosts and floating IPs by id (the manager does).
type resourceNamer interface {
	ResourceNames(ctx context.Context, ids []string) (hosts, addresses map[string]string, err error)
}

// leaseJSON is l as the API shows it (leasesJSON).
func (s *Server) leaseJSON(r *http.Request, l *climate.Lease) api.Lease {
	return s.leasesJSON(r, []climate.Lease{*l})[0]
}

// leasesJSON is leases as the API shows them, with the names of what their reservations
// hold when the lease service can tell them (Climate's extension; otherwise their ids):
// the names a lease carries from its plan, the others looked up once for all of them.
func (s *Server) leasesJSON(r *http.Request, leases []climate.Lease) []api.Lease {
	var ids []string
	for _, l := range leases {
		if l.Names != nil {
			continue
		}
		for _, res := range l.Reservations {
			for _, a := range res.Allocations {
				ids = append(ids, a.ResourceID)
			}
		}
	}
	looked := &climate.ResourceNames{Hosts: map[string]string{}, Addresses: map[string]string{}}
	if n, ok := s.Leases.(resourceNamer); ok && len(ids) > 0 {
		if h, a, err := n.ResourceNames(r.Context(), ids); err == nil {
			looked = &climate.ResourceNames{Hosts: h, Addresses: a}
		}
	}
	out := make([]api.Lease, len(leases))
	for i := range leases {
		out[i] = api.LeaseOf(&leases[i])
		names := cmp.Or(leases[i].Names, looked)
		api.NameResources(&out[i], &leases[i], names.Hosts, names.Addresses)
	}
	return out
}

func (s *Server) updateLease(r *http.Request, who climate.Identity) (int, any, error) {
	o, err := readObject(r)
	if err != nil {
		return 0, nil, err
	}
	u, err := decodeLeaseUpdate(o)
	if err != nil {
		return 0, nil, err
	}
	l, err := s.Leases.UpdateLease(r.Context(), who, r.PathValue("id"), u)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, map[string]any{"lease": s.leaseJSON(r, l)}, nil
}

func (s *Server) deleteLease(r *http.Request, who climate.Identity) (int, any, error) {
	return http.StatusNoContent, nil, s.Leases.DeleteLease(r.Context(), who, r.PathValue("id"))
}

func (s *Server) listHosts(r *http.Request, who climate.Identity) (int, any, error) {
	hosts, err := s.Hosts.ListHosts(r.Context(), who)
	if err != nil {
		return 0, nil, err
	}
	out := make([]map[string]any, 0, len(hosts))
	for i := range hosts {
		out = append(out, toHostJSON(&hosts[i], s.now()))
	}
	return http.StatusOK, map[string]any{"hosts": out}, nil
}

func (s *Server) createHost(r *http.Request, who climate.Identity) (int, any, error) {
	o, err := readObject(r)
	if err != nil {
		return 0, nil, err
	}
	fields, err := decodeHostFields(o)
	if err != nil {
		return 0, nil, err
	}
	h, err := s.Hosts.CreateHost(r.Context(), who, fields)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, map[string]any{"host": toHostJSON(h, s.now())}, nil
}

func (s *Server) getHost(r *http.Request, who climate.Identity) (int, any, error) {
	h, err := s.Hosts.GetHost(r.Context(), who, r.PathValue("id"))
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, map[string]any{"host": toHostJSON(h, s.now())}, nil
}

func (s *Server) updateHost(r *http.Request, who climate.Identity) (int, any, error) {
	o, err := readObject(r)
	if err != nil {
		return 0, nil, err
	}
	fields, err := decodeHostFields(o)
	if err != nil {
		return 0, nil, err
	}
	h, err := s.Hosts.UpdateHost(r.Context(), who, r.PathValue("id"), fields)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, map[string]any{"host": toHostJSON(h, s.now())}, nil
}

func (s *Server) deleteHost(r *http.Request, who climate.Identity) (int, any, error) {
	return http.StatusNoContent, nil, s.Hosts.DeleteHost(r.Context(), who, r.PathValue("id"))
}

type (
	allocationJSON      = api.Allocation
	allocatedReservJSON = api.AllocatedReservation
)

func toAllocationJSON(a climate.HostAllocation, names map[string]string) allocationJSON {
	out := allocationJSON{ResourceID: a.HostID, ResourceName: names[a.HostID], Reservations: make([]allocatedReservJSON, 0, len(a.Reservations))}
	for _, r := range a.Reservations {
		out.Reservations = append(out.Reservations, allocatedReservJSON{ID: r.ID, LeaseID: r.LeaseID, StartDate: api.FormatTime(r.Start), EndDate: api.FormatTime(r.End), Slots: r.Slots})
	}
	return out
}

func (s *Server) listAllocations(r *http.Request, who climate.Identity) (int, any, error) {
	q, err := allocationQueryOf(r)
	if err != nil {
		return 0, nil, err
	}
	return list(r, "allocations", q.Limit, func(emit func(any, string) error) (bool, error) {
		return s.Hosts.HostAllocations(r.Context(), who, q, func(batch []climate.HostAllocation) error {
			names := s.hostNames(r, batch)
			for _, a := range batch {
				if err := emit(toAllocationJSON(a, names), a.HostID); err != nil {
					return err
				}
			}
			return nil
		})
	})
}

func (s *Server) getAllocation(r *http.Request, who climate.Identity) (int, any, error) {
	q, err := allocationQueryOf(r)
	if err != nil {
		return 0, nil, err
	}
	q.HostID, q.Marker, q.Limit = r.PathValue("id"), "", 0
	var found []climate.HostAllocation
	_, err = s.Hosts.HostAllocations(r.Context(), who, q, func(batch []climate.HostAllocation) error {
		found = append(found, batch...)
		return nil
	})
	if err != nil {
		return 0, nil, err
	}
	if len(found) != 1 {
		return 0, nil, climate.Errorf(climate.CodeNotFound, "Object with {'host_id': '%s'} not found", r.PathValue("id"))
	}
	return http.StatusOK, map[string]any{"allocation": toAllocationJSON(found[0], s.hostNames(r, found))}, nil
}

// hostNames names the hosts of allocations, when the lease service can (resourceNamer).
func (s *Server) hostNames(r *http.Request, allocs []climate.HostAllocation) map[string]string {
	n, ok := s.Leases.(resourceNamer)
	if !ok || len(allocs) == 0 {
		return nil
	}
	ids := make([]string, len(allocs))
	for i, a := range allocs {
		ids[i] = a.HostID
	}
	hosts, _, err := n.ResourceNames(r.Context(), ids)
	if err != nil {
		return nil
	}
	return hosts
}

// truthy reads Blazar's query flags (?detail=True); unlike Blazar, "False" and "0" are false.
func truthy(v string) bool {
	switch v {
	case "", "0", "false", "False", "FALSE", "no", "off":
		return false
	}
	return true
}

func (s *Server) listProperties(r *http.Request, who climate.Identity) (int, any, error) {
	q := r.URL.Query()
	props, err := s.Hosts.ListHostProperties(r.Context(), who, truthy(q.Get("all")))
	if err != nil {
		return 0, nil, err
	}
	detail := truthy(q.Get("detail"))
	out := make([]map[string]any, 0, len(props))
	for _, p := range props {
		item := map[string]any{"property": p.Name}
		if detail {
			item["private"] = p.Private
			item["values"] = p.Values
		}
		out = append(out, item)
	}
	return http.StatusOK, map[string]any{"resource_properties": out}, nil
}

func (s *Server) setProperty(r *http.Request, who climate.Identity) (int, any, error) {
	o, err := readObject(r)
	if err != nil {
		return 0, nil, err
	}
	if err := o.only("a resource property update", "private"); err != nil {
		return 0, nil, err
	}
	raw, ok := o["private"]
	if !ok {
		return 0, nil, climate.Errorf(climate.CodeInvalid, "Missing parameter private")
	}
	var private bool
	switch string(raw) {
	case "true":
		private = true
	case "false":
	default:
		return 0, nil, malformed("private", "true or false")
	}
	p, err := s.Hosts.SetHostPropertyPrivate(r.Context(), who, r.PathValue("sub"), private)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, map[string]any{"resource_property": map[string]any{
		"id": p.ID, "resource_type": p.ResourceType, "property_name": p.Name, "private": p.Private,
		"created_at": api.FormatCreated(p.CreatedAt), "updated_at": api.FormatUpdated(p.UpdatedAt),
	}}, nil
}
