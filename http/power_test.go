package http_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"climate"
	"climate/http/client"
)

// A host's power state shows in its API object (Climate's extension) once power
// management has recorded one, with the hours it spent powered off as of the request;
// clients cannot set it.
func TestHostShowsPowerState(t *testing.T) {
	e := newEnv(t, nil)
	created := e.mustDo(call{method: "POST", path: "/v1/os-hosts", body: `{"name": "compute-1"}`}, http.StatusCreated)
	id := created["host"].(map[string]any)["id"].(string)
	host := func() map[string]any {
		return e.mustDo(call{method: "GET", path: "/v1/os-hosts/" + id}, http.StatusOK)["host"].(map[string]any)
	}
	for _, k := range []string{"power_state", "power_state_changed_at", "powered_off_hours"} {
		if v, ok := host()[k]; ok {
			t.Errorf("before power management: %s = %v, want no such key", k, v)
		}
	}

	err := e.store.Update(context.Background(), func(tx climate.Tx) error {
		return tx.SetHostPower(context.Background(), &climate.HostPower{HostID: id, State: climate.PowerOff, ChangedAt: t0, OffBefore: 30 * time.Minute})
	})
	if err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(90 * time.Minute)
	h := host()
	if h["power_state"] != "off" || h["power_state_changed_at"] != "2026-11-21 10:00:00" || h["powered_off_hours"] != 2.0 {
		t.Errorf("host %v: want off since 10:00, 2 hours off in all", h)
	}
	list := e.mustDo(call{method: "GET", path: "/v1/os-hosts"}, http.StatusOK)["hosts"].([]any)
	if l := list[0].(map[string]any); l["power_state"] != "off" || l["powered_off_hours"] != 2.0 {
		t.Errorf("listed host %v: want its power state", l)
	}

	c, err := client.New(e.url, "")
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.GetHost(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if got.PowerState != "off" || got.PowerStateChangedAt != "2026-11-21 10:00:00" || got.PoweredOffHours != 2 || len(got.Extra) != 0 {
		t.Errorf("client's host %+v: want the power fields decoded, not as extra capabilities", got)
	}

	for _, k := range []string{"power_state", "powered_off_hours"} {
		r := e.do(call{method: "PUT", path: "/v1/os-hosts/" + id, body: `{"` + k + `": "on"}`})
		if r.status != http.StatusBadRequest {
			t.Errorf("PUT %s: %s, want 400", k, r)
		}
	}
}
