// Package stream serves the notification outbox live (climate.NotificationService): one
// Hub per process tails the outbox when woken (after a commit of its own process, a
// NOTIFY from another replica, or a periodic re-read) and fans each new notification out
// to the subscribers whose query it matches, through a bounded buffer each. A subscriber
// that falls behind is dropped, not waited for, and resumes from its position by
// replaying the outbox. Whatever the number of subscribers, live notifications cost one
// read per wake-up; only replays read for one subscriber.
package stream

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"climate"
	"climate/policy"
)

// Config tunes a Hub.
type Config struct {
	// MaxSleep bounds how long the hub waits, while it has subscribers, before it re-reads
	// the outbox without being woken: other processes' commits cannot wake it (an SQLite
	// engine in another process), and a lost NOTIFY is covered. Default 1 s.
	MaxSleep time.Duration
	// Buffer is how many notifications a subscriber may have waiting before it is dropped
	// (default 256): the bound on what a slow reader makes the server hold.
	Buffer int
	Logger *slog.Logger
	// Policy decides who may watch (rule blazar:leases:get); nil means the default rules,
	// policy.Default().
	Policy climate.Policy
}

// Defaults.
const (
	DefaultMaxSleep = time.Second
	DefaultBuffer   = 256
	// readBatch is how many notifications one live read takes; replayBatch one replay read,
	// smaller since every replaying subscriber holds one batch.
	readBatch   = 500
	replayBatch = 64
)

// Hub fans the outbox out to subscribers; it implements climate.NotificationService.
type Hub struct {
	store climate.Store
	cfg   Config
	wake  chan struct{}

	mu sync.Mutex
	// last is the highest Seq fanned out: every subscriber registered has been offered
	// each matching notification up to it (or needed none: see register).
	last int64
	// lastPub is last, for subscribers' Position without the lock; it is stored after the
	// notifications up to it were offered.
	lastPub atomic.Int64
	// subs holds registered subscribers by the project they watch ("": every project).
	subs   map[string]map[*subscription]struct{}
	nsubs  int
	closed bool
}

// New returns a hub on store; call Run to start it, and Wake after commits that wrote
// notifications.
func New(store climate.Store, cfg Config) *Hub {
	if cfg.MaxSleep <= 0 {
		cfg.MaxSleep = DefaultMaxSleep
	}
	if cfg.Buffer <= 0 {
		cfg.Buffer = DefaultBuffer
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Policy == nil {
		cfg.Policy = policy.Default()
	}
	return &Hub{store: store, cfg: cfg, wake: make(chan struct{}, 1), subs: map[string]map[*subscription]struct{}{}}
}

// Wake makes the hub read the outbox now. It never blocks.
func (h *Hub) Wake() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// Subscribers returns how many subscribers are registered (for tests and logs).
func (h *Hub) Subscribers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.nsubs
}

// Run reads and fans out until ctx is done, then ends every subscription with
// climate.ErrStreamClosed.
func (h *Hub) Run(ctx context.Context) error {
	defer h.close()
	for {
		var timeout <-chan time.Time // none: sleep until woken
		err := h.poll(ctx)
		if ctx.Err() != nil {
			return nil
		}
		var t *time.Timer
		switch {
		case err != nil:
			h.cfg.Logger.Error("notification stream: reading the outbox failed; retrying", "err", err, "in", time.Second)
			t = time.NewTimer(time.Second)
		case h.Subscribers() > 0:
			t = time.NewTimer(h.cfg.MaxSleep)
		}
		if t != nil {
			timeout = t.C
		}
		select {
		case <-ctx.Done():
		case <-h.wake:
		case <-timeout:
		}
		if t != nil {
			t.Stop()
		}
	}
}

// poll reads the notifications after last and offers them, until it has read them all.
// With nobody subscribed it reads nothing (register moves last forward).
func (h *Hub) poll(ctx context.Context) error {
	for {
		h.mu.Lock()
		after, n := h.last, h.nsubs
		h.mu.Unlock()
		if n == 0 {
			return nil
		}
		var batch []climate.Notification
		err := h.store.View(ctx, func(tx climate.Tx) error {
			var err error
			batch, err = tx.Notifications(ctx, after, readBatch)
			return err
		})
		if err != nil {
			return err
		}
		h.publish(batch)
		if len(batch) < readBatch {
			return nil
		}
	}
}

// publish offers each notification after last to the subscribers it matches. A
// subscriber whose buffer is full is dropped on the spot: the hub never waits for one.
func (h *Hub) publish(batch []climate.Notification) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range batch {
		if batch[i].Seq <= h.last {
			continue // a subscriber registered meanwhile moved last past it
		}
		// Its own copy, so that a slow subscriber holding it keeps no batch alive.
		n := new(climate.Notification)
		*n = batch[i]
		for _, set := range [2]map[*subscription]struct{}{h.subs[""], h.subs[n.ProjectID]} {
			for s := range set {
				if n.Seq <= s.skip || !s.matches(n) {
					continue
				}
				select {
				case s.ch <- n:
				default:
					h.unregister(s, &s.lagged)
				}
			}
		}
		h.last = n.Seq
	}
	h.lastPub.Store(h.last)
}

// register adds s, which has read the outbox up to s.cursor, to the subscribers. If
// the hub is ahead of it, s reads the gap (cursor, last] from the store itself; if it is
// behind, the hub skips for s what s has already read.
func (h *Hub) register(s *subscription) bool {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return false
	}
	switch {
	case h.last > s.cursor:
		s.gapTo = h.last
	case h.nsubs == 0:
		// Nobody listened, so the hub read nothing: nothing before s.cursor is wanted.
		h.last = s.cursor
		h.lastPub.Store(h.last)
	}
	s.skip = s.cursor
	set := h.subs[s.q.ProjectID]
	if set == nil {
		set = map[*subscription]struct{}{}
		h.subs[s.q.ProjectID] = set
	}
	set[s] = struct{}{}
	h.nsubs++
	s.registered = true
	h.mu.Unlock()
	h.Wake() // read what s may be waiting for now, and start re-reading periodically
	return true
}

// unregister removes s (if still registered) and ends its channel; why, when not nil,
// is set first, for s to tell why its channel closed. The caller holds h.mu.
func (h *Hub) unregister(s *subscription, why *atomic.Bool) {
	set := h.subs[s.q.ProjectID]
	if _, ok := set[s]; !ok {
		return
	}
	delete(set, s)
	if len(set) == 0 {
		delete(h.subs, s.q.ProjectID)
	}
	h.nsubs--
	if why != nil {
		why.Store(true)
	}
	close(s.ch)
}

// close ends every subscription: the process is stopping.
func (h *Hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for _, set := range h.subs {
		for s := range set {
			h.unregister(s, &s.ended)
		}
	}
}

// WatchNotifications implements climate.NotificationService. Reading is Blazar's
// project_reader_or_admin rule, as for leases.
func (h *Hub) WatchNotifications(ctx context.Context, who climate.Identity, q climate.NotificationQuery) (climate.NotificationStream, error) {
	if err := h.cfg.Policy.Check(who, "blazar:leases:get", who.OwnTarget()); err != nil {
		return nil, err
	}
	if !who.IsAdmin() {
		if q.ProjectID != "" && q.ProjectID != who.ProjectID {
			return nil, climate.Errorf(climate.CodeForbidden, "Only admins may watch the notifications of another project")
		}
		q.ProjectID = who.ProjectID
	}
	for _, t := range q.EventTypes {
		if !climate.KnownNotificationType(t) {
			return nil, climate.Errorf(climate.CodeInvalid, "Unknown event_type %q: expected one of %s", t, strings.Join(climate.NotificationTypes(), ", "))
		}
	}
	if q.After < 0 {
		return nil, climate.Errorf(climate.CodeInvalid, "Invalid notification id %d: expected a non-negative integer", q.After)
	}
	s := &subscription{h: h, q: q, ch: make(chan *climate.Notification, h.cfg.Buffer), cursor: q.After}
	err := h.store.View(ctx, func(tx climate.Tx) error {
		if q.LeaseID != "" {
			l, err := tx.GetLease(ctx, q.LeaseID)
			if err != nil {
				return err
			}
			if !who.IsAdmin() && l.ProjectID != who.ProjectID {
				// As if it did not exist: other projects' ids are not confirmed.
				return climate.Errorf(climate.CodeNotFound, "Object with {'lease_id': '%s'} not found", q.LeaseID)
			}
			if err := h.cfg.Policy.Check(who, "blazar:leases:get", climate.Target{ProjectID: l.ProjectID, UserID: l.UserID}); err != nil {
				return err
			}
		}
		last, err := tx.LastNotificationSeq(ctx)
		if !q.Replay || s.cursor > last {
			// Live; or a position the outbox has not reached (a client of a database
			// since restored): from its end.
			s.cursor = last
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	s.pos = s.cursor
	if !q.Replay && !h.register(s) {
		// Live: registered before returning, so that nothing committed from now on is missed.
		return nil, climate.ErrStreamClosed
	}
	return s, nil
}

// subscription is one stream. Its fields below the hub's are the reader's own.
type subscription struct {
	h  *Hub
	q  climate.NotificationQuery
	ch chan *climate.Notification
	// skip: the hub offers only notifications after it (set under h.mu at register).
	skip int64
	// lagged and ended say why ch was closed: dropped for falling behind, or the hub
	// stopped. Each is stored before the close.
	lagged, ended atomic.Bool

	// cursor is how far the store has been read for this subscription (replay, gap);
	// queue holds what that read matched and Next has not returned yet.
	cursor int64
	queue  []climate.Notification
	// registered: the hub offers live notifications; gapTo: the store is read up to it
	// first, as the hub had passed the cursor when s registered.
	registered bool
	gapTo      int64
	// pos: every matching notification up to it has been returned.
	pos    int64
	closed bool
}

func (s *subscription) matches(n *climate.Notification) bool {
	return (s.q.ProjectID == "" || n.ProjectID == s.q.ProjectID) &&
		(s.q.LeaseID == "" || n.LeaseID == s.q.LeaseID) &&
		(len(s.q.EventTypes) == 0 || slices.Contains(s.q.EventTypes, n.EventType))
}

// Next implements climate.NotificationStream: the replay from the store first, then
// the notifications the hub offers.
func (s *subscription) Next(ctx context.Context) (*climate.Notification, error) {
	for {
		if len(s.queue) > 0 {
			n := &s.queue[0]
			s.queue = s.queue[1:]
			s.pos = n.Seq
			if len(s.queue) == 0 {
				s.queue, s.pos = nil, s.cursor
			}
			return n, nil
		}
		if s.closed {
			return nil, climate.ErrStreamClosed
		}
		switch {
		case !s.registered:
			full, err := s.read(ctx, 0)
			if err != nil {
				return nil, err
			}
			if !full && !s.h.register(s) { // caught up: live from here
				return nil, climate.ErrStreamClosed
			}
			continue
		case s.cursor < s.gapTo:
			if _, err := s.read(ctx, s.gapTo); err != nil {
				return nil, err
			}
			continue
		}
		select {
		case n, ok := <-s.ch:
			if !ok {
				if s.lagged.Load() {
					return nil, climate.ErrStreamLagged
				}
				return nil, climate.ErrStreamClosed
			}
			if n.Seq <= s.pos {
				continue
			}
			s.pos = n.Seq
			return n, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// read reads the store after the cursor, up to upTo when it is positive, queueing what
// matches; it reports whether it read a whole batch (more may follow).
func (s *subscription) read(ctx context.Context, upTo int64) (bool, error) {
	var batch []climate.Notification
	err := s.h.store.View(ctx, func(tx climate.Tx) error {
		var err error
		batch, err = tx.Notifications(ctx, s.cursor, replayBatch)
		return err
	})
	if err != nil {
		return false, err
	}
	done := false
	for i := range batch {
		n := &batch[i]
		if upTo > 0 && n.Seq > upTo {
			done = true
			break
		}
		if s.matches(n) {
			s.queue = append(s.queue, *n)
		}
		s.cursor = n.Seq
	}
	if upTo > 0 && (done || len(batch) < replayBatch) {
		// Everything up to upTo is read, even where Seqs were skipped (rolled back).
		s.cursor = upTo
	}
	if len(s.queue) == 0 {
		s.pos = s.cursor
	}
	return len(batch) == replayBatch, nil
}

// Position implements climate.NotificationStream.
func (s *subscription) Position() int64 {
	if len(s.queue) > 0 || !s.registered || s.cursor < s.gapTo {
		return s.pos
	}
	// Live: the hub offered s every match up to lastPub, and what it offered was
	// returned if the buffer is empty, unless s was dropped meanwhile.
	last := s.h.lastPub.Load()
	if len(s.ch) > 0 || s.lagged.Load() || s.ended.Load() {
		return s.pos
	}
	return max(s.pos, last)
}

// Close implements climate.NotificationStream.
func (s *subscription) Close() {
	if s.closed {
		return
	}
	s.closed = true
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	s.h.unregister(s, nil)
}
