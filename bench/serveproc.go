package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Server is a "climate serve" subprocess: Cmd its process, URL where it listens ("" with
// --role engine).
type Server struct {
	Cmd      *exec.Cmd
	URL      string
	scanDone chan struct{}
	stderr   *CappedBuffer
	once     sync.Once
}

// StartServer runs "exe serve --listen 127.0.0.1:0" with args and returns once it
// listens (with --role engine: once its engine runs). Its stderr goes to logs too, when
// not nil.
func StartServer(ctx context.Context, exe string, args []string, logs io.Writer) (*Server, error) {
	return startServerIn(ctx, "", "127.0.0.1", exe, args, logs)
}

// startServerIn is StartServer in network namespace netns ("" for this process's),
// listening on listenIP. "ip netns exec" execs the server in place, so the process
// started is the server itself (its pid, signals and death signal).
func startServerIn(ctx context.Context, netns, listenIP, exe string, args []string, logs io.Writer) (*Server, error) {
	argv := append([]string{exe, "serve", "--listen", net.JoinHostPort(listenIP, "0")}, args...)
	if netns != "" {
		argv = append([]string{"ip", "netns", "exec", netns}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = envWithoutClimate(os.Environ()) // the server's settings are the flags only
	setDeathSignal(cmd)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	s := &Server{Cmd: cmd, scanDone: make(chan struct{}), stderr: &CappedBuffer{Max: 16 << 10}}
	cmd.Stderr = s.stderr
	if logs != nil {
		cmd.Stderr = io.MultiWriter(s.stderr, logs)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s serve: %w", exe, err)
	}
	urlc := make(chan string, 1)
	go func() {
		defer close(s.scanDone)
		lines := bufio.NewScanner(stdout)
		sent := false
		for lines.Scan() { // read to the end so the server never blocks on its stdout
			line := lines.Text()
			if i := strings.Index(line, "listening on "); i >= 0 && !sent {
				if f := strings.Fields(line[i+len("listening on "):]); len(f) > 0 {
					urlc <- f[0]
					sent = true
				}
			} else if strings.Contains(line, "event engine running") && !sent {
				urlc <- ""
				sent = true
			}
		}
	}()
	timeout := time.NewTimer(time.Minute)
	defer timeout.Stop()
	select {
	case s.URL = <-urlc:
		return s, nil
	case <-s.scanDone:
		s.Stop()
		msg := strings.TrimSpace(s.stderr.String())
		if i := strings.IndexByte(msg, '\n'); i >= 0 {
			msg = msg[:i]
		}
		return nil, fmt.Errorf("the server exited before listening: %s", msg)
	case <-ctx.Done():
		s.Stop()
		return nil, ctx.Err()
	case <-timeout.C:
		s.Stop()
		return nil, errors.New("the server did not listen within a minute")
	}
}

// Stop ends the server (SIGTERM, then SIGKILL after 10 s) and waits for it.
func (s *Server) Stop() {
	s.once.Do(func() {
		if err := s.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
			_ = s.Cmd.Process.Kill()
		}
		select {
		case <-s.scanDone:
		case <-time.After(10 * time.Second):
			_ = s.Cmd.Process.Kill()
			<-s.scanDone
		}
		_ = s.Cmd.Wait()
	})
}

// climateBinary returns exe or, when empty, this process's executable: the climate
// binary running "climate bench", which serves and attacks too.
func climateBinary(exe string) (string, error) {
	if exe != "" {
		return exe, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find this binary to start the server: %w", err)
	}
	return exe, nil
}

// envWithoutClimate drops CLIMATE_… variables, which would otherwise configure the server.
func envWithoutClimate(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, "CLIMATE_") {
			out = append(out, kv)
		}
	}
	return out
}

// CappedBuffer keeps the first max bytes written to it; safe for concurrent use.
type CappedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	Max int
}

func (b *CappedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.Max - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (b *CappedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
