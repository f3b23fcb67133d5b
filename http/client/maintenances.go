package client

import (
	"context"
	"net/url"

	"climate/http/api"
)

// CreateMaintenance takes a host out of service (admins): from req.Start until req.End
// (nil: until further notice). It returns the window and what healing did to the
// reservations holding the host then.
func (c *Client) CreateMaintenance(ctx context.Context, hostID string, req api.MaintenanceRequest) (*api.Maintenance, []api.Healing, error) {
	var out struct {
		Maintenance api.Maintenance `json:"maintenance"`
		Healing     []api.Healing   `json:"healing"`
	}
	if err := c.do(ctx, "POST", "/v1/os-hosts/"+url.PathEscape(hostID)+"/maintenances", nil, req, &out); err != nil {
		return nil, nil, err
	}
	return &out.Maintenance, out.Healing, nil
}

// ListMaintenances returns a host's maintenance windows, or every host's when hostID is
// "", by start (admins).
func (c *Client) ListMaintenances(ctx context.Context, hostID string) ([]api.Maintenance, error) {
	path := "/v1/os-hosts/maintenances"
	if hostID != "" {
		path = "/v1/os-hosts/" + url.PathEscape(hostID) + "/maintenances"
	}
	var out struct {
		Maintenances []api.Maintenance `json:"maintenances"`
	}
	if err := c.do(ctx, "GET", path, nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Maintenances, nil
}

// GetMaintenance returns one of a host's maintenance windows (admins).
func (c *Client) GetMaintenance(ctx context.Context, hostID, id string) (*api.Maintenance, error) {
	var out struct {
		Maintenance api.Maintenance `json:"maintenance"`
	}
	if err := c.do(ctx, "GET", "/v1/os-hosts/"+url.PathEscape(hostID)+"/maintenances/"+url.PathEscape(id), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out.Maintenance, nil
}

// DeleteMaintenance puts a host back in service as far as that window goes (admins):
// reservations it degraded are whole again.
func (c *Client) DeleteMaintenance(ctx context.Context, hostID, id string) error {
	return c.do(ctx, "DELETE", "/v1/os-hosts/"+url.PathEscape(hostID)+"/maintenances/"+url.PathEscape(id), nil, nil, nil)
}
