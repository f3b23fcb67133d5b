package climate_test

import (
	"context"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"climate"
)

// recordingTx keeps the entries Audit inserts; every other Tx method is unused.
type recordingTx struct {
	climate.Tx
	got []climate.AuditEntry
}

func (r *recordingTx) InsertAudit(_ context.Context, e *climate.AuditEntry) error {
	r.got = append(r.got, *e)
	return nil
}

func TestAuditBoundsReasonAndDropsSecrets(t *testing.T) {
	tx := &recordingTx{}
	long := strings.Repeat("é", 2000) // two bytes each: a cut at a byte count can split one
	err := climate.Audit(context.Background(), tx, climate.BySystem(long), "host.update", climate.AuditTarget{Type: "host", ID: "1", HostID: "1"},
		map[string]any{"vcpus": 4, "Password": "hunter2"}, map[string]any{"vcpus": 8, "TOKEN": "abc"}, time.Unix(0, 0))
	if err != nil || len(tx.got) != 1 {
		t.Fatalf("Audit: %v, %d entries", err, len(tx.got))
	}
	e := tx.got[0]
	if !utf8.ValidString(e.Reason) || len(e.Reason) > 1024+len("…") || !strings.HasSuffix(e.Reason, "…") {
		t.Errorf("reason of %d bytes, valid UTF-8 %v", len(e.Reason), utf8.ValidString(e.Reason))
	}
	if e.Before != `{"vcpus":4}` || e.After != `{"vcpus":8}` || e.Actor != climate.AuditActorSystem {
		t.Errorf("entry %+v", e)
	}
	if got := climate.AuditURL("https://user:pw@hooks.example.org/x?token=abc#frag"); got != "https://hooks.example.org/x" {
		t.Errorf("AuditURL: %s", got)
	}
}
