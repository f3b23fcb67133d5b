package main

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/pflag"

	climatehttp "climate/http"
)

// addLimitFlags adds serve's connection limits.
func addLimitFlags(f *pflag.FlagSet, l *climatehttp.Limits) {
	f.DurationVar(&l.ReadHeaderTimeout, "read-header-timeout", climatehttp.DefaultReadHeaderTimeout, "most time a client may take to send a request's headers")
	f.DurationVar(&l.BodyTimeout, "body-timeout", climatehttp.DefaultBodyTimeout, "most time a client may take to send a request's body, after its headers")
	f.DurationVar(&l.WriteTimeout, "write-timeout", climatehttp.DefaultWriteTimeout, "most time from a request's headers to the end of its response (longer than the slowest request)")
	f.DurationVar(&l.IdleTimeout, "idle-timeout", climatehttp.DefaultIdleTimeout, "close a keep-alive connection idle this long")
	f.IntVar(&l.MaxConnections, "max-connections", defaultMaxConnections(), "most connections open at once (the default stays below the open-file limit); 0 = no bound")
	f.IntVar(&l.MaxConnectionsPerClient, "max-connections-per-client", climatehttp.DefaultMaxConnectionsPerClient, "most connections open at once from one client address (IPv6: one /64); 0 = no bound")
	l.MaxHeaderBytes = climatehttp.DefaultMaxHeaderBytes
}

// fdReserve is the number of file descriptors kept for everything but client connections:
// the database, the logs, outgoing connections.
const fdReserve = 256

// defaultMaxConnections is climatehttp.DefaultMaxConnections, or less to stay within the
// process's open-file limit (Go raises its soft limit to the hard one at start).
func defaultMaxConnections() int {
	limit, ok := openFileLimit()
	if !ok {
		return climatehttp.DefaultMaxConnections
	}
	return min(climatehttp.DefaultMaxConnections, connectionBudget(limit))
}

// connectionBudget is how many connections fit in an open-file limit.
func connectionBudget(limit uint64) int {
	if limit > 2*fdReserve {
		return int(min(limit-fdReserve, 1<<30))
	}
	return int(limit / 2)
}

// checkLimits refuses limits that leave the server unprotected, naming the flag, and warns
// when --max-connections exceeds what the open-file limit allows.
func checkLimits(l climatehttp.Limits, log *slog.Logger) error {
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{
		{"--read-header-timeout", l.ReadHeaderTimeout}, {"--body-timeout", l.BodyTimeout},
		{"--write-timeout", l.WriteTimeout}, {"--idle-timeout", l.IdleTimeout},
	} {
		if d.v <= 0 {
			return fmt.Errorf("%s %s: must be positive", d.flag, d.v)
		}
	}
	if l.MaxConnections < 0 {
		return fmt.Errorf("--max-connections %d: want 0 (no bound) or more", l.MaxConnections)
	}
	if l.MaxConnectionsPerClient < 0 {
		return fmt.Errorf("--max-connections-per-client %d: want 0 (no bound) or more", l.MaxConnectionsPerClient)
	}
	if err := l.Check(); err != nil {
		return err
	}
	if limit, ok := openFileLimit(); ok && (l.MaxConnections == 0 || l.MaxConnections > connectionBudget(limit)) {
		log.Warn("--max-connections is above what the open-file limit allows: past it, connections fail with \"too many open files\"",
			"max_connections", l.MaxConnections, "open_file_limit", limit, "connections_within_limit", connectionBudget(limit))
	}
	return nil
}
