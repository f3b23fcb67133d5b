package client

import (
	"context"
	"net/url"
	"strconv"

	"climate/http/api"
)

// Filter selects hosts by Blazar's query language, e.g. `["==", "$gpu", "true"]`.
type Filter struct {
	HypervisorProperties string
	ResourceProperties   string
}

func (f Filter) add(v url.Values) {
	if f.HypervisorProperties != "" {
		v.Set("hypervisor_properties", f.HypervisorProperties)
	}
	if f.ResourceProperties != "" {
		v.Set("resource_properties", f.ResourceProperties)
	}
}

// SlotQuery asks for the earliest windows of Duration in which Count matching hosts are
// free, starting no sooner than After and ending by Deadline (both optional dates).
type SlotQuery struct {
	Filter
	Count           int
	Duration        string // "90m", "6h", "2d"
	After, Deadline string
	Limit           int
}

// Earliest returns the earliest free windows (Climate's extension).
func (c *Client) Earliest(ctx context.Context, q SlotQuery) ([]api.Slot, error) {
	v := url.Values{"duration": {q.Duration}}
	if q.Count > 0 {
		v.Set("count", strconv.Itoa(q.Count))
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.After != "" {
		v.Set("after", q.After)
	}
	if q.Deadline != "" {
		v.Set("deadline", q.Deadline)
	}
	q.add(v)
	var out struct {
		Slots []api.Slot `json:"slots"`
	}
	return out.Slots, c.do(ctx, "GET", "/v1/availability/earliest", v, nil, &out)
}

// TimelineQuery asks how many matching hosts are free in each Step of [From, To).
type TimelineQuery struct {
	Filter
	From, To string
	Step     string
}

// Timeline returns free-host counts over a range (Climate's extension).
func (c *Client) Timeline(ctx context.Context, q TimelineQuery) (*api.Timeline, error) {
	v := url.Values{"from": {q.From}, "to": {q.To}}
	if q.Step != "" {
		v.Set("step", q.Step)
	}
	q.add(v)
	var out api.Timeline
	if err := c.do(ctx, "GET", "/v1/availability/timeline", v, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
