package http

import (
	"bufio"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"climate"
	"climate/http/api"
)

// MaxLimit is the largest page a list answers; a larger limit is clamped to it (as
// OpenStack's osapi_max_limit is), and the next link shows how to go on.
const MaxLimit = 1000

// listParams reads the paging parameters limit and marker. Lists ignore unknown query
// parameters, as Blazar does.
func listParams(v url.Values) (limit int, marker string, err error) {
	if s := v.Get("limit"); v.Has("limit") {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return 0, "", climate.Errorf(climate.CodeInvalid, "Query parameter limit=%q is not a positive integer (pages hold at most %d items)", s, MaxLimit)
		}
		limit = min(n, MaxLimit)
	}
	return limit, v.Get("marker"), nil
}

// listValues returns a repeatable parameter's values, each of which may also be a comma
// separated list (?status=ACTIVE&status=PENDING or ?status=ACTIVE,PENDING).
func listValues(v url.Values, key string) []string {
	var out []string
	for _, s := range v[key] {
		for _, part := range strings.Split(s, ",") {
			if part = strings.TrimSpace(part); part != "" {
				out = append(out, part)
			}
		}
	}
	return out
}

func leaseQueryOf(r *http.Request) (climate.LeaseQuery, error) {
	v := r.URL.Query()
	limit, marker, err := listParams(v)
	q := climate.LeaseQuery{ProjectID: v.Get("project_id"), Name: v.Get("name"), Marker: marker, Limit: limit}
	for _, s := range listValues(v, "status") {
		q.Statuses = append(q.Statuses, climate.LeaseStatus(strings.ToUpper(s)))
	}
	return q, err
}

func allocationQueryOf(r *http.Request) (climate.AllocationQuery, error) {
	v := r.URL.Query()
	limit, marker, err := listParams(v)
	if err != nil {
		return climate.AllocationQuery{}, err
	}
	p := &params{v: v}
	q := climate.AllocationQuery{LeaseID: v.Get("lease_id"), ReservationID: v.Get("reservation_id"),
		From: p.time("from"), To: p.time("to"), Marker: marker, Limit: limit}
	return q, p.err
}

// list answers a list request as {key: [items…]}. read runs the listing, calling emit with
// each item and its id in order, and reports whether items remain after the limit.
//
// With a limit, the answer is one page, and key_links holds the link to the next page
// when items remain (OpenStack's form). Without one, the answer is the whole list in
// Blazar's form, written as it is read (see listBody).
func list(r *http.Request, key string, limit int, read func(emit func(item any, id string) error) (bool, error)) (int, any, error) {
	if limit == 0 {
		return http.StatusOK, &listBody{key: key, read: func(emit func(any) error) error {
			_, err := read(func(item any, _ string) error { return emit(item) })
			return err
		}}, nil
	}
	items := make([]any, 0, limit)
	var last string
	more, err := read(func(item any, id string) error {
		items, last = append(items, item), id
		return nil
	})
	if err != nil {
		return 0, nil, err
	}
	body := map[string]any{key: items}
	if more {
		q := r.URL.Query()
		q.Set("limit", strconv.Itoa(limit))
		q.Set("marker", last)
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		next := url.URL{Scheme: scheme, Host: r.Host, Path: r.URL.Path, RawQuery: q.Encode()}
		body[key+"_links"] = []api.Link{{Rel: "next", Href: next.String()}}
	}
	return http.StatusOK, body, nil
}

// listBody is a whole list, {key: [items…]}, encoded to the client as read calls emit, so
// its memory is one batch of the listing whatever the list's length.
type listBody struct {
	key  string
	read func(emit func(item any) error) error
}

// errHeadDone stops a HEAD request's listing once the status is known.
var errHeadDone = errors.New("HEAD: no body")

// writeError is an error writing to the client: it went away.
type writeError struct{ error }

// listChunkTimeout is how long a client may take to read each 32 KiB of a streamed list.
const listChunkTimeout = 30 * time.Second

// headerOnWrite sends the status (200) with the first bytes of the body, so that until then
// an error can still be answered as one.
type headerOnWrite struct {
	w    http.ResponseWriter
	sent bool
}

func (h *headerOnWrite) Write(b []byte) (int, error) {
	// The server's write timeout bounds a whole answer; a long list sent to a slow but
	// steady client would be cut by it. Each chunk gets its own window instead, so only a
	// client that stops reading is cut off.
	_ = http.NewResponseController(h.w).SetWriteDeadline(time.Now().Add(listChunkTimeout))
	if !h.sent {
		h.sent = true
		h.w.Header().Set("Content-Type", "application/json")
		h.w.WriteHeader(http.StatusOK)
	}
	return h.w.Write(b)
}

// writeList writes a listBody through a 32 KiB buffer. The status goes with the first
// buffer sent, so an error before it (a bad marker, a failed first read) is an ordinary
// error answer. An error after it can no longer change the status: the connection is then
// aborted before the closing "]}", so the client sees a truncated answer, not a short list
// that looks complete.
func (s *Server) writeList(w http.ResponseWriter, r *http.Request, lb *listBody) {
	hw := &headerOnWrite{w: w}
	out := bufio.NewWriterSize(hw, 32<<10)
	out.WriteString(`{"` + lb.key + `":[`)
	n := 0
	err := lb.read(func(item any) error {
		if r.Method == http.MethodHead {
			return errHeadDone // the listing works: that is all HEAD asks
		}
		b, err := json.Marshal(item)
		if err != nil {
			return err
		}
		if n > 0 {
			out.WriteByte(',')
		}
		n++
		if _, err := out.Write(b); err != nil {
			return writeError{err}
		}
		return nil
	})
	switch {
	case (err == nil || errors.Is(err, errHeadDone)) && r.Method == http.MethodHead:
		hw.Write(nil)
		return
	case err == nil:
		out.WriteString("]}")
		if err = out.Flush(); err == nil {
			return
		}
		err = writeError{err}
	}
	switch {
	case !hw.sent:
		s.writeError(w, r, err)
		return
	case errors.As(err, new(writeError)) || r.Context().Err() != nil:
		s.Logger.Info("list not sent: the client went away", "path", r.URL.Path, "err", err)
	default:
		s.Logger.Error("list cut short", "path", r.URL.Path, "err", err)
	}
	panic(http.ErrAbortHandler) // net/http closes the connection without ending the body
}
