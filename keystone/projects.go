package keystone

import (
	"context"
	"net/http"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/projects"
)

// ProjectExists reports whether Keystone knows a project by id, asked as the service
// user (who needs a role that may read projects, as admin or service do): limits are
// not set on a mistyped project.
func (c *Client) ProjectExists(ctx context.Context, id string) (bool, error) {
	if err := c.renewIfDue(ctx); err != nil {
		return false, err
	}
	_, err := projects.Get(ctx, c.identity, id).Extract()
	switch {
	case err == nil:
		return true, nil
	case gophercloud.ResponseCodeIs(err, http.StatusNotFound):
		return false, nil
	}
	return false, c.unavailable(err)
}
