// Package client is a Go client for Climate's REST API (Blazar's v1 API plus Climate's
// extensions). The climate CLI is built on it; other programs can import it.
//
//	c, err := client.New("http://127.0.0.1:1234", os.Getenv("CLIMATE_TOKEN"))
//	lease, err := c.CreateLease(ctx, api.LeaseRequest{Name: "train", StartDate: "now", EndDate: "2030-01-02 00:00",
//		Reservations: []map[string]any{{"resource_type": "physical:host", "min": 1, "max": 1}}})
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"climate/buildinfo"
	"climate/http/api"
)

// DefaultURL is where climate serve listens unless told otherwise.
const DefaultURL = "http://127.0.0.1:1234"

// Client calls one Climate server. Its zero value is not usable; call New.
type Client struct {
	base  *url.URL
	token string
	// HTTP is the client used for requests; http.DefaultClient unless replaced.
	HTTP *http.Client
	// Headers are added to every request (e.g. X-User-Id/X-Project-Id/X-Roles against a
	// server started with --auth noauth).
	Headers http.Header
	// PageSize is how many items ListLeases and ListAllocations ask for per request;
	// 0 means DefaultPageSize. The server answers at most 1,000.
	PageSize int
}

// New returns a client for the server at baseURL ("http://host:port"), sending token as
// X-Auth-Token when it is not empty.
func New(baseURL, token string) (*Client, error) {
	u, err := url.Parse(strings.TrimSuffix(baseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("server URL %q: want http://HOST:PORT or https://HOST:PORT", baseURL)
	}
	return &Client{base: u, token: token, HTTP: http.DefaultClient, Headers: http.Header{}}, nil
}

// URL returns the server's base URL.
func (c *Client) URL() string { return c.base.String() }

// Error is an error answer from the server.
type Error struct {
	Status  int    // HTTP status code
	Message string // the server's error_message
}

func (e *Error) Error() string { return e.Message }

// IsNotFound reports whether err is the server's 404.
func IsNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == http.StatusNotFound
}

// do sends a request with an optional JSON body and decodes a JSON answer into out (an
// out of type *[]byte gets the answer as it is).
func (c *Client) do(ctx context.Context, method, path string, query url.Values, body, out any) error {
	u := *c.base
	u.Path += path
	u.RawQuery = query.Encode()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return err
	}
	for k, vs := range c.Headers {
		req.Header[k] = vs
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("X-Auth-Token", c.token)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return fmt.Errorf("cannot reach Climate at %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("reading the answer of %s %s: %w", method, path, err)
	}
	if resp.StatusCode >= 400 {
		return answerError(resp, data, method, path)
	}
	if out == nil || resp.StatusCode == http.StatusNoContent {
		return nil
	}
	if raw, ok := out.(*[]byte); ok {
		*raw = data
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: unexpected answer (is %s a Climate server?): %v", method, path, c.base, err)
	}
	return nil
}

// answerError is the *Error of an error answer whose body is data.
func answerError(resp *http.Response, data []byte, method, path string) *Error {
	var e api.Error
	if json.Unmarshal(data, &e) == nil && e.Message != "" {
		return &Error{Status: resp.StatusCode, Message: e.Message}
	}
	return &Error{Status: resp.StatusCode, Message: fmt.Sprintf("%s %s: server answered %s", method, path, resp.Status)}
}

// ServerBuild returns the server's build from its version document; nil when the server
// does not say (a Blazar).
func (c *Client) ServerBuild(ctx context.Context) (*buildinfo.Info, error) {
	var doc struct {
		Climate *buildinfo.Info `json:"climate"`
	}
	err := c.do(ctx, http.MethodGet, "/", nil, nil, &doc)
	return doc.Climate, err
}

// LeaseQuery narrows ListLeases; empty fields match everything.
type LeaseQuery struct {
	Statuses  []string // any of these: PENDING, ACTIVE, TERMINATED, ERROR, …
	ProjectID string   // one project's leases (admins; others may name only their own)
	Name      string
	Limit     int // at most this many leases, the first in creation order; 0: all
}

// ListLeases returns the leases the caller may see that match q, by creation time, asking
// for them page by page.
func (c *Client) ListLeases(ctx context.Context, q LeaseQuery) ([]api.Lease, error) {
	return list[api.Lease](ctx, c, "/v1/leases", "leases", q.values(), q.Limit)
}

// LeasesCalendar returns the leases matching q (Limit aside) as an iCalendar file.
func (c *Client) LeasesCalendar(ctx context.Context, q LeaseQuery) ([]byte, error) {
	var out []byte
	err := c.do(ctx, http.MethodGet, "/v1/leases.ics", q.values(), nil, &out)
	return out, err
}

// values is q as query parameters, Limit aside.
func (q LeaseQuery) values() url.Values {
	v := url.Values{}
	if len(q.Statuses) > 0 {
		v.Set("status", strings.Join(q.Statuses, ","))
	}
	if q.ProjectID != "" {
		v.Set("project_id", q.ProjectID)
	}
	if q.Name != "" {
		v.Set("name", q.Name)
	}
	return v
}

// GetLease returns one lease by id.
func (c *Client) GetLease(ctx context.Context, id string) (*api.Lease, error) {
	var out struct {
		Lease api.Lease `json:"lease"`
	}
	if err := c.do(ctx, "GET", "/v1/leases/"+url.PathEscape(id), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out.Lease, nil
}

// CreateLease creates a lease. With req.DryRun the lease is planned, not stored: the
// answer shows the hosts each reservation would get.
func (c *Client) CreateLease(ctx context.Context, req api.LeaseRequest) (*api.Lease, error) {
	if req.Reservations == nil {
		req.Reservations = []map[string]any{}
	}
	if req.Events == nil {
		req.Events = []map[string]any{}
	}
	var out struct {
		Lease api.Lease `json:"lease"`
	}
	if err := c.do(ctx, "POST", "/v1/leases", nil, req, &out); err != nil {
		return nil, err
	}
	return &out.Lease, nil
}

// UpdateLease changes a lease.
func (c *Client) UpdateLease(ctx context.Context, id string, u api.LeaseUpdate) (*api.Lease, error) {
	var out struct {
		Lease api.Lease `json:"lease"`
	}
	if err := c.do(ctx, "PUT", "/v1/leases/"+url.PathEscape(id), nil, u, &out); err != nil {
		return nil, err
	}
	return &out.Lease, nil
}

// DeleteLease deletes a lease, ending it first if it is active.
func (c *Client) DeleteLease(ctx context.Context, id string) error {
	return c.do(ctx, "DELETE", "/v1/leases/"+url.PathEscape(id), nil, nil, nil)
}

// FindLease returns the lease whose id or name is ref. A name shared by several leases is
// an error that lists their ids.
func (c *Client) FindLease(ctx context.Context, ref string) (*api.Lease, error) {
	if looksLikeUUID(ref) {
		l, err := c.GetLease(ctx, ref)
		if !IsNotFound(err) {
			return l, err
		}
	}
	leases, err := c.ListLeases(ctx, LeaseQuery{Name: ref})
	if err != nil {
		return nil, err
	}
	var found []*api.Lease // a server that does not filter by name (Blazar) sends all
	for i := range leases {
		if leases[i].Name == ref || leases[i].ID == ref {
			found = append(found, &leases[i])
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return nil, &Error{Status: http.StatusNotFound, Message: fmt.Sprintf("No lease with name or id %q", ref)}
	}
	ids := make([]string, len(found))
	for i, l := range found {
		ids[i] = l.ID
	}
	return nil, &Error{Status: http.StatusConflict, Message: fmt.Sprintf("%d leases are named %q; use an id: %s", len(found), ref, strings.Join(ids, ", "))}
}

// looksLikeUUID reports whether s has the 8-4-4-4-12 hexadecimal form of lease ids.
func looksLikeUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, r := range s {
		switch i {
		case 8, 13, 18, 23:
			if r != '-' {
				return false
			}
		default:
			if !strings.ContainsRune("0123456789abcdefABCDEF", r) {
				return false
			}
		}
	}
	return true
}
