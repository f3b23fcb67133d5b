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
//
// It costs the machine it measures little: every direction's chunks go through one delay
// line, a queue in the order they were read, which with one delay for all is the order
// they fall due, so a single goroutine sleeps until the first is due and writes every
// chunk due by then, and the chunks' buffers are reused. (One sleeping goroutine a
// direction, each sleeping a thread for every chunk, took about 1.1 ms of CPU a lease
// creation at 16 clients, as much as the server.)
type forwarder struct {
	ln     net.Listener
	target string
	delay  time.Duration
	line   chan chunk
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
}

// chunk is what a direction read, to be written to its destination at due; a chunk
// without data ends the direction.
type chunk struct {
	dir  *direction
	data []byte
	buf  *[]byte // data's buffer, back to chunkBufs once written
	due  time.Time
}

// direction is one way of a joined connection. failed is the delay line's own.
type direction struct {
	src, dst net.Conn
	failed   bool
	done     chan struct{} // closed once its end was passed on
}

var chunkBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// startForwarder listens on listen (HOST:PORT, port 0 for any).
func startForwarder(listen, target string, delay time.Duration) (*forwarder, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	f := &forwarder{ln: ln, target: target, delay: delay, conns: map[net.Conn]struct{}{}, line: make(chan chunk, 1<<14)}
	f.wg.Add(2)
	go f.accept()
	go f.deliver()
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
	var joins sync.WaitGroup
	defer func() {
		joins.Wait()
		close(f.line) // no reader is left to queue a chunk: the delay line may end
	}()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return // closed
		}
		joins.Add(1)
		go func() {
			defer joins.Done()
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
	up, down := f.copy(c, t), f.copy(t, c)
	<-up
	<-down
}

// copy reads src until it ends and passes what it reads to dst, through the delay line
// when there is a delay; the channel returned is closed once the end was passed on.
func (f *forwarder) copy(src, dst net.Conn) <-chan struct{} {
	d := &direction{src: src, dst: dst, done: make(chan struct{})}
	if f.delay <= 0 {
		go func() {
			defer close(d.done)
			_, _ = io.Copy(dst, src)
			closeWrite(dst)
		}()
		return d.done
	}
	go func() {
		for {
			buf := chunkBufs.Get().(*[]byte)
			n, err := src.Read(*buf)
			if n > 0 {
				f.line <- chunk{dir: d, data: (*buf)[:n], buf: buf, due: time.Now().Add(f.delay)}
			} else {
				chunkBufs.Put(buf)
			}
			if err != nil {
				f.line <- chunk{dir: d, due: time.Now().Add(f.delay)}
				return
			}
		}
	}()
	return d.done
}

// deliver is the delay line: it writes each chunk once due, and passes each direction's
// end on after its last chunk.
func (f *forwarder) deliver() {
	defer f.wg.Done()
	for c := range f.line {
		sleepUntil(c.due)
		d := c.dir
		switch {
		case c.buf == nil: // the end
			closeWrite(d.dst)
			close(d.done)
		case !d.failed:
			if _, err := d.dst.Write(c.data); err != nil {
				d.failed = true
				d.src.Close() // nothing more can be delivered: end the reader
			}
		}
		if c.buf != nil {
			chunkBufs.Put(c.buf)
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
