package http

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"climate/http/connlimit"
)

// Limits bound what one connection, and one client, can hold of the server: time to send
// a request, to read a response, to sit idle, and the number of connections open at once.
type Limits struct {
	// ReadHeaderTimeout bounds the time to receive a request's line and headers, counted
	// from the connection's opening or from the end of its idle wait.
	ReadHeaderTimeout time.Duration
	// BodyTimeout bounds the time to receive a request's body, counted from the end of its
	// headers. (Not http.Server.ReadTimeout: that deadline also cancels the context of a
	// handler still running when it passes, through the server's background read.)
	BodyTimeout time.Duration
	// WriteTimeout bounds the time from the end of a request's headers to the end of its
	// response: it must exceed the longest legitimate request.
	WriteTimeout time.Duration
	// IdleTimeout closes a keep-alive connection that sends no new request for this long.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's line and headers.
	MaxHeaderBytes int
	// MaxConnections and MaxConnectionsPerClient bound the connections open at once, in
	// all and per client address (0: no bound); see package connlimit.
	MaxConnections          int
	MaxConnectionsPerClient int
}

// Default limits. DefaultMaxConnections is an upper bound: a server also keeps below its
// open-file limit.
const (
	DefaultReadHeaderTimeout       = 10 * time.Second
	DefaultBodyTimeout             = 30 * time.Second
	DefaultWriteTimeout            = 60 * time.Second
	DefaultIdleTimeout             = 30 * time.Second
	DefaultMaxHeaderBytes          = 64 << 10
	DefaultMaxConnections          = 4096
	DefaultMaxConnectionsPerClient = 256
)

// DefaultLimits returns the default limits.
func DefaultLimits() Limits {
	return Limits{
		ReadHeaderTimeout: DefaultReadHeaderTimeout, BodyTimeout: DefaultBodyTimeout,
		WriteTimeout: DefaultWriteTimeout, IdleTimeout: DefaultIdleTimeout,
		MaxHeaderBytes: DefaultMaxHeaderBytes, MaxConnections: DefaultMaxConnections,
		MaxConnectionsPerClient: DefaultMaxConnectionsPerClient,
	}
}

// Check reports a limit that would leave the server unprotected or unusable: every
// timeout must be positive (a zero would mean none).
func (l Limits) Check() error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"read header timeout", l.ReadHeaderTimeout}, {"body timeout", l.BodyTimeout},
		{"write timeout", l.WriteTimeout}, {"idle timeout", l.IdleTimeout},
	} {
		if d.v <= 0 {
			return fmt.Errorf("%s %s: must be positive", d.name, d.v)
		}
	}
	if l.MaxHeaderBytes <= 0 {
		return fmt.Errorf("max header bytes %d: must be positive", l.MaxHeaderBytes)
	}
	if l.MaxConnections < 0 || l.MaxConnectionsPerClient < 0 {
		return errors.New("connection bounds must not be negative (0 means no bound)")
	}
	return nil
}

// NewHTTPServer returns the http.Server that serves h within lim, and ln wrapped so that
// it enforces lim's connection bounds: serve with srv.Serve(wrapped). Shedding and the
// server's own errors are logged to log.
func NewHTTPServer(h http.Handler, ln net.Listener, lim Limits, log *slog.Logger) (*http.Server, *connlimit.Listener) {
	if log == nil {
		log = slog.Default()
	}
	wrapped := connlimit.New(ln, connlimit.Config{Max: lim.MaxConnections, MaxPerClient: lim.MaxConnectionsPerClient, Logger: log})
	srv := &http.Server{
		Handler:           guardBody(h, lim.BodyTimeout),
		ReadHeaderTimeout: lim.ReadHeaderTimeout,
		WriteTimeout:      lim.WriteTimeout,
		IdleTimeout:       lim.IdleTimeout,
		MaxHeaderBytes:    lim.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	wrapped.Server(srv)
	return srv, wrapped
}

// unreadBodyGrace is how long the server still reads (and discards) the body of a request
// it answered without reading it, so that a client that is sending it promptly sees the
// connection end cleanly; a client that trickles it is cut off.
const unreadBodyGrace = time.Second

// guardBody bounds the time to receive a request's body, and makes an answer sent before
// the body was read close the connection at once. Without it, net/http would read (up to
// 256 KiB of) the unread body before sending such an answer, for keep-alive's sake: a
// client without a token could hold a connection by trickling a body the handler refused
// to read.
func guardBody(next http.Handler, timeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength == 0 { // no body; -1 is a body of unknown length
			next.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Now().Add(timeout))
		b := &watchedBody{ReadCloser: r.Body, rc: rc}
		r.Body = b
		next.ServeHTTP(&bodyGuardWriter{ResponseWriter: w, ctx: r.Context(), body: b, rc: rc}, r)
	})
}

// watchedBody notes when the body has been read to its end.
type watchedBody struct {
	io.ReadCloser
	rc  *http.ResponseController
	eof atomic.Bool
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.eof.Swap(true) {
		// The body deadline must not outlive the body: net/http now waits on the
		// connection in the background, and a deadline there cancels the request's
		// context.
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// bodyGuardWriter closes the connection after an answer sent before the body's end.
type bodyGuardWriter struct {
	http.ResponseWriter
	ctx   context.Context // the request's
	body  *watchedBody
	rc    *http.ResponseController
	wrote bool
}

func (w *bodyGuardWriter) WriteHeader(status int) {
	if !w.wrote && status >= 200 {
		w.wrote = true
		if !w.body.eof.Load() {
			// "Connection: close" makes net/http answer without reading the body first; the
			// deadline bounds its reading of the rest before it closes, and until then the
			// connection is the first to go if room is needed.
			w.Header().Set("Connection", "close")
			_ = w.rc.SetReadDeadline(time.Now().Add(unreadBodyGrace))
			connlimit.Expendable(w.ctx)
		}
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *bodyGuardWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *bodyGuardWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
