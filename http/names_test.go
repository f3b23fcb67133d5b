package http_test

import (
	"context"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"

	"climate"
	"climate/manager"
)

// countingNamer is the manager, counting its name look-ups.
type countingNamer struct {
	*manager.Manager
	lookups atomic.Int64
}

func (c *countingNamer) ResourceNames(ctx context.Context, ids []string) (hosts, addresses map[string]string, err error) {
	c.lookups.Add(1)
	return c.Manager.ResourceNames(ctx, ids)
}

// A new lease's answer names its hosts from the inventory it was planned on, which its
// commit checked: no look-up (on PostgreSQL a round trip) after the commit. A lease read
// back is named by a look-up.
func TestCreatedLeaseNamesItsHostsFromItsPlan(t *testing.T) {
	namer := &countingNamer{}
	e := newEnvServing(t, nil, func(m *manager.Manager) climate.LeaseService {
		namer.Manager = m
		return namer
	})

	e.mustDo(call{method: "POST", path: "/v1/os-hosts", body: `{"name": "compute-1"}`}, http.StatusCreated)
	hostsOf := func(body map[string]any) []string {
		var names []string
		for _, h := range body["lease"].(map[string]any)["reservations"].([]any)[0].(map[string]any)["hosts"].([]any) {
			names = append(names, h.(string))
		}
		return names
	}
	created := e.mustDo(call{method: "POST", path: "/v1/leases", body: validLease, header: asAlice}, http.StatusCreated)
	if got := hostsOf(created); !slices.Equal(got, []string{"compute-1"}) || namer.lookups.Load() != 0 {
		t.Errorf("created lease holds hosts %v after %d look-ups; want [compute-1] named by its plan, no look-up", got, namer.lookups.Load())
	}
	id := created["lease"].(map[string]any)["id"].(string)
	read := e.mustDo(call{method: "GET", path: "/v1/leases/" + id, header: asAlice}, http.StatusOK)
	if got := hostsOf(read); !slices.Equal(got, []string{"compute-1"}) || namer.lookups.Load() != 1 {
		t.Errorf("lease read back holds hosts %v after %d look-ups; want [compute-1] from one look-up", got, namer.lookups.Load())
	}
}
