package climate

import (
	"context"
	"encoding/json"
	"maps"
	"net/url"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"
)

// AuditEntry is one row of the audit trail (Climate's extension): a change to a lease,
// host, resource property, maintenance window, floating IP, flavor or webhook, written in
// the transaction of the change itself, so a change that rolls back leaves no row.
type AuditEntry struct {
	// ID is assigned by the store: a never-reused increasing integer, so entries are
	// listed in commit order (writers are serialized in both stores).
	ID   int64
	Time time.Time
	// Actor is AuditActorUser for a change an API caller asked for, AuditActorSystem
	// for one the service made itself (a waiting lease booked, healing, a preemption
	// cut, a webhook disabled after failures). ActorUserID and ActorProjectID are the
	// caller's; empty for the service.
	Actor                       string
	ActorUserID, ActorProjectID string
	// RequestID is the API request's id (req-…) when the change came from one.
	RequestID string
	// Action is what was done: "lease.create", "host.update", "lease.preempted", ….
	Action string
	// TargetType and TargetID name what changed; LeaseID, HostID and ProjectID are set
	// when known, for filtering (ProjectID is the project the target belongs to).
	TargetType, TargetID       string
	LeaseID, HostID, ProjectID string
	// Reason says why the service made a change (or the operator's reason).
	Reason string
	// Before and After are small JSON objects of the fields that changed (the whole
	// summary on a create or delete); empty when there is nothing to show. They never
	// hold secrets (webhook secrets, tokens, trust ids).
	Before, After string
}

// Audit actors.
const (
	AuditActorUser   = "user"
	AuditActorSystem = "climate"
)

// AuditFilter selects audit entries. Zero fields match everything.
type AuditFilter struct {
	LeaseID, HostID, ProjectID string
	// Since and Until keep entries with Since <= Time < Until.
	Since, Until time.Time
	// After keeps the entries with ID > After: a keyset position.
	After int64
	// Limit is the most entries returned; 0 means no limit.
	Limit int
}

// AuditStore is the part of a Tx that keeps the audit trail. There is no update or
// delete: the trail is append-only.
type AuditStore interface {
	// InsertAudit appends e, setting e.ID.
	InsertAudit(ctx context.Context, e *AuditEntry) error
	// ListAudit returns the entries matching f, ordered by ID.
	ListAudit(ctx context.Context, f AuditFilter) ([]AuditEntry, error)
}

// AuditQuery is what a client asks of the audit trail: the filters, and a page (Marker is
// the id of the previous page's last entry).
type AuditQuery struct {
	LeaseID, HostID, ProjectID string
	Since, Until               time.Time
	Marker                     string
	Limit                      int
}

// AuditService serves the audit trail (admins only); the manager implements it.
type AuditService interface {
	// ListAudit passes the entries matching q to fn, batch by batch, and reports whether
	// more follow the limit.
	ListAudit(ctx context.Context, who Identity, q AuditQuery, fn func([]AuditEntry) error) (more bool, err error)
}

// Auditor is who made a change, as the audit trail records it.
type Auditor struct {
	System            bool
	UserID, ProjectID string
	// Reason, for the service's changes, says why.
	Reason string
}

// ByUser is a change an API caller made.
func ByUser(who Identity) Auditor { return Auditor{UserID: who.UserID, ProjectID: who.ProjectID} }

// BySystem is a change the service made itself, for reason.
func BySystem(reason string) Auditor { return Auditor{System: true, Reason: reason} }

// AuditTarget is what a change is about: TargetType/TargetID, and the lease, host and
// project it belongs to when there are.
type AuditTarget struct {
	Type, ID                   string
	LeaseID, HostID, ProjectID string
}

type requestIDKey struct{}

// WithRequestID returns ctx carrying the API request's id, which the audit trail records.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestIDFrom returns the request id WithRequestID put in ctx, or "".
func RequestIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// maxAuditReason bounds an entry's reason (a driver's error may be long).
const maxAuditReason = 1024

// secretKeys are summary keys never written to the trail, whatever a caller passes.
var secretKeys = []string{"secret", "token", "trust_id", "password"}

// Audit records a change in tx, the transaction that makes it: who made it, the request
// id from ctx, the action, the target, and a before/after summary. before and after are
// summaries (a map[string]any of the fields worth showing, nil when the target did not
// exist before or does not after); on an update only the keys whose values differ are
// kept. Keys naming secrets are dropped. Every write path records through this one
// function, or builds its entry with NewAuditEntry.
func Audit(ctx context.Context, tx Tx, by Auditor, action string, target AuditTarget, before, after map[string]any, now time.Time) error {
	e, err := NewAuditEntry(ctx, by, action, target, before, after, now)
	if err != nil {
		return err
	}
	return tx.InsertAudit(ctx, e)
}

// NewAuditEntry builds the entry Audit records, for a caller that writes it later
// (tx.InsertAudit), outside the time its transaction holds the writer.
func NewAuditEntry(ctx context.Context, by Auditor, action string, target AuditTarget, before, after map[string]any, now time.Time) (*AuditEntry, error) {
	before, after = clean(before), clean(after)
	if before != nil && after != nil {
		for k, v := range before {
			if w, ok := after[k]; ok && reflect.DeepEqual(v, w) {
				delete(before, k)
				delete(after, k)
			}
		}
	}
	e := &AuditEntry{
		Time: now.UTC().Truncate(time.Microsecond), Actor: AuditActorUser, ActorUserID: by.UserID, ActorProjectID: by.ProjectID,
		RequestID: RequestIDFrom(ctx), Action: action, Reason: by.Reason,
		TargetType: target.Type, TargetID: target.ID, LeaseID: target.LeaseID, HostID: target.HostID, ProjectID: target.ProjectID,
	}
	if len(e.Reason) > maxAuditReason {
		// Cut at a character boundary: PostgreSQL refuses invalid UTF-8.
		e.Reason = strings.ToValidUTF8(e.Reason[:maxAuditReason], "") + "…"
	}
	if by.System {
		e.Actor, e.ActorUserID, e.ActorProjectID = AuditActorSystem, "", ""
	}
	var err error
	if e.Before, err = summaryJSON(before); err != nil {
		return nil, err
	}
	if e.After, err = summaryJSON(after); err != nil {
		return nil, err
	}
	return e, nil
}

func clean(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	c := maps.Clone(m)
	for k := range c {
		if slices.Contains(secretKeys, strings.ToLower(k)) {
			delete(c, k)
		}
	}
	return c
}

func summaryJSON(m map[string]any) (string, error) {
	if len(m) == 0 {
		return "", nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return "", &Error{Code: CodeInternal, Err: err}
	}
	return string(b), nil
}

// AuditURL is a URL as the trail shows it: without user information, query or fragment,
// where a token may hide.
func AuditURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	return u.String()
}

// AuditTime is a time as the audit trail's summaries show it (nil when zero).
func AuditTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format(time.RFC3339)
}

// LeaseAuditTarget is a lease as the audit trail names it.
func LeaseAuditTarget(l *Lease) AuditTarget {
	return AuditTarget{Type: "lease", ID: l.ID, LeaseID: l.ID, ProjectID: l.ProjectID}
}

// LeaseAuditSummary is what the audit trail shows of a lease: its dates, status and what it
// holds, not the whole lease (and never its trust id). nil for nil.
func LeaseAuditSummary(l *Lease) map[string]any {
	if l == nil {
		return nil
	}
	s := map[string]any{
		"name": l.Name, "status": string(l.Status), "start_date": AuditTime(l.Start), "end_date": AuditTime(l.End),
		"degraded": l.Degraded,
	}
	if l.Type != "" {
		s["lease_type"] = string(l.Type)
	}
	if l.Preemptible {
		s["preemptible"] = true
	}
	held := map[string]bool{}
	var rs []any
	for _, r := range l.Reservations {
		rr := map[string]any{"id": r.ID, "resource_type": r.ResourceType, "status": string(r.Status)}
		if r.Min != 0 || r.Max != 0 {
			rr["min"], rr["max"] = r.Min, r.Max
		}
		if r.Amount != 0 {
			rr["amount"] = r.Amount
		}
		if r.MissingResources {
			rr["missing_resources"] = true
		}
		rs = append(rs, rr)
		for _, a := range r.Allocations {
			held[a.ResourceID] = true
		}
	}
	s["reservations"] = rs
	s["resources"] = sortedKeys(held)
	return s
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
