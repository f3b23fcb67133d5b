package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"

	"climate/http/api"
)

// UsageQuery narrows the usage records: a project (admins: any; empty: all, or the
// caller's own for members) and a window ([From, To), dates as the server takes them)
// that the figures are clipped to.
type UsageQuery struct {
	ProjectID, From, To string
}

// ListUsage returns the usage of each reservation matching q.
func (c *Client) ListUsage(ctx context.Context, q UsageQuery) ([]api.Usage, error) {
	v := url.Values{}
	for k, s := range map[string]string{"project_id": q.ProjectID, "from": q.From, "to": q.To} {
		if s != "" {
			v.Set(k, s)
		}
	}
	var body struct {
		Usage []api.Usage `json:"usage"`
	}
	if err := c.do(ctx, "GET", "/v1/usage", v, nil, &body); err != nil {
		return nil, err
	}
	if body.Usage == nil {
		return nil, fmt.Errorf("GET /v1/usage: unexpected answer (is %s a Climate server?)", c.base)
	}
	return body.Usage, nil
}

// GetLimits returns a project's limits, budget and prices.
func (c *Client) GetLimits(ctx context.Context, project string) (*api.Limits, error) {
	return c.limits(ctx, "GET", project, nil)
}

// SetLimits changes the limits named in changes (API keys; a nil value clears one) and
// returns the project's limits (admins only).
func (c *Client) SetLimits(ctx context.Context, project string, changes map[string]any) (*api.Limits, error) {
	return c.limits(ctx, "PUT", project, changes)
}

func (c *Client) limits(ctx context.Context, method, project string, body any) (*api.Limits, error) {
	var out struct {
		Limits json.RawMessage `json:"limits"`
	}
	if err := c.do(ctx, method, "/v1/projects/"+url.PathEscape(project)+"/limits", nil, body, &out); err != nil {
		return nil, err
	}
	var l api.Limits
	if err := json.Unmarshal(out.Limits, &l); err != nil {
		return nil, fmt.Errorf("%s /v1/projects/%s/limits: unexpected answer: %v", method, project, err)
	}
	return &l, nil
}
