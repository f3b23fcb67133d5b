package client

import (
	"context"
	"net/url"
	"strconv"

	"climate/http/api"
)

// CreateWebhook subscribes a URL to lease notifications (Climate's extension). The server
// first sends it a signed test delivery (webhook.ping) and refuses a URL that does not
// answer 2xx. The answer holds the signing secret, which is shown only now.
func (c *Client) CreateWebhook(ctx context.Context, req api.WebhookRequest) (*api.Webhook, error) {
	var out struct {
		Webhook api.Webhook `json:"webhook"`
	}
	if err := c.do(ctx, "POST", "/v1/webhooks", nil, req, &out); err != nil {
		return nil, err
	}
	return &out.Webhook, nil
}

// ListWebhooks returns the webhooks the caller may see: their project's (admins: all).
func (c *Client) ListWebhooks(ctx context.Context) ([]api.Webhook, error) {
	var out struct {
		Webhooks []api.Webhook `json:"webhooks"`
	}
	if err := c.do(ctx, "GET", "/v1/webhooks", nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Webhooks, nil
}

// GetWebhook returns one webhook by id (without its secret).
func (c *Client) GetWebhook(ctx context.Context, id string) (*api.Webhook, error) {
	var out struct {
		Webhook api.Webhook `json:"webhook"`
	}
	if err := c.do(ctx, "GET", "/v1/webhooks/"+url.PathEscape(id), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out.Webhook, nil
}

// UpdateWebhook changes a webhook's URL (tested as at creation), event types or enabled
// state. An EventTypes pointing to nil or an empty list subscribes to every type.
func (c *Client) UpdateWebhook(ctx context.Context, id string, u api.WebhookUpdate) (*api.Webhook, error) {
	if u.EventTypes != nil && *u.EventTypes == nil {
		u.EventTypes = &[]string{} // [], not null (which the server reads as "unchanged")
	}
	var out struct {
		Webhook api.Webhook `json:"webhook"`
	}
	if err := c.do(ctx, "PUT", "/v1/webhooks/"+url.PathEscape(id), nil, u, &out); err != nil {
		return nil, err
	}
	return &out.Webhook, nil
}

// DeleteWebhook deletes a webhook; deliveries to it stop at once.
func (c *Client) DeleteWebhook(ctx context.Context, id string) error {
	return c.do(ctx, "DELETE", "/v1/webhooks/"+url.PathEscape(id), nil, nil, nil)
}

// WebhookDeliveries returns a webhook's latest deliveries, latest first: at most limit
// (0: all the server keeps).
func (c *Client) WebhookDeliveries(ctx context.Context, id string, limit int) ([]api.WebhookDelivery, error) {
	v := url.Values{}
	if limit > 0 {
		v.Set("limit", strconv.Itoa(limit))
	}
	var out struct {
		Deliveries []api.WebhookDelivery `json:"deliveries"`
	}
	if err := c.do(ctx, "GET", "/v1/webhooks/"+url.PathEscape(id)+"/deliveries", v, nil, &out); err != nil {
		return nil, err
	}
	return out.Deliveries, nil
}
