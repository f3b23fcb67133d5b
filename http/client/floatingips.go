package client

import (
	"context"
	"net/url"

	"climate/http/api"
)

// CreateFloatingIP registers a floating IP (admins): an address on an external network,
// with optionally its subnet.
func (c *Client) CreateFloatingIP(ctx context.Context, req api.FloatingIPRequest) (*api.FloatingIP, error) {
	var out struct {
		FloatingIP api.FloatingIP `json:"floatingip"`
	}
	if err := c.do(ctx, "POST", "/v1/floatingips", nil, req, &out); err != nil {
		return nil, err
	}
	return &out.FloatingIP, nil
}

// ListFloatingIPs returns every registered floating IP, in registration order.
func (c *Client) ListFloatingIPs(ctx context.Context) ([]api.FloatingIP, error) {
	var out struct {
		FloatingIPs []api.FloatingIP `json:"floatingips"`
	}
	if err := c.do(ctx, "GET", "/v1/floatingips", nil, nil, &out); err != nil {
		return nil, err
	}
	return out.FloatingIPs, nil
}

// GetFloatingIP returns one floating IP by id.
func (c *Client) GetFloatingIP(ctx context.Context, id string) (*api.FloatingIP, error) {
	var out struct {
		FloatingIP api.FloatingIP `json:"floatingip"`
	}
	if err := c.do(ctx, "GET", "/v1/floatingips/"+url.PathEscape(id), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out.FloatingIP, nil
}

// DeleteFloatingIP removes a floating IP from the inventory (admins).
func (c *Client) DeleteFloatingIP(ctx context.Context, id string) error {
	return c.do(ctx, "DELETE", "/v1/floatingips/"+url.PathEscape(id), nil, nil, nil)
}
