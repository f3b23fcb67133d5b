package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The attack of bench soak runs in a process of its own: "climate bench soak-attack"
// (hidden). It reads the member's token from its first line of stdin, holds its
// connections until stdin ends, and writes its counts to stdout as JSON lines, twice a
// second and once at the end ("final": true).

// soakAttackStats is one line of the attack process's output.
type soakAttackStats struct {
	Held           int              `json:"held"`
	Dialed         int64            `json:"dialed"`
	DialErrors     int64            `json:"dial_errors"`
	ClosedByServer int64            `json:"closed_by_server"`
	Answers        map[string]int64 `json:"answers,omitempty"`
	Final          bool             `json:"final,omitempty"`
}

// SoakAttackOptions are the hidden "bench soak-attack" command's settings.
type SoakAttackOptions struct {
	Addr                                       string
	Idle, SlowHeader, SlowBody, SlowBodyNoAuth int
	Addresses                                  int
	Trickle, Reconnect                         time.Duration
}

// SoakAttack runs the hidden "bench soak-attack" command: the attack of bench soak.
func SoakAttack(ctx context.Context, o *SoakAttackOptions, stdin io.Reader, stdout io.Writer) error {
	if err := checkLoopbackURL("http://" + o.Addr); err != nil {
		return err
	}
	if o.Trickle <= 0 || o.Reconnect <= 0 || o.Addresses < 0 || o.Addresses > 250 {
		return errors.New("bad --trickle, --reconnect or --addresses")
	}
	in := bufio.NewReader(stdin)
	token, err := in.ReadString('\n')
	if err != nil {
		return errors.New("want the token on the first line of stdin")
	}
	total := o.Idle + o.SlowHeader + o.SlowBody + o.SlowBodyNoAuth
	if soft, hard, err := raiseOpenFileLimit(); err == nil && soft < uint64(total)+64 {
		return fmt.Errorf("the open-file limit is %d (hard %d), not enough for %d connections", soft, hard, total)
	}
	a := &soakAttacker{addr: o.Addr, token: strings.TrimSpace(token), trickle: o.Trickle, reconnect: o.Reconnect,
		dialSem: make(chan struct{}, 128), answers: map[string]int64{}}
	for i := range o.Addresses {
		a.sources = append(a.sources, net.IPv4(127, 0, 0, byte(2+i)))
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stdinDone := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, in); close(stdinDone) }()

	// The kinds start in a random order, so that each gets its share of the first places.
	var kinds []soakKind
	for kind, n := range map[soakKind]int{soakIdle: o.Idle, soakSlowHeader: o.SlowHeader, soakSlowBody: o.SlowBody, soakSlowBodyNoAuth: o.SlowBodyNoAuth} {
		for range n {
			kinds = append(kinds, kind)
		}
	}
	mrand.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	var wg sync.WaitGroup
	for i, kind := range kinds {
		wg.Add(1)
		go func() { defer wg.Done(); a.run(ctx, i, kind) }()
	}
	enc := json.NewEncoder(stdout)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			if err := enc.Encode(a.stats()); err != nil {
				return err
			}
			continue
		case <-stdinDone:
		case <-ctx.Done():
		}
		break
	}
	final := a.stats()
	cancel()
	wg.Wait()
	final.Answers, final.Final = a.answerCounts(), true
	st := a.stats()
	final.Dialed, final.DialErrors, final.ClosedByServer = st.Dialed, st.DialErrors, st.ClosedByServer
	return enc.Encode(final)
}

func (a *soakAttacker) stats() soakAttackStats {
	return soakAttackStats{Held: int(a.open.Load()), Dialed: a.dialed.Load(), DialErrors: a.dialErrors.Load(), ClosedByServer: a.closedByServer.Load()}
}

// soakAttackProc is the attack process, seen from bench soak.
type soakAttackProc struct {
	cmd      *exec.Cmd
	stdin    io.WriteCloser
	stderr   *CappedBuffer
	done     chan struct{} // closed when its output ends
	mu       sync.Mutex
	last     soakAttackStats
	reported bool
	final    *soakAttackStats
}

// startSoakAttack starts the attack process against host with o's counts.
func startSoakAttack(exe string, o *SoakOptions, host string, addresses int, token string) (*soakAttackProc, error) {
	cmd := exec.Command(exe, "bench", "soak-attack", "--addr", host,
		"--idle", strconv.Itoa(o.Idle), "--slow-header", strconv.Itoa(o.SlowHeader),
		"--slow-body", strconv.Itoa(o.SlowBody), "--slow-body-noauth", strconv.Itoa(o.SlowBodyNoAuth),
		"--addresses", strconv.Itoa(addresses), "--trickle", o.Trickle.String(), "--reconnect", o.Reconnect.String())
	cmd.Env = envWithoutClimate(os.Environ())
	setDeathSignal(cmd)
	a := &soakAttackProc{cmd: cmd, stderr: &CappedBuffer{Max: 4 << 10}, done: make(chan struct{})}
	cmd.Stderr = a.stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the attack process: %w", err)
	}
	a.stdin = stdin
	if _, err := io.WriteString(stdin, token+"\n"); err != nil { // not on the command line, where ps shows it
		a.kill()
		return nil, err
	}
	go func() {
		defer close(a.done)
		dec := json.NewDecoder(stdout)
		for {
			var st soakAttackStats
			if err := dec.Decode(&st); err != nil {
				return
			}
			a.mu.Lock()
			a.last, a.reported = st, true
			if st.Final {
				a.final = &st
			}
			a.mu.Unlock()
		}
	}()
	return a, nil
}

// latest returns the last counts the attack process reported, if any yet.
func (a *soakAttackProc) latest() (soakAttackStats, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.last, a.reported
}

// finish ends the attack (closing its stdin) and returns its final counts.
func (a *soakAttackProc) finish() (*soakAttackStats, error) {
	_ = a.stdin.Close()
	<-a.done
	err := a.cmd.Wait()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.final == nil {
		msg := strings.TrimSpace(a.stderr.String())
		if err == nil {
			err = errors.New("no final counts")
		}
		return nil, fmt.Errorf("the attack process failed: %v: %s", err, msg)
	}
	return a.final, nil
}

// kill stops the attack process if it still runs.
func (a *soakAttackProc) kill() {
	if a.cmd.ProcessState == nil {
		_ = a.cmd.Process.Kill()
		<-a.done
		_ = a.cmd.Wait()
	}
}

type soakKind int

const (
	soakIdle soakKind = iota
	soakSlowHeader
	soakSlowBody
	soakSlowBodyNoAuth
)

// soakAttacker holds attack connections.
type soakAttacker struct {
	addr               string
	sources            []net.IP
	token              string
	trickle, reconnect time.Duration
	dialSem            chan struct{}

	open, dialed, dialErrors, closedByServer atomic.Int64

	mu      sync.Mutex
	answers map[string]int64
}

func (a *soakAttacker) answer(status string) {
	a.mu.Lock()
	a.answers[status]++
	a.mu.Unlock()
}

func (a *soakAttacker) answerCounts() map[string]int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return maps.Clone(a.answers)
}

// run keeps attack connection i of kind open until ctx is done, reopening it after about
// a.reconnect whenever the server closes it.
func (a *soakAttacker) run(ctx context.Context, i int, kind soakKind) {
	d := net.Dialer{Timeout: 10 * time.Second}
	if len(a.sources) > 0 {
		d.LocalAddr = &net.TCPAddr{IP: a.sources[i%len(a.sources)]}
	}
	for ctx.Err() == nil {
		select {
		case a.dialSem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		c, err := d.DialContext(ctx, "tcp", a.addr)
		<-a.dialSem
		if err != nil {
			if ctx.Err() == nil {
				a.dialErrors.Add(1)
			}
		} else {
			a.dialed.Add(1)
			a.open.Add(1)
			byServer := a.hold(ctx, c, kind)
			a.open.Add(-1)
			c.Close()
			if !byServer {
				return
			}
			a.closedByServer.Add(1)
		}
		// Reopen after reconnect × [0.5, 1.5), so that reconnections spread out.
		t := time.NewTimer(time.Duration(float64(a.reconnect) * (0.5 + mrand.Float64())))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}

// hold plays one attack connection until the server closes it (true) or ctx is done.
func (a *soakAttacker) hold(ctx context.Context, c net.Conn, kind soakKind) bool {
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	var start string
	switch kind {
	case soakIdle:
		start = "GET /versions HTTP/1.1\r\nHost: soak\r\n\r\n"
	case soakSlowHeader:
		start = "GET /versions HTTP/1.1\r\nHost: soak\r\nX-Slow: "
	case soakSlowBody:
		start = "POST /v1/leases HTTP/1.1\r\nHost: soak\r\nX-Auth-Token: " + a.token + "\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
	case soakSlowBodyNoAuth:
		start = "POST /v1/leases HTTP/1.1\r\nHost: soak\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
	}
	if _, err := io.WriteString(c, start); err != nil {
		return a.closed(ctx, nil)
	}
	buf := make([]byte, 512)
	if kind == soakIdle {
		// Read the answer, then wait, idle, for the server to close.
		r := bufio.NewReaderSize(c, 512)
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			return a.closed(ctx, nil)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusMultipleChoices { // refused
			return a.closed(ctx, []byte(resp.Proto+" "+resp.Status))
		}
		_, _ = io.Copy(io.Discard, r)
		return a.closed(ctx, nil)
	}
	// Slow: a byte per trickle, until the server answers or closes. The first wait is
	// random, so that thousands of connections do not send in step.
	wait := time.Duration(mrand.Int64N(int64(a.trickle)) + 1)
	for {
		_ = c.SetReadDeadline(time.Now().Add(wait))
		wait = a.trickle
		n, err := c.Read(buf)
		if n > 0 {
			return a.closed(ctx, buf[:n])
		}
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			return a.closed(ctx, nil)
		}
		if _, err := c.Write([]byte("a")); err != nil {
			return a.closed(ctx, nil)
		}
	}
}

// closed records how the server ended a connection (its answer's status, if any) and
// reports whether it was the server (not ctx).
func (a *soakAttacker) closed(ctx context.Context, answer []byte) bool {
	if ctx.Err() != nil {
		return false
	}
	status := "none"
	if len(answer) >= 12 && bytes.HasPrefix(answer, []byte("HTTP/1.")) {
		status = string(answer[9:12])
	}
	a.answer(status)
	return true
}
