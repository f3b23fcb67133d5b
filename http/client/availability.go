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

// Instances asks for instance slots in an availability query: Amount slots (earliest
// only) of VCPUs, MemoryMB and DiskGB, with Affinity "true", "false" or "" (none).
type Instances struct {
	Amount, VCPUs, MemoryMB, DiskGB int
	Affinity                        string
}

// FloatingIPs asks for Amount addresses (earliest only) of network NetworkID.
type FloatingIPs struct {
	Amount    int
	NetworkID string
}

func (i *Instances) add(v url.Values, earliest bool) {
	if i == nil {
		return
	}
	if earliest {
		if i.Amount != 0 {
			v.Set("slots", strconv.Itoa(i.Amount))
		}
		if i.Affinity != "" {
			v.Set("affinity", i.Affinity)
		}
	}
	v.Set("vcpus", strconv.Itoa(i.VCPUs))
	v.Set("memory_mb", strconv.Itoa(i.MemoryMB))
	v.Set("disk_gb", strconv.Itoa(i.DiskGB))
}

func (f *FloatingIPs) add(v url.Values, earliest bool) {
	if f == nil {
		return
	}
	if earliest && f.Amount != 0 {
		v.Set("floatingips", strconv.Itoa(f.Amount))
	}
	v.Set("network_id", f.NetworkID)
}

// SlotQuery asks for the earliest windows of Duration in which Count matching hosts are
// free, with the Instances and FloatingIPs asked for (nil: none), starting no sooner than
// After and ending by Deadline (both optional dates).
type SlotQuery struct {
	Filter
	Count           int
	Instances       *Instances
	FloatingIPs     *FloatingIPs
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
	q.Filter.add(v)
	q.Instances.add(v, true)
	q.FloatingIPs.add(v, true)
	var out struct {
		Slots []api.Slot `json:"slots"`
	}
	return out.Slots, c.do(ctx, "GET", "/v1/availability/earliest", v, nil, &out)
}

// TimelineQuery asks how many matching hosts are free in each Step of [From, To), and
// how many slots of Instances' size and addresses of FloatingIPs' network (nil: not asked).
type TimelineQuery struct {
	Filter
	Instances   *Instances
	FloatingIPs *FloatingIPs
	From, To    string
	Step        string
}

// Timeline returns free-host counts over a range (Climate's extension).
func (c *Client) Timeline(ctx context.Context, q TimelineQuery) (*api.Timeline, error) {
	v := url.Values{"from": {q.From}, "to": {q.To}}
	if q.Step != "" {
		v.Set("step", q.Step)
	}
	q.Filter.add(v)
	q.Instances.add(v, false)
	q.FloatingIPs.add(v, false)
	var out api.Timeline
	if err := c.do(ctx, "GET", "/v1/availability/timeline", v, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
