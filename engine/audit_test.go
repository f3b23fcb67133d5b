package engine_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"climate"
)

// The engine's changes to a lease are in the audit trail as the service's, with their
// reason: a start that failed says why.
func TestEngineChangesAreAudited(t *testing.T) {
	h := newHarness(t, failingStart{})
	h.host("n1")
	l := h.lease("doomed", t0.Add(time.Minute), t0.Add(time.Hour))
	h.clock.Set(t0.Add(time.Minute))
	h.start()
	r := h.next()
	var es []climate.AuditEntry
	if err := h.store.View(context.Background(), func(tx climate.Tx) (err error) {
		es, err = tx.ListAudit(context.Background(), climate.AuditFilter{LeaseID: l.ID})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(es) != 2 || es[0].Action != "lease.create" || es[1].Action != "lease.event.start_lease" {
		t.Fatalf("entries %+v", es)
	}
	e := es[1]
	if e.Actor != climate.AuditActorSystem || e.ActorUserID != "" || !strings.Contains(e.Reason, r.Err.Error()) {
		t.Errorf("start entry %+v, want the service's with the error %q", e, r.Err)
	}
	var before, after map[string]any
	if json.Unmarshal([]byte(e.Before), &before) != nil || json.Unmarshal([]byte(e.After), &after) != nil ||
		before["status"] != string(climate.LeasePending) && before["status"] != string(climate.LeaseStarting) || after["status"] != string(climate.LeaseError) {
		t.Errorf("start entry: before %s, after %s", e.Before, e.After)
	}
}
