package http

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"climate"
	"climate/http/api"
)

// Event stream defaults: a comment line keeps a quiet stream open through proxies that
// close idle connections, and each write may take streamWriteTimeout (the server's
// WriteTimeout bounds whole answers, which a stream never ends).
const (
	DefaultStreamHeartbeat = 15 * time.Second
	streamWriteTimeout     = 30 * time.Second
	// streamRetry is the reconnection delay the stream suggests to EventSource clients.
	streamRetry = time.Second
)

// LaggedEvent is the event type of the stream's last event when the client fell behind and
// was dropped: it reconnects with Last-Event-ID to resume.
const LaggedEvent = "stream.lagged"

// eventStream is an open notification stream, answered by writeStream.
type eventStream struct{ sub climate.NotificationStream }

// streamEvents opens GET /v1/events/stream[?lease_id=…][&event_type=…][&project_id=…]
// [&after=SEQ]; Last-Event-ID, sent by a reconnecting client, wins over after.
func (s *Server) streamEvents(r *http.Request, who climate.Identity) (int, any, error) {
	v := r.URL.Query()
	q := climate.NotificationQuery{LeaseID: v.Get("lease_id"), ProjectID: v.Get("project_id"), EventTypes: listValues(v, "event_type")}
	from, name := v.Get("after"), "Query parameter after"
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		from, name = id, "Last-Event-ID"
	}
	if from != "" || v.Has("after") {
		n, err := strconv.ParseInt(strings.TrimSpace(from), 10, 64)
		if err != nil || n < 0 {
			return 0, nil, climate.Errorf(climate.CodeInvalid, "%s %q is not a notification id (the id of an event of this stream: a non-negative integer)", name, from)
		}
		q.Replay, q.After = true, n
	}
	sub, err := s.Notifications.WatchNotifications(r.Context(), who, q)
	if errors.Is(err, climate.ErrStreamClosed) {
		return http.StatusServiceUnavailable, &eventStream{}, nil // stopping: try another replica, or later
	}
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, &eventStream{sub: sub}, nil
}

// writeStream sends notifications as Server-Sent Events until the client goes away, falls
// behind, or the server stops: each as "id: SEQ", "event: TYPE", "data: JSON". The first
// message gives the stream's starting position as an id (so a client that reconnects
// before any event misses nothing), and heartbeats are comment lines that carry, as an id,
// how far the stream has passed notifications the client did not ask for.
func (s *Server) writeStream(w http.ResponseWriter, r *http.Request, es *eventStream) {
	if es.sub == nil {
		w.Header().Set("Retry-After", "1")
		s.writeErrorStatus(w, r, http.StatusServiceUnavailable, "The server is stopping: reconnect in a moment.")
		return
	}
	defer es.sub.Close()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	rc := http.NewResponseController(w)
	out := bufio.NewWriter(w)
	sent := es.sub.Position()
	fmt.Fprintf(out, "retry: %d\nid: %d\n\n", streamRetry.Milliseconds(), sent)
	heartbeat := s.StreamHeartbeat
	if heartbeat <= 0 {
		heartbeat = DefaultStreamHeartbeat
	}
	for {
		// Each write gets its own deadline, so only a client that stops reading is cut
		// off (and the hub drops it long before it buffers much: see notify/stream).
		_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
		if err := out.Flush(); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), heartbeat)
		n, err := es.sub.Next(ctx)
		cancel()
		switch {
		case err == nil:
			data, err := json.Marshal(api.NotificationOf(n))
			if err != nil {
				s.Logger.Error("notification not sent: cannot encode it", "seq", n.Seq, "err", err)
				return
			}
			fmt.Fprintf(out, "id: %d\nevent: %s\ndata: %s\n\n", n.Seq, n.EventType, data)
			sent = n.Seq
		case errors.Is(err, context.DeadlineExceeded) && r.Context().Err() == nil:
			out.WriteString(": heartbeat\n")
			if p := es.sub.Position(); p > sent {
				fmt.Fprintf(out, "id: %d\n", p) // no data: moves the client's Last-Event-ID only
				sent = p
			}
			out.WriteString("\n")
		case errors.Is(err, climate.ErrStreamLagged):
			data, _ := json.Marshal(map[string]any{
				"error_message": "This stream fell behind the notifications and was closed: reconnect with Last-Event-ID to resume.",
				"last_event_id": strconv.FormatInt(sent, 10),
			})
			fmt.Fprintf(out, "event: %s\ndata: %s\n\n", LaggedEvent, data)
			_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
			_ = out.Flush()
			s.Logger.Info("event stream dropped: the client fell behind", "position", sent)
			return
		default: // the client went away, or the server stops (the client reconnects)
			if r.Context().Err() == nil && !errors.Is(err, climate.ErrStreamClosed) {
				s.Logger.Error("event stream ended", "err", err)
			}
			return
		}
	}
}
