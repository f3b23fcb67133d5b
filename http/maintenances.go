package http

import (
	"net/http"

	"climate"
	"climate/http/api"
)

// Maintenance windows (Climate's extension on os-hosts): GET /v1/os-hosts/maintenances
// (every host's), GET/POST /v1/os-hosts/{id}/maintenances, GET/DELETE
// /v1/os-hosts/{id}/maintenances/{mid}. A POST answers the window and what healing did
// to the reservations holding the host then.

// maintenances is the service for the routes: Server.Maintenances, or the hosts' service
// when it offers them (the manager does).
func (s *Server) maintenances() climate.MaintenanceService {
	if s.Maintenances != nil {
		return s.Maintenances
	}
	ms, _ := s.Hosts.(climate.MaintenanceService)
	return ms
}

func decodeMaintenanceRequest(o object) (climate.MaintenanceRequest, error) {
	var req climate.MaintenanceRequest
	if err := o.only("a maintenance window", "start", "end", "reason"); err != nil {
		return req, err
	}
	var err error
	if req.Start, err = o.date("start"); err != nil {
		return req, err
	}
	if req.End, err = o.date("end"); err != nil {
		return req, err
	}
	reason, err := o.str("reason")
	if err != nil {
		return req, err
	}
	if reason != nil {
		req.Reason = *reason
	}
	return req, nil
}

func (s *Server) createMaintenance(r *http.Request, who climate.Identity) (int, any, error) {
	o, err := readObject(r)
	if err != nil {
		return 0, nil, err
	}
	req, err := decodeMaintenanceRequest(o)
	if err != nil {
		return 0, nil, err
	}
	m, healed, err := s.maintenances().CreateMaintenance(r.Context(), who, r.PathValue("id"), req)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, map[string]any{"maintenance": api.MaintenanceOf(m), "healing": api.HealingOf(healed)}, nil
}

func (s *Server) listMaintenances(r *http.Request, who climate.Identity) (int, any, error) {
	ms, err := s.maintenances().ListMaintenances(r.Context(), who, r.PathValue("id"))
	if err != nil {
		return 0, nil, err
	}
	out := make([]api.Maintenance, 0, len(ms))
	for i := range ms {
		out = append(out, api.MaintenanceOf(&ms[i]))
	}
	return http.StatusOK, map[string]any{"maintenances": out}, nil
}

func (s *Server) getMaintenance(r *http.Request, who climate.Identity) (int, any, error) {
	m, err := s.maintenances().GetMaintenance(r.Context(), who, r.PathValue("id"), r.PathValue("mid"))
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, map[string]any{"maintenance": api.MaintenanceOf(m)}, nil
}

func (s *Server) deleteMaintenance(r *http.Request, who climate.Identity) (int, any, error) {
	_, err := s.maintenances().DeleteMaintenance(r.Context(), who, r.PathValue("id"), r.PathValue("mid"))
	return http.StatusNoContent, nil, err
}
