package climate

import "slices"

// Policy decides whether an identity may perform an action, as oslo.policy's Enforcer does
// for Blazar: rule names the action ("blazar:leases:post"), target the object acted on.
// Check returns nil or Forbidden(rule). Package climate/policy implements it: Blazar's
// defaults (admins manage inventory; members and admins change a project's resources;
// readers, members and admins read them), overridden rule by rule by an operator's
// policy file. Services given a nil Policy use those defaults.
type Policy interface {
	Check(who Identity, rule string, target Target) error
}

// Target is the object a policy rule is checked against: the project and user that own it
// (a rule's %(project_id)s and %(user_id)s).
type Target struct {
	ProjectID string
	UserID    string
}

// OwnTarget is the target of a request that names no object, or of the check made before
// the object is read: the caller's own project and user, as Blazar's API decorator uses.
func (id Identity) OwnTarget() Target {
	return Target{ProjectID: id.ProjectID, UserID: id.UserID}
}

// HasRole reports whether the identity holds any of roles.
func (id Identity) HasRole(roles ...string) bool {
	return slices.ContainsFunc(id.Roles, func(r string) bool { return slices.Contains(roles, r) })
}

// Forbidden is the refusal of a policy rule, in Blazar's words.
func Forbidden(rule string) error {
	return Errorf(CodeForbidden, "Policy doesn't allow %s to be performed.", rule)
}
