package http

import (
	"encoding/json"
	"maps"
	"net/http"
	"slices"

	"climate"
	"climate/http/api"
)

// Flavors (Climate's extension, standalone mode: Nova's flavors, kept by Climate): GET/POST
// /v1/flavors, GET/DELETE /v1/flavors/{id}. Bodies are shaped as Nova's.

var flavorKeys = []string{"id", "name", "vcpus", "ram", "disk", api.EphemeralKey, "ephemeral", "extra_specs"}

func decodeFlavorRequest(o object) (climate.FlavorRequest, error) {
	var req climate.FlavorRequest
	if err := o.only("a flavor", flavorKeys...); err != nil {
		return req, err
	}
	for _, f := range []struct {
		key string
		dst *string
	}{{"id", &req.ID}, {"name", &req.Name}} {
		s, err := o.str(f.key)
		if err != nil {
			return req, err
		}
		if s != nil {
			*f.dst = *s
		}
	}
	if req.Name == "" {
		return req, climate.Errorf(climate.CodeInvalid, "Missing parameter name")
	}
	// vcpus, ram and disk are required, as in Nova; the ephemeral disk is 0 unless given,
	// under Nova's key or the plain one (not both).
	ephemeralKey := api.EphemeralKey
	if _, ok := o["ephemeral"]; ok {
		if _, both := o[api.EphemeralKey]; both {
			return req, climate.Errorf(climate.CodeInvalid, "Malformed parameter ephemeral: give %s or ephemeral, not both", api.EphemeralKey)
		}
		ephemeralKey = "ephemeral"
	}
	for _, f := range []struct {
		key      string
		dst      *int
		required bool
	}{{"vcpus", &req.VCPUs, true}, {"ram", &req.RAM, true}, {"disk", &req.Disk, true}, {ephemeralKey, &req.Ephemeral, false}} {
		n, err := o.integer(f.key)
		if err != nil {
			return req, err
		}
		switch {
		case n != nil:
			*f.dst = *n
		case f.required:
			return req, climate.Errorf(climate.CodeInvalid, "Missing parameter %s", f.key)
		}
	}
	specs, err := o.stringMap("extra_specs")
	if err != nil {
		return req, err
	}
	req.ExtraSpecs = specs
	return req, nil
}

// stringMap returns a field holding an object of strings; absent or null gives nil.
func (o object) stringMap(key string) (map[string]string, error) {
	raw, ok := o[key]
	if !ok || isNull(raw) {
		return nil, nil
	}
	var values map[string]json.RawMessage
	if err := json.Unmarshal(raw, &values); err != nil || values == nil {
		return nil, malformed(key, "an object whose values are strings")
	}
	out := make(map[string]string, len(values))
	for _, k := range slices.Sorted(maps.Keys(values)) { // the first bad one, the same every time
		var s string
		if err := json.Unmarshal(values[k], &s); err != nil || isNull(values[k]) {
			return nil, climate.Errorf(climate.CodeInvalid, "Malformed parameter %s: the value of %q must be a string", key, k)
		}
		out[k] = s
	}
	return out, nil
}

func (s *Server) createFlavor(r *http.Request, who climate.Identity) (int, any, error) {
	o, err := readObject(r)
	if err != nil {
		return 0, nil, err
	}
	req, err := decodeFlavorRequest(o)
	if err != nil {
		return 0, nil, err
	}
	f, err := s.Flavors.CreateFlavor(r.Context(), who, req)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, map[string]any{"flavor": api.FlavorOf(f)}, nil
}

func (s *Server) listFlavors(r *http.Request, who climate.Identity) (int, any, error) {
	fs, err := s.Flavors.ListFlavors(r.Context(), who)
	if err != nil {
		return 0, nil, err
	}
	out := make([]api.Flavor, 0, len(fs))
	for i := range fs {
		out = append(out, api.FlavorOf(&fs[i]))
	}
	return http.StatusOK, map[string]any{"flavors": out}, nil
}

func (s *Server) getFlavor(r *http.Request, who climate.Identity) (int, any, error) {
	f, err := s.Flavors.GetFlavor(r.Context(), who, r.PathValue("id"))
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, map[string]any{"flavor": api.FlavorOf(f)}, nil
}

func (s *Server) deleteFlavor(r *http.Request, who climate.Identity) (int, any, error) {
	return http.StatusNoContent, nil, s.Flavors.DeleteFlavor(r.Context(), who, r.PathValue("id"))
}
