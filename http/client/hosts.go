package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"climate/http/api"
)

// ListHosts returns every registered host (admins only).
func (c *Client) ListHosts(ctx context.Context) ([]api.Host, error) {
	var out struct {
		Hosts []api.Host `json:"hosts"`
	}
	return out.Hosts, c.do(ctx, "GET", "/v1/os-hosts", nil, nil, &out)
}

// GetHost returns one host by id.
func (c *Client) GetHost(ctx context.Context, id string) (*api.Host, error) {
	var out struct {
		Host api.Host `json:"host"`
	}
	if err := c.do(ctx, "GET", "/v1/os-hosts/"+url.PathEscape(id), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out.Host, nil
}

// CreateHost registers a host. fields holds "name" (the hypervisor hostname) and any extra
// capabilities, whose values may be strings, numbers or booleans.
func (c *Client) CreateHost(ctx context.Context, fields map[string]any) (*api.Host, error) {
	var out struct {
		Host api.Host `json:"host"`
	}
	if err := c.do(ctx, "POST", "/v1/os-hosts", nil, fields, &out); err != nil {
		return nil, err
	}
	return &out.Host, nil
}

// UpdateHost sets extra capabilities (and "reservable") of a host.
func (c *Client) UpdateHost(ctx context.Context, id string, fields map[string]any) (*api.Host, error) {
	var out struct {
		Host api.Host `json:"host"`
	}
	if err := c.do(ctx, "PUT", "/v1/os-hosts/"+url.PathEscape(id), nil, fields, &out); err != nil {
		return nil, err
	}
	return &out.Host, nil
}

// DeleteHost removes a host that no lease holds.
func (c *Client) DeleteHost(ctx context.Context, id string) error {
	return c.do(ctx, "DELETE", "/v1/os-hosts/"+url.PathEscape(id), nil, nil, nil)
}

// FindHost returns the host whose id or hypervisor hostname is ref.
func (c *Client) FindHost(ctx context.Context, ref string) (*api.Host, error) {
	if _, err := strconv.ParseUint(ref, 10, 64); err == nil {
		h, err := c.GetHost(ctx, ref)
		if !IsNotFound(err) {
			return h, err
		}
	}
	hosts, err := c.ListHosts(ctx)
	if err != nil {
		return nil, err
	}
	for i := range hosts {
		if hosts[i].HypervisorHostname == ref || hosts[i].ID == ref {
			return &hosts[i], nil
		}
	}
	return nil, &Error{Status: http.StatusNotFound, Message: fmt.Sprintf("No host with name or id %q", ref)}
}

// AllocationQuery narrows allocation listings; empty fields match everything. Without
// LeaseID, ReservationID or From, the server lists allocations from now on.
type AllocationQuery struct {
	LeaseID       string
	ReservationID string
	// From and To keep the allocations overlapping [From, To): dates as the server takes
	// them ("2030-01-02 15:04", RFC 3339, "now"); an empty To is unbounded.
	From, To string
	Limit    int // ListAllocations: at most this many hosts, the first in host order; 0: all
}

func (q AllocationQuery) values() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"lease_id": q.LeaseID, "reservation_id": q.ReservationID, "from": q.From, "to": q.To} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v
}

// ListAllocations returns, for every host, the reservations holding it (admins only),
// asking for them page by page.
func (c *Client) ListAllocations(ctx context.Context, q AllocationQuery) ([]api.Allocation, error) {
	return list[api.Allocation](ctx, c, "/v1/os-hosts/allocations", "allocations", q.values(), q.Limit)
}

// GetAllocation returns the reservations holding one host.
func (c *Client) GetAllocation(ctx context.Context, hostID string, q AllocationQuery) (*api.Allocation, error) {
	var out struct {
		Allocation api.Allocation `json:"allocation"`
	}
	if err := c.do(ctx, "GET", "/v1/os-hosts/"+url.PathEscape(hostID)+"/allocation", q.values(), nil, &out); err != nil {
		return nil, err
	}
	return &out.Allocation, nil
}

// ListProperties returns the host properties; all includes private ones (admins), detail
// adds each property's values and privacy.
func (c *Client) ListProperties(ctx context.Context, all, detail bool) ([]api.Property, error) {
	v := url.Values{}
	if all {
		v.Set("all", "true")
	}
	if detail {
		v.Set("detail", "true")
	}
	var out struct {
		Properties []api.Property `json:"resource_properties"`
	}
	return out.Properties, c.do(ctx, "GET", "/v1/os-hosts/properties", v, nil, &out)
}

// PropertyUpdate is the answer to SetPropertyPrivate.
type PropertyUpdate struct {
	ID           string  `json:"id"`
	ResourceType string  `json:"resource_type"`
	Name         string  `json:"property_name"`
	Private      bool    `json:"private"`
	CreatedAt    string  `json:"created_at"`
	UpdatedAt    *string `json:"updated_at"`
}

// SetPropertyPrivate hides a property from non-admins (private) or shows it.
func (c *Client) SetPropertyPrivate(ctx context.Context, name string, private bool) (*PropertyUpdate, error) {
	var out struct {
		Property PropertyUpdate `json:"resource_property"`
	}
	if err := c.do(ctx, "PATCH", "/v1/os-hosts/properties/"+url.PathEscape(name), nil, map[string]bool{"private": private}, &out); err != nil {
		return nil, err
	}
	return &out.Property, nil
}
