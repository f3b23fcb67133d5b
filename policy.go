package climate

import "slices"

// Blazar's policy defaults, shared by every service: admins manage inventory; members
// (and admins) change a project's resources; readers (and both others) read them. rule
// names the policy in the refusal, as Blazar's message does.

// HasRole reports whether the identity holds any of roles.
func (id Identity) HasRole(roles ...string) bool {
	return slices.ContainsFunc(id.Roles, func(r string) bool { return slices.Contains(roles, r) })
}

// Forbidden is the refusal of a policy rule.
func Forbidden(rule string) error {
	return Errorf(CodeForbidden, "Policy doesn't allow %s to be performed.", rule)
}

// RequireAdmin enforces Blazar's admin-only rules.
func RequireAdmin(who Identity, rule string) error {
	if !who.IsAdmin() {
		return Forbidden(rule)
	}
	return nil
}

// RequireMember enforces Blazar's project_member_or_admin rule.
func RequireMember(who Identity, rule string) error {
	if !who.HasRole("admin", "member") {
		return Forbidden(rule)
	}
	return nil
}

// RequireReader enforces Blazar's project_reader_or_admin rule.
func RequireReader(who Identity, rule string) error {
	if !who.HasRole("admin", "member", "reader") {
		return Forbidden(rule)
	}
	return nil
}
