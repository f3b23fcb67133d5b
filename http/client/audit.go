package client

import (
	"context"
	"net/url"

	"climate/http/api"
)

// AuditQuery narrows the audit trail; empty fields match everything.
type AuditQuery struct {
	LeaseID, HostID, ProjectID string
	// Since and Until keep the entries recorded in [Since, Until): dates as the server
	// takes them ("2030-01-02 15:04", RFC 3339, "now").
	Since, Until string
	Limit        int // at most this many entries, the oldest first; 0: all
}

func (q AuditQuery) values() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"lease_id": q.LeaseID, "host_id": q.HostID, "project_id": q.ProjectID, "since": q.Since, "until": q.Until} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v
}

// ListAudit returns the audit trail's entries matching q, oldest first (admins only),
// asking for them page by page.
func (c *Client) ListAudit(ctx context.Context, q AuditQuery) ([]api.AuditEntry, error) {
	return list[api.AuditEntry](ctx, c, "/v1/audit", "audit", q.values(), q.Limit)
}
