package openstack

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/gophercloud/gophercloud/v2"
)

// fakeNova is a fake of the part of Nova's compute API the driver uses (aggregates,
// servers by host), written to Nova's API reference, with its error bodies: only for unit
// tests of the driver's logic (the real Nova is in cmd/climate's integration test).
type fakeNova struct {
	t      *testing.T
	mu     sync.Mutex
	aggs   map[int]*fakeAgg
	nextID int
	// servers by id; host and project of each.
	servers map[string]fakeServer
	// deleting lists servers asked to be deleted: each goes after lingering more lists.
	deleting map[string]int
	linger   int  // lists a deleted server still shows
	stuck    bool // deleted servers never go
	// fail answers the next n requests whose "METHOD path" has this prefix with status.
	fail []fakeFailure
	// calls counts requests by "METHOD path".
	calls map[string]int
	// hypervisors are the names of the compute hosts (hypervisor and service alike);
	// down and disabled say which are so.
	hypervisors    []string
	down, disabled map[string]bool
}

type fakeAgg struct {
	ID       int               `json:"id"`
	Name     string            `json:"name"`
	AZ       *string           `json:"availability_zone"`
	Hosts    []string          `json:"hosts"`
	Metadata map[string]string `json:"metadata"`
}

type fakeServer struct{ host, project string }

type fakeFailure struct {
	prefix string
	n      int
	status int
	body   string
}

func newFakeNova(t *testing.T) (*fakeNova, *gophercloud.ServiceClient) {
	f := &fakeNova{t: t, aggs: map[int]*fakeAgg{}, nextID: 1, servers: map[string]fakeServer{}, deleting: map[string]int{}, calls: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(srv.Close)
	provider := &gophercloud.ProviderClient{HTTPClient: http.Client{}}
	provider.SetToken("fake-token")
	return f, &gophercloud.ServiceClient{ProviderClient: provider, Endpoint: srv.URL + "/v2.1/", Type: "compute"}
}

// aggregate adds an aggregate (as the operator would) and returns its id.
func (f *fakeNova) aggregate(name string, hosts ...string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := f.nextID
	f.nextID++
	f.aggs[id] = &fakeAgg{ID: id, Name: name, Hosts: hosts, Metadata: map[string]string{}}
	return id
}

// byName returns a copy of the aggregate named name, or nil.
func (f *fakeNova) byName(name string) *fakeAgg {
	f.mu.Lock()
	defer f.mu.Unlock()
	var found *fakeAgg
	for _, a := range f.aggs {
		if a.Name == name {
			if found != nil {
				f.t.Errorf("two aggregates named %s", name)
			}
			c := *a
			c.Hosts = slices.Clone(a.Hosts)
			found = &c
		}
	}
	return found
}

func (f *fakeNova) count(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[key]
}

func (f *fakeNova) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	path := strings.TrimPrefix(r.URL.Path, "/v2.1")
	key := r.Method + " " + path
	f.calls[key]++
	for i := range f.fail {
		if fl := &f.fail[i]; fl.n > 0 && strings.HasPrefix(key, fl.prefix) {
			fl.n--
			w.WriteHeader(fl.status)
			fmt.Fprint(w, fl.body)
			return
		}
	}
	var body map[string]map[string]any
	if r.Body != nil {
		_ = json.NewDecoder(r.Body).Decode(&body)
	}
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case key == "GET /os-aggregates":
		list := []*fakeAgg{}
		for id := 1; id < f.nextID; id++ {
			if a, ok := f.aggs[id]; ok {
				list = append(list, f.shown(a))
			}
		}
		reply(w, 200, map[string]any{"aggregates": list})
	case key == "POST /os-aggregates":
		name, _ := body["aggregate"]["name"].(string)
		for _, a := range f.aggs {
			if a.Name == name {
				novaError(w, 409, "conflictingRequest", fmt.Sprintf("Aggregate %s already exists.", name))
				return
			}
		}
		a := &fakeAgg{ID: f.nextID, Name: name, Metadata: map[string]string{}}
		if az, ok := body["aggregate"]["availability_zone"].(string); ok && az != "" {
			a.Metadata["availability_zone"] = az
		}
		f.aggs[a.ID] = a
		f.nextID++
		reply(w, 200, map[string]any{"aggregate": f.shown(a)})
	case parts[0] == "os-aggregates" && len(parts) >= 2:
		id, _ := strconv.Atoi(parts[1])
		a, ok := f.aggs[id]
		if !ok {
			novaError(w, 404, "itemNotFound", fmt.Sprintf("Aggregate %d could not be found.", id))
			return
		}
		switch {
		case r.Method == "DELETE":
			if len(a.Hosts) > 0 {
				novaError(w, 400, "badRequest", fmt.Sprintf("Cannot remove aggregate %d. Reason: Host aggregate is not empty.", id))
				return
			}
			delete(f.aggs, id)
			w.WriteHeader(200)
		case body["add_host"] != nil:
			h := body["add_host"]["host"].(string)
			if slices.Contains(a.Hosts, h) {
				novaError(w, 409, "conflictingRequest", fmt.Sprintf("Cannot add host to aggregate %d. Reason: Aggregate %d already has host %s.", id, id, h))
				return
			}
			a.Hosts = append(a.Hosts, h)
			reply(w, 200, map[string]any{"aggregate": f.shown(a)})
		case body["remove_host"] != nil:
			h := body["remove_host"]["host"].(string)
			i := slices.Index(a.Hosts, h)
			if i < 0 {
				novaError(w, 404, "itemNotFound", fmt.Sprintf("Cannot remove host %s in aggregate %d", h, id))
				return
			}
			a.Hosts = slices.Delete(a.Hosts, i, i+1)
			reply(w, 200, map[string]any{"aggregate": f.shown(a)})
		case body["set_metadata"] != nil:
			for k, v := range body["set_metadata"]["metadata"].(map[string]any) {
				a.Metadata[k] = v.(string)
			}
			reply(w, 200, map[string]any{"aggregate": f.shown(a)})
		default:
			novaError(w, 400, "badRequest", "unknown aggregate action")
		}
	case key == "GET /os-hypervisors/detail":
		list := []map[string]any{}
		for i, h := range f.hypervisors {
			state, status := "up", "enabled"
			if f.down[h] {
				state = "down"
			}
			if f.disabled[h] {
				status = "disabled"
			}
			list = append(list, map[string]any{"id": i + 1, "hypervisor_hostname": h, "state": state, "status": status, "vcpus": 1000, "memory_mb": 800000, "local_gb": 600000,
				"cpu_info": `{"arch": "x86_64"}`, "hypervisor_type": "fake", "hypervisor_version": 1000, "service": map[string]any{"host": h, "id": i + 10}})
		}
		reply(w, 200, map[string]any{"hypervisors": list})
	case key == "GET /os-availability-zone/detail":
		hosts := map[string]any{}
		for _, h := range f.hypervisors {
			hosts[h] = map[string]any{"nova-compute": map[string]any{"available": true, "active": true, "updated_at": nil}}
		}
		reply(w, 200, map[string]any{"availabilityZoneInfo": []any{
			map[string]any{"zoneName": "internal", "zoneState": map[string]any{"available": true}, "hosts": map[string]any{"ctl": map[string]any{}}},
			map[string]any{"zoneName": "nova", "zoneState": map[string]any{"available": true}, "hosts": hosts}}})
	case key == "GET /servers/detail":
		q := r.URL.Query()
		if q.Get("all_tenants") == "" {
			novaError(w, 400, "badRequest", "the driver must list all projects' servers")
			return
		}
		list := []map[string]any{}
		for _, id := range slices.Sorted(maps.Keys(f.servers)) {
			s := f.servers[id]
			if s.host != q.Get("host") {
				continue
			}
			if n, ok := f.deleting[id]; ok && !f.stuck {
				if n >= f.linger {
					delete(f.servers, id)
					continue
				}
				f.deleting[id] = n + 1
			}
			list = append(list, map[string]any{"id": id, "name": id, "status": "ACTIVE", "tenant_id": s.project, "OS-EXT-SRV-ATTR:host": s.host})
		}
		reply(w, 200, map[string]any{"servers": list})
	case r.Method == "DELETE" && parts[0] == "servers" && len(parts) == 2:
		if _, ok := f.servers[parts[1]]; !ok {
			novaError(w, 404, "itemNotFound", "Instance "+parts[1]+" could not be found.")
			return
		}
		if _, ok := f.deleting[parts[1]]; !ok {
			f.deleting[parts[1]] = 0
		}
		w.WriteHeader(204)
	default:
		novaError(w, 404, "itemNotFound", "no such route in the fake: "+key)
	}
}

// shown is a's wire form: Nova shows the zone both as a field and in the metadata.
func (f *fakeNova) shown(a *fakeAgg) *fakeAgg {
	c := *a
	if az, ok := a.Metadata["availability_zone"]; ok {
		c.AZ = &az
	}
	c.Hosts = slices.Clone(a.Hosts)
	if c.Hosts == nil {
		c.Hosts = []string{}
	}
	return &c
}

func reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// novaError answers as Nova does: {"<kind>": {"code": status, "message": msg}}.
func novaError(w http.ResponseWriter, status int, kind, msg string) {
	reply(w, status, map[string]any{kind: map[string]any{"code": status, "message": msg}})
}
