package keystone

import (
	"context"
	"errors"
	"net/http"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/tokens"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/trusts"

	"climate"
)

// Trusts implements climate.Trusts with Keystone's OS-TRUST API: a lease's owner
// delegates their roles on their project to Climate's service user, which later gets
// tokens acting as them for the lease's actions.
type Trusts struct{ Client *Client }

var _ climate.Trusts = Trusts{}

// serviceUserID returns the id of the user Climate authenticates as.
func (c *Client) serviceUserID() (string, error) {
	r, ok := c.provider.GetAuthResult().(tokens.CreateResult)
	if !ok {
		return "", errors.New("no service token yet")
	}
	u, err := r.ExtractUser()
	if err != nil {
		return "", err
	}
	return u.ID, nil
}

// Create makes the trust with the caller's own token, as Keystone requires of a trustor.
func (t Trusts) Create(ctx context.Context, who climate.Identity) (string, error) {
	c := t.Client
	if who.Token == "" {
		return "", errors.New("no caller token to create a trust with")
	}
	trustee, err := c.serviceUserID()
	if err != nil {
		return "", c.unavailable(err)
	}
	asCaller := *c.identity
	asCaller.ProviderClient = &gophercloud.ProviderClient{HTTPClient: c.provider.HTTPClient, UserAgent: c.provider.UserAgent}
	asCaller.ProviderClient.SetToken(who.Token)
	roles := make([]trusts.Role, len(who.Roles))
	for i, r := range who.Roles {
		roles[i].Name = r
	}
	trust, err := trusts.Create(ctx, &asCaller, trusts.CreateOpts{
		TrustorUserID: who.UserID, TrusteeUserID: trustee, ProjectID: who.ProjectID, Roles: roles, Impersonation: true,
	}).Extract()
	if err != nil {
		return "", t.refusal("create a trust for the lease", err)
	}
	return trust.ID, nil
}

// Delete deletes a trust with the service user's token (an admin's, as Blazar's).
func (t Trusts) Delete(ctx context.Context, id string) error {
	if err := t.Client.renewIfDue(ctx); err != nil {
		return err
	}
	err := trusts.Delete(ctx, t.Client.identity, id).ExtractErr()
	if err == nil || gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
		return nil
	}
	return t.refusal("delete trust "+id, err)
}

// Token authenticates the service user again, scoped to the trust: the token acts as
// the trustor on the trust's project. It needs the service user's password (Keystone
// gives no trust-scoped token to an application credential).
func (t Trusts) Token(ctx context.Context, id string) (string, error) {
	c := t.Client
	if c.opts.Password == "" {
		return "", errors.New("trust tokens need the service user's password, not an application credential")
	}
	opts := c.opts
	opts.AllowReauth = false
	opts.Scope = &gophercloud.AuthScope{TrustID: id}
	token, err := tokens.Create(ctx, c.identity, &opts).ExtractTokenID()
	if err != nil {
		return "", t.refusal("get a token from trust "+id, err)
	}
	return token, nil
}

// refusal turns a Keystone error into Climate's: Keystone unreachable or failing is a
// 503; a refusal keeps Keystone's status class and says what was being done.
func (t Trusts) refusal(doing string, err error) error {
	var code gophercloud.ErrUnexpectedResponseCode
	if !errors.As(err, &code) || code.Actual >= 500 {
		return climate.Errorf(climate.CodeUnavailable, "%s", t.Client.unavailable(err).Error())
	}
	status := climate.CodeForbidden
	if code.Actual == http.StatusNotFound {
		status = climate.CodeNotFound
	}
	return climate.Errorf(status, "Keystone refused to %s: %s", doing, responseText(err))
}
