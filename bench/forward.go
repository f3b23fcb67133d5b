package bench

import (
	"io"
	"net"
	"sync"
	"time"
)

// forwarder accepts TCP connections and joins each to a new connection to target,
// holding every chunk read for delay before writing it on, in order: the latency of a
// link (not its bandwidth). With --database-delay it is how servers in the benchmark's
// network namespace reach a database listening on loopback here.
type forwarder struct {
	ln     net.Listener
	target string
	delay  time.Duration
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
}

// startForwarder listens on listen (HOST:PORT, port 0 for any).
func startForwarder(listen, target string, delay time.Duration) (*forwarder, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	f := &forwarder{ln: ln, target: target, delay: delay, conns: map[net.Conn]struct{}{}}
	f.wg.Add(1)
	go f.accept()
	return f, nil
}

func (f *forwarder) addr() string { return f.ln.Addr().String() }

// close stops accepting, cuts every connection and waits for their copies to end.
func (f *forwarder) close() {
	f.ln.Close()
	f.mu.Lock()
	for c := range f.conns {
		c.Close()
	}
	f.conns = nil
	f.mu.Unlock()
	f.wg.Wait()
}

// track remembers c for close, or closes it at once when the forwarder is closed.
func (f *forwarder) track(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conns == nil {
		c.Close()
		return false
	}
	f.conns[c] = struct{}{}
	return true
}

func (f *forwarder) untrack(c net.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.conns, c)
	c.Close()
}

func (f *forwarder) accept() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return // closed
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			f.join(c)
		}()
	}
}

// join copies c to a new connection to the target and back until both directions end.
func (f *forwarder) join(c net.Conn) {
	if !f.track(c) {
		return
	}
	defer f.untrack(c)
	t, err := net.DialTimeout("tcp", f.target, 10*time.Second)
	if err != nil {
		return // the client sees its connection closed, as with a refused one
	}
	if !f.track(t) {
		return
	}
	defer f.untrack(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		delayedCopy(t, c, f.delay)
	}()
	delayedCopy(c, t, f.delay)
	<-done
}

// delayedCopy writes what src sends to dst, each chunk delay after it was read, then
// half-closes dst so that its reader sees the end too.
func delayedCopy(dst, src net.Conn, delay time.Duration) {
	defer closeWrite(dst)
	if delay <= 0 {
		_, _ = io.Copy(dst, src)
		return
	}
	type chunk struct {
		data []byte
		due  time.Time
	}
	chunks := make(chan chunk, 256)
	go func() {
		defer close(chunks)
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				chunks <- chunk{buf[:n], time.Now().Add(delay)}
			}
			if err != nil {
				return
			}
		}
	}()
	failed := false
	for c := range chunks {
		if failed {
			continue // drain, so the reader ends
		}
		sleepUntil(c.due)
		if _, err := dst.Write(c.data); err != nil {
			failed = true
			src.Close() // nothing more can be delivered: end the reader
		}
	}
}

func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
		return
	}
	c.Close()
}
