package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"climate/http/api"
)

// CreateFlavor registers a flavor (admins): its sizes, extra specs and optionally its id.
func (c *Client) CreateFlavor(ctx context.Context, req api.FlavorRequest) (*api.Flavor, error) {
	var out struct {
		Flavor api.Flavor `json:"flavor"`
	}
	if err := c.do(ctx, "POST", "/v1/flavors", nil, req, &out); err != nil {
		return nil, err
	}
	return &out.Flavor, nil
}

// ListFlavors returns every registered flavor, in registration order.
func (c *Client) ListFlavors(ctx context.Context) ([]api.Flavor, error) {
	var out struct {
		Flavors []api.Flavor `json:"flavors"`
	}
	if err := c.do(ctx, "GET", "/v1/flavors", nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Flavors, nil
}

// GetFlavor returns one flavor by id.
func (c *Client) GetFlavor(ctx context.Context, id string) (*api.Flavor, error) {
	var out struct {
		Flavor api.Flavor `json:"flavor"`
	}
	if err := c.do(ctx, "GET", "/v1/flavors/"+url.PathEscape(id), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out.Flavor, nil
}

// DeleteFlavor removes a flavor (admins).
func (c *Client) DeleteFlavor(ctx context.Context, id string) error {
	return c.do(ctx, "DELETE", "/v1/flavors/"+url.PathEscape(id), nil, nil, nil)
}

// FindFlavor returns the flavor whose id is ref or, failing that, whose name is ref (names
// are unique).
func (c *Client) FindFlavor(ctx context.Context, ref string) (*api.Flavor, error) {
	f, err := c.GetFlavor(ctx, ref)
	if !IsNotFound(err) {
		return f, err
	}
	flavors, lerr := c.ListFlavors(ctx)
	if lerr != nil {
		return nil, lerr
	}
	for i := range flavors {
		if flavors[i].Name == ref {
			return &flavors[i], nil
		}
	}
	return nil, &Error{Status: http.StatusNotFound, Message: fmt.Sprintf("No flavor with id or name %q", ref)}
}
