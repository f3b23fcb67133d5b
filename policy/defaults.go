package policy

// RuleDefault is a rule's default text and what it guards (oslo.policy's RuleDefault).
type RuleDefault struct {
	Name, Check, Description string
}

// Defaults are Blazar's base rules and default policies (blazar/policies/*.py), and
// Climate's own rules in Blazar's scheme, in listing order. One difference from Blazar:
// project_reader_or_admin also admits project members, since Climate's identities (tokens
// file, identity headers) carry no implied roles, where Keystone gives every member the
// reader role as well. Rules on one lease or webhook are checked against the caller's
// own project and user before it is read (as Blazar's API decorator does) and, once
// read, against its project and user; other projects' objects are hidden first.
var Defaults = []RuleDefault{
	{"admin", "is_admin:True or role:admin", "Default rule for most admin APIs."},
	{"project_member_api", "role:member and project_id:%(project_id)s", "Default rule for project member APIs."},
	{"project_reader_api", "role:reader and project_id:%(project_id)s", "Default rule for project reader APIs."},
	{"project_member_or_admin", "rule:project_member_api or rule:admin", "Default rule for project member or admin APIs."},
	{"project_reader_or_admin", "rule:project_reader_api or rule:project_member_api or rule:admin", "Default rule for project reader or admin APIs (members read too)."},
	{"admin_or_owner", "rule:admin or project_id:%(project_id)s", "Deprecated: Blazar's former default rule for most non-admin APIs (used by no default)."},

	{"blazar:leases:get", "rule:project_reader_or_admin", "Policy rule for List/Show Lease(s) API (GET /v1/leases, GET /v1/leases/{lease_id}); also GET /v1/events/stream."},
	{"blazar:leases:post", "rule:project_member_or_admin", "Policy rule for Create Lease API (POST /v1/leases)."},
	{"blazar:leases:put", "rule:project_member_or_admin", "Policy rule for Update Lease API (PUT /v1/leases/{lease_id})."},
	{"blazar:leases:delete", "rule:project_member_or_admin", "Policy rule for Delete Lease API (DELETE /v1/leases/{lease_id})."},

	{"blazar:oshosts:get", "rule:admin", "Policy rule for List/Show Host(s) API (GET /v1/os-hosts, GET /v1/os-hosts/{host_id})."},
	{"blazar:oshosts:post", "rule:admin", "Policy rule for Create Host API (POST /v1/os-hosts)."},
	{"blazar:oshosts:put", "rule:admin", "Policy rule for Update Host API (PUT /v1/os-hosts/{host_id})."},
	{"blazar:oshosts:delete", "rule:admin", "Policy rule for Delete Host API (DELETE /v1/os-hosts/{host_id})."},
	{"blazar:oshosts:get_allocations", "rule:admin", "Policy rule for List/Get Host(s) Allocations API (GET /v1/os-hosts/allocations, GET /v1/os-hosts/{host_id}/allocation)."},
	{"blazar:oshosts:get_resource_properties", "rule:admin", "Policy rule for Resource Properties API (GET /v1/os-hosts/properties)."},
	{"blazar:oshosts:update_resource_properties", "rule:admin", "Policy rule for Resource Properties API (PATCH /v1/os-hosts/properties/{property_name})."},
	{"climate:oshosts:get_busy", "rule:project_reader_or_admin", "Climate: hosts' busy times for callers whom blazar:oshosts:get_allocations refuses: GET /v1/os-hosts/allocations and GET /v1/os-hosts/{host_id}/allocation answer with other projects' reservations redacted (no reservation or lease id), for the web calendar."},
	{"climate:oshosts:maintenance", "rule:admin", "Climate: List/Show/Add/Delete hosts' maintenance windows, which heal the reservations holding them (GET /v1/os-hosts/maintenances, GET/POST /v1/os-hosts/{host_id}/maintenances, GET/DELETE /v1/os-hosts/{host_id}/maintenances/{maintenance_id})."},

	{"blazar:floatingips:get", "rule:project_reader_or_admin", "Policy rule for List/Show FloatingIP(s) API (GET /v1/floatingips, GET /v1/floatingips/{floatingip_id})."},
	{"blazar:floatingips:post", "rule:admin", "Policy rule for Create Floating IP API (POST /v1/floatingips)."},
	{"blazar:floatingips:delete", "rule:admin", "Policy rule for Delete Floating IP API (DELETE /v1/floatingips/{floatingip_id})."},

	{"blazar:flavors:get", "rule:project_reader_or_admin", "Climate: List/Show reservable flavor(s) (GET /v1/flavors, GET /v1/flavors/{flavor_id})."},
	{"blazar:flavors:post", "rule:admin", "Climate: Register a reservable flavor (POST /v1/flavors)."},
	{"blazar:flavors:delete", "rule:admin", "Climate: Remove a reservable flavor (DELETE /v1/flavors/{flavor_id})."},

	{"climate:availability:get", "rule:project_reader_or_admin", "Climate: free capacity and earliest start (GET /v1/availability/earliest, GET /v1/availability/timeline)."},

	{"climate:webhooks:get", "rule:project_reader_or_admin", "Climate: List/Show webhook(s) and their deliveries (GET /v1/webhooks…)."},
	{"climate:webhooks:post", "rule:project_member_or_admin", "Climate: Create a webhook (POST /v1/webhooks)."},
	{"climate:webhooks:put", "rule:project_member_or_admin", "Climate: Update a webhook (PUT /v1/webhooks/{webhook_id})."},
	{"climate:webhooks:delete", "rule:project_member_or_admin", "Climate: Delete a webhook (DELETE /v1/webhooks/{webhook_id})."},

	{"climate:audit:get", "rule:admin", "Climate: List the audit trail of changes, who made them and when (GET /v1/audit)."},

	{"climate:limits:get", "rule:project_reader_or_admin", "Climate: Show a project's limits, budget and what it was charged (GET /v1/projects/{project_id}/limits)."},
	{"climate:limits:put", "rule:admin", "Climate: Set a project's limits, budget and prices (PUT /v1/projects/{project_id}/limits)."},
	{"climate:usage:get", "rule:project_reader_or_admin", "Climate: List usage records: what each reservation reserved, held and cost (GET /v1/usage)."},
}
