package climate

import (
	"context"
	"errors"
)

// NotificationService serves notifications live, as they are committed (the API's event
// stream); package notify/stream implements it.
type NotificationService interface {
	// WatchNotifications opens a stream of the notifications who may see that match q.
	// Non-admins see their own project's only (naming another project is forbidden); a
	// lease of another project is not found. Without q.Replay, the stream holds every
	// notification committed after WatchNotifications returns (and possibly a few
	// committed just before). The caller must Close it.
	WatchNotifications(ctx context.Context, who Identity, q NotificationQuery) (NotificationStream, error)
}

// NotificationQuery selects the notifications a stream carries. Empty fields match all.
type NotificationQuery struct {
	ProjectID  string
	LeaseID    string
	EventTypes []string // any of these (lease.create, lease.event.start_lease, …)
	// Replay starts the stream with the outbox's notifications after Seq After (a client
	// resuming after the last one it saw), then goes on with live ones.
	Replay bool
	After  int64
}

// NotificationStream is an open stream of notifications, in Seq order, each once. It is
// read by one goroutine.
type NotificationStream interface {
	// Next returns the next notification, waiting for one until ctx is done. It returns
	// ErrStreamLagged once the reader fell so far behind that the stream was dropped
	// (resume after Position with a new stream), and ErrStreamClosed when the server stops.
	Next(ctx context.Context) (*Notification, error)
	// Position is a Seq up to which every matching notification has been returned by
	// Next: a new stream replaying after it misses nothing. It may pass the Seq of the
	// last notification returned when later ones did not match.
	Position() int64
	// Close ends the stream.
	Close()
}

// Errors that end a NotificationStream.
var (
	ErrStreamLagged = errors.New("the notification stream fell behind and was dropped")
	ErrStreamClosed = errors.New("the notification stream was closed: the server is stopping")
)
