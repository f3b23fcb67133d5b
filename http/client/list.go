package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"

	"climate/http/api"
)

// DefaultPageSize is how many items a list asks for per request when Client.PageSize is 0.
const DefaultPageSize = 500

// list GETs the list at path page by page: pages of c.PageSize items (fewer when limit,
// if not 0, leaves less), each after the marker of the previous page's next link, until
// a page has no next link. A server that does not page (Blazar) answers everything at once.
func list[T any](ctx context.Context, c *Client, path, key string, query url.Values, limit int) ([]T, error) {
	size := c.PageSize
	if size <= 0 {
		size = DefaultPageSize
	}
	out := []T{}
	for {
		n := size
		if limit > 0 {
			n = min(n, limit-len(out))
		}
		query.Set("limit", strconv.Itoa(n))
		var page map[string]json.RawMessage
		if err := c.do(ctx, "GET", path, query, nil, &page); err != nil {
			return nil, err
		}
		var items []T
		var links []api.Link
		if err := json.Unmarshal(page[key], &items); err != nil {
			return nil, fmt.Errorf("GET %s: unexpected answer (is %s a Climate server?): %v", path, c.base, err)
		}
		if raw, ok := page[key+"_links"]; ok {
			if err := json.Unmarshal(raw, &links); err != nil {
				return nil, fmt.Errorf("GET %s: unexpected %s_links: %v", path, key, err)
			}
		}
		out = append(out, items...)
		if limit > 0 && len(out) >= limit {
			return out[:limit], nil
		}
		marker := ""
		for _, l := range links {
			if u, err := url.Parse(l.Href); l.Rel == "next" && err == nil {
				marker = u.Query().Get("marker")
			}
		}
		if marker == "" {
			return out, nil
		}
		if marker == query.Get("marker") {
			return nil, fmt.Errorf("GET %s: the server's next page starts after %s again", path, marker)
		}
		query.Set("marker", marker)
	}
}
