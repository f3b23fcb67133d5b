package bench

import (
	"bytes"
	"context"
	_ "embed" // netem.sh
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"time"
)

// netemScript sets up and removes the network of --database-delay; embedded so that the
// binary needs no file beside it (run as "bash -c SCRIPT netem.sh up|down").
//
//go:embed netem.sh
var netemScript string

// linkNames name the namespace, the veth pair and its /30 subnet (netem.sh's NETNS, VETH
// and SUBNET): this side is SUBNET.1, the namespace's SUBNET.2.
type linkNames struct{ netns, veth, subnet string }

var benchLink = linkNames{netns: "climate-bench", veth: "cbench", subnet: "10.213.77"}

// delayedLink is the network of --database-delay: servers run in a namespace of their own
// and reach the database through a forwarder on this side of a veth pair; half the round
// trip is added in each direction, by tc netem on the pair when the kernel has it, else
// by the forwarder.
type delayedLink struct {
	names    linkNames
	rtt      time.Duration
	netem    bool   // the delay is on the link: the clients' HTTP crosses it too
	database string // the servers' --database: the forwarder's address for the database's
	fwd      *forwarder
}

// serverIP is where servers in the namespace listen, reachable from this side.
func (l *delayedLink) serverIP() string { return l.names.subnet + ".2" }

// databaseHost parses the PostgreSQL URL database and returns it, its host:port (port
// 5432 by default), and whether the host is this one's loopback.
func databaseHost(database string) (u *url.URL, hostPort string, loopback bool, err error) {
	if u, err = url.Parse(database); err != nil {
		return nil, "", false, errors.New("--database is not a URL")
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "5432"
	}
	ip := net.ParseIP(host)
	return u, net.JoinHostPort(host, port), host == "localhost" || ip != nil && ip.IsLoopback(), nil
}

// openDelayedLink sets the link up for the PostgreSQL URL database, which must name a
// loopback address: the forwarder only reaches this host's loopback.
func openDelayedLink(ctx context.Context, names linkNames, database string, rtt time.Duration) (*delayedLink, error) {
	u, hostPort, loopback, err := databaseHost(database)
	if err != nil {
		return nil, fmt.Errorf("--database-delay: %w", err)
	}
	if !loopback {
		return nil, fmt.Errorf("--database-delay: --database must be on this host's loopback (127.0.0.1), not %q", u.Hostname())
	}
	if _, err := os.Stat("/run/netns/" + names.netns); err == nil {
		return nil, fmt.Errorf("network namespace %s exists: another bench runs with --database-delay, or one was killed (remove it: NETNS=%s VETH=%s SUBNET=%s bash bench/netem.sh down)",
			names.netns, names.netns, names.veth, names.subnet)
	}
	half := rtt / 2
	out, err := runNetem(ctx, names, "up", fmt.Sprintf("%dus", half.Microseconds()))
	if err != nil {
		_, _ = runNetem(context.Background(), names, "down")
		return nil, err
	}
	l := &delayedLink{names: names, rtt: rtt, netem: strings.TrimSpace(out) == "netem"}
	fwdDelay := half
	if l.netem {
		fwdDelay = 0
	}
	if l.fwd, err = startForwarder(names.subnet+".1:0", hostPort, fwdDelay); err != nil {
		_, _ = runNetem(context.Background(), names, "down")
		return nil, fmt.Errorf("forwarder: %w", err)
	}
	served := *u
	served.Host = l.fwd.addr()
	l.database = served.String()
	return l, nil
}

// close stops the forwarder and removes the namespace (even when ctx is done).
func (l *delayedLink) close() error {
	l.fwd.close()
	_, err := runNetem(context.Background(), l.names, "down")
	return err
}

// describe says how the delay is made, for the report.
func (l *delayedLink) describe() string {
	by := "delay made by the benchmark's forwarder (this kernel has no tc netem): only the database traffic is delayed"
	if l.netem {
		by = "delay made by tc netem on both ends of the veth pair: the clients' HTTP to the servers crosses it too"
	}
	return fmt.Sprintf("servers in network namespace %s (with --auth tokens, as off loopback), database through a forwarder at %s, %s",
		l.names.netns, l.fwd.addr(), by)
}

// runNetem runs netem.sh with args and returns its output.
func runNetem(ctx context.Context, names linkNames, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "bash", append([]string{"-c", netemScript, "netem.sh"}, args...)...)
	cmd.Env = append(os.Environ(), "NETNS="+names.netns, "VETH="+names.veth, "SUBNET="+names.subnet)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("netem.sh %s (needs root and ip(8)): %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}
