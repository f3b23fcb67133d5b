package api

import (
	"encoding/json"
	"strconv"

	"climate"
)

// AuditEntry is one change of the audit trail as the API shows it (Climate's extension):
// GET /v1/audit. Before and after are small JSON objects of the fields that changed (the
// whole summary on a create or delete), null when there is nothing to show.
type AuditEntry struct {
	ID             string          `json:"id"`
	CreatedAt      string          `json:"created_at"`
	Actor          string          `json:"actor"`
	ActorUserID    string          `json:"actor_user_id"`
	ActorProjectID string          `json:"actor_project_id"`
	RequestID      string          `json:"request_id"`
	Action         string          `json:"action"`
	TargetType     string          `json:"target_type"`
	TargetID       string          `json:"target_id"`
	LeaseID        string          `json:"lease_id"`
	HostID         string          `json:"host_id"`
	ProjectID      string          `json:"project_id"`
	Reason         string          `json:"reason"`
	Before         json.RawMessage `json:"before"`
	After          json.RawMessage `json:"after"`
}

// AuditEntryOf is an entry as the API shows it.
func AuditEntryOf(e *climate.AuditEntry) AuditEntry {
	raw := func(s string) json.RawMessage {
		if s == "" {
			return json.RawMessage("null")
		}
		return json.RawMessage(s)
	}
	return AuditEntry{ID: strconv.FormatInt(e.ID, 10), CreatedAt: FormatCreated(e.Time), Actor: e.Actor,
		ActorUserID: e.ActorUserID, ActorProjectID: e.ActorProjectID, RequestID: e.RequestID, Action: e.Action,
		TargetType: e.TargetType, TargetID: e.TargetID, LeaseID: e.LeaseID, HostID: e.HostID, ProjectID: e.ProjectID,
		Reason: e.Reason, Before: raw(e.Before), After: raw(e.After)}
}
