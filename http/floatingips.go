package http

import (
	"net/http"

	"climate"
	"climate/http/api"
)

// Floating IPs (Blazar's virtual:floatingip inventory): GET/POST /v1/floatingips,
// GET/DELETE /v1/floatingips/{id}.

var floatingIPKeys = []string{"floating_network_id", "floating_ip_address", "subnet_id"}

func decodeFloatingIPRequest(o object) (climate.FloatingIPRequest, error) {
	var req climate.FloatingIPRequest
	if err := o.only("a floating IP", floatingIPKeys...); err != nil {
		return req, err
	}
	for _, f := range []struct {
		key string
		dst *string
	}{{"floating_network_id", &req.FloatingNetworkID}, {"floating_ip_address", &req.Address}, {"subnet_id", &req.SubnetID}} {
		s, err := o.str(f.key)
		if err != nil {
			return req, err
		}
		if s != nil {
			*f.dst = *s
		}
	}
	return req, nil
}

func (s *Server) createFloatingIP(r *http.Request, who climate.Identity) (int, any, error) {
	o, err := readObject(r)
	if err != nil {
		return 0, nil, err
	}
	req, err := decodeFloatingIPRequest(o)
	if err != nil {
		return 0, nil, err
	}
	f, err := s.FloatingIPs.CreateFloatingIP(r.Context(), who, req)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, map[string]any{"floatingip": api.FloatingIPOf(f)}, nil
}

func (s *Server) listFloatingIPs(r *http.Request, who climate.Identity) (int, any, error) {
	fs, err := s.FloatingIPs.ListFloatingIPs(r.Context(), who)
	if err != nil {
		return 0, nil, err
	}
	out := make([]api.FloatingIP, 0, len(fs))
	for i := range fs {
		out = append(out, api.FloatingIPOf(&fs[i]))
	}
	return http.StatusOK, map[string]any{"floatingips": out}, nil
}

func (s *Server) getFloatingIP(r *http.Request, who climate.Identity) (int, any, error) {
	f, err := s.FloatingIPs.GetFloatingIP(r.Context(), who, r.PathValue("id"))
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, map[string]any{"floatingip": api.FloatingIPOf(f)}, nil
}

func (s *Server) deleteFloatingIP(r *http.Request, who climate.Identity) (int, any, error) {
	return http.StatusNoContent, nil, s.FloatingIPs.DeleteFloatingIP(r.Context(), who, r.PathValue("id"))
}
