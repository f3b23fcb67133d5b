package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"climate/http/api"
)

// WatchQuery selects the notifications Watch streams; empty fields match everything the
// caller may see.
type WatchQuery struct {
	LeaseID    string
	ProjectID  string   // admins: one project's notifications; others may name only their own
	EventTypes []string // any of these: lease.create, lease.update, lease.delete, lease.event.start_lease, …
	// Replay starts the stream with the notifications the server kept after the one
	// whose Seq is After (0: from the first), then goes on with live ones. Without it, the
	// stream holds the notifications committed after Watch returns.
	Replay bool
	After  int64
}

// Stream is an open notification stream (GET /v1/events/stream). It reconnects by itself
// when the connection drops or the server drops it for falling behind, resuming after
// the last notification it received (Last-Event-ID), so nothing is missed or repeated.
type Stream struct {
	c      *Client
	q      WatchQuery
	ctx    context.Context
	cancel context.CancelFunc
	ch     chan api.Notification
	done   chan struct{}

	// last is the stream's position: the last event id the server sent (a notification's
	// Seq, or a position a heartbeat passed); known says whether it has sent one.
	last  int64
	known bool

	mu     sync.Mutex
	err    error
	closed bool // by Close
}

// Reconnection delays: the first retry after a dropped connection, doubling per failed
// attempt up to the most.
const (
	reconnectFirst = 100 * time.Millisecond
	reconnectMost  = 5 * time.Second
	// maxEventBytes bounds one line of the stream (a notification's data).
	maxEventBytes = 16 << 20
)

// errLagged is the server's stream.lagged event: reconnect at once.
var errLagged = errors.New("the server dropped the stream: it fell behind")

// Watch opens a notification stream. It returns once the server has accepted it (so a
// change made after Watch returns is in the stream), or the server's refusal: a *Error
// (404 for a lease you cannot see, or from a server without the stream). The stream lasts
// until ctx is done or Close is called; c.HTTP must not have a Timeout.
func (c *Client) Watch(ctx context.Context, q WatchQuery) (*Stream, error) {
	ctx, cancel := context.WithCancel(ctx)
	s := &Stream{c: c, q: q, ctx: ctx, cancel: cancel, ch: make(chan api.Notification), done: make(chan struct{})}
	if q.Replay {
		s.last, s.known = q.After, true
	}
	body, err := s.connect()
	if err != nil {
		cancel()
		return nil, err
	}
	go s.run(body)
	return s, nil
}

// Notifications returns the stream's notifications, in the server's commit order. The
// channel is closed when the stream ends: Err then says why.
func (s *Stream) Notifications() <-chan api.Notification { return s.ch }

// Err returns why the stream ended once Notifications is closed: nil after Close, the
// context's error, or the server's refusal to resume it (a *Error).
func (s *Stream) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	return s.err
}

// Close ends the stream and waits until its connection is closed.
func (s *Stream) Close() {
	s.mu.Lock()
	s.closed = s.closed || s.err == nil
	s.mu.Unlock()
	s.cancel()
	<-s.done
}

// connect opens the stream at its position.
func (s *Stream) connect() (io.ReadCloser, error) {
	u := *s.c.base
	u.Path += "/v1/events/stream"
	v := url.Values{}
	if s.q.LeaseID != "" {
		v.Set("lease_id", s.q.LeaseID)
	}
	if s.q.ProjectID != "" {
		v.Set("project_id", s.q.ProjectID)
	}
	if len(s.q.EventTypes) > 0 {
		v.Set("event_type", strings.Join(s.q.EventTypes, ","))
	}
	u.RawQuery = v.Encode()
	req, err := http.NewRequestWithContext(s.ctx, "GET", u.String(), nil)
	if err != nil {
		return nil, err
	}
	for k, vs := range s.c.Headers {
		req.Header[k] = vs
	}
	req.Header.Set("Accept", "text/event-stream")
	if s.c.token != "" {
		req.Header.Set("X-Auth-Token", s.c.token)
	}
	if s.known {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(s.last, 10))
	}
	resp, err := s.c.HTTP.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return nil, fmt.Errorf("cannot reach Climate at %s: %w", s.c.base, err)
	}
	if resp.StatusCode >= 400 {
		defer resp.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return nil, answerError(resp, data, "GET", "/v1/events/stream")
	}
	if mt := strings.TrimSpace(strings.Split(resp.Header.Get("Content-Type"), ";")[0]); resp.StatusCode != http.StatusOK || mt != "text/event-stream" {
		resp.Body.Close()
		return nil, &Error{Status: resp.StatusCode, Message: fmt.Sprintf("GET /v1/events/stream: the server answered %s with %q, not an event stream (is %s a Climate server?)", resp.Status, mt, s.c.base)}
	}
	return resp.Body, nil
}

// run reads the stream, reconnecting until ctx is done or the server refuses.
func (s *Stream) run(body io.ReadCloser) {
	defer close(s.done)
	defer close(s.ch)
	delay := reconnectFirst
	for {
		err := s.read(body)
		body.Close()
		if s.ctx.Err() != nil {
			s.fail(s.ctx.Err())
			return
		}
		var bad *protocolError
		if errors.As(err, &bad) {
			s.fail(err)
			return
		}
		if !errors.Is(err, errLagged) {
			delay = reconnectFirst // it was working: retry soon
			if !s.sleep(delay) {
				return
			}
		}
		for {
			body, err = s.connect()
			if err == nil {
				break
			}
			var apiErr *Error
			if errors.As(err, &apiErr) && apiErr.Status < 500 && apiErr.Status != http.StatusRequestTimeout && apiErr.Status != http.StatusTooManyRequests {
				s.fail(err) // refused for good (the lease was deleted, the token revoked, …)
				return
			}
			delay = min(2*delay, reconnectMost)
			if !s.sleep(delay) {
				return
			}
		}
	}
}

// sleep waits d, or reports false when ctx is done (and records it).
func (s *Stream) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-s.ctx.Done():
		s.fail(s.ctx.Err())
		return false
	case <-t.C:
		return true
	}
}

func (s *Stream) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
	}
}

// protocolError is a stream the client cannot read: reconnecting would not help.
type protocolError struct{ msg string }

func (e *protocolError) Error() string { return e.msg }

// read parses Server-Sent Events from body and delivers notifications until the body
// ends or fails (io.EOF and network errors: reconnect), the server says the stream
// lagged, or ctx is done.
func (s *Stream) read(body io.Reader) error {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 64<<10), maxEventBytes)
	var event, id string
	var data []string
	hasID := false
	for sc.Scan() {
		line := sc.Text()
		if line == "" { // dispatch
			if hasID {
				if n, err := strconv.ParseInt(id, 10, 64); err == nil {
					s.last, s.known = n, true
				}
			}
			typ, lines, payload := event, len(data), strings.Join(data, "\n")
			event, id, data, hasID = "", "", nil, false
			switch {
			case lines == 0:
				continue // no data: an id-only message (a position) or a comment
			case typ == "stream.lagged":
				return errLagged
			}
			var n api.Notification
			if err := json.Unmarshal([]byte(payload), &n); err != nil {
				return &protocolError{fmt.Sprintf("GET /v1/events/stream: event %q with data that is not a notification: %v", typ, err)}
			}
			select {
			case s.ch <- n:
			case <-s.ctx.Done():
				return s.ctx.Err()
			}
			continue
		}
		if line[0] == ':' {
			continue // a comment: the heartbeat
		}
		name, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch name {
		case "event":
			event = value
		case "data":
			data = append(data, value)
		case "id":
			id, hasID = value, true
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return &protocolError{fmt.Sprintf("GET /v1/events/stream: a line longer than %d bytes", maxEventBytes)}
		}
		return err
	}
	return io.EOF
}
