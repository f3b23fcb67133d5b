package sqlite

import (
	"path/filepath"
	"strings"
	"testing"

	"climate/sqlcore"
)

// Healing's queries read indexes: the degraded leases their partial index, a host's
// maintenance windows theirs.
func TestMaintenanceQueryPlans(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "climate.db"))
	defer s.Close()
	if plan := explain(t, s.r, degradedLeasesQuery, 1); !strings.Contains(plan, "leases_degraded") {
		t.Errorf("degraded leases: the partial index is not used:\n%s", plan)
	}
	q := `SELECT ` + sqlcore.MaintenanceColumns + ` FROM maintenances WHERE host_id = ? AND (end_at IS NULL OR end_at > ?) ORDER BY start_at, id`
	if plan := explain(t, s.r, q, "1", 1); strings.Contains(plan, "SCAN maintenances") {
		t.Errorf("a host's windows: maintenances scanned:\n%s", plan)
	}
}
