package http

import (
	"net/http"

	"climate"
	"climate/http/api"
)

// The audit trail (Climate's extension): GET /v1/audit, admins only. It is read-only:
// entries are written by the changes themselves, in their transactions; any other
// method answers 405.

// audit is the service for the route: Server.Audit, or the hosts' service when it
// offers it (the manager does).
func (s *Server) audit() climate.AuditService {
	if s.Audit != nil {
		return s.Audit
	}
	as, _ := s.Hosts.(climate.AuditService)
	return as
}

func (s *Server) listAudit(r *http.Request, who climate.Identity) (int, any, error) {
	p := newParams(r, "lease_id", "host_id", "project_id", "since", "until", "limit", "marker")
	q := climate.AuditQuery{LeaseID: p.str("lease_id"), HostID: p.str("host_id"), ProjectID: p.str("project_id"),
		Since: p.time("since"), Until: p.time("until")}
	if p.err != nil {
		return 0, nil, p.err
	}
	var err error
	if q.Limit, q.Marker, err = listParams(r.URL.Query()); err != nil {
		return 0, nil, err
	}
	return list(r, "audit", q.Limit, func(emit func(any, string) error) (bool, error) {
		return s.audit().ListAudit(r.Context(), who, q, func(batch []climate.AuditEntry) error {
			for i := range batch {
				e := api.AuditEntryOf(&batch[i])
				if err := emit(e, e.ID); err != nil {
					return err
				}
			}
			return nil
		})
	})
}
