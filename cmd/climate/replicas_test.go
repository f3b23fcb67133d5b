package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"climate/bench"
	"climate/postgres"
)

var auditDuration = flag.Duration("audit-duration", 15*time.Second, "how long the concurrency audits' clients run (TestReplicasConcurrencyAudit, TestSQLiteConcurrencyAudit)")

// startReplicas starts n `climate serve` subprocesses of bin with args; replica i's stderr
// also goes to logs[i] when logs is not nil. They are stopped when the test ends.
func startReplicas(t *testing.T, bin string, n int, logs []io.Writer, args ...string) []*bench.Server {
	t.Helper()
	var out []*bench.Server
	for i := range n {
		var w io.Writer
		if logs != nil {
			w = logs[i]
		}
		s, err := bench.StartServer(context.Background(), bin, args, w)
		if err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
		t.Cleanup(s.Stop)
		out = append(out, s)
	}
	return out
}

// auditClient is a climate API client that records what it asked and what it got.
type auditClient struct {
	http *http.Client
	base string
}

// do sends a JSON request and returns the status and decoded body (nil unless JSON).
func (c *auditClient) do(ctx context.Context, method, path string, body any) (int, map[string]any, error) {
	var r io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, r)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, err
	}
	var out map[string]any
	if len(data) > 0 {
		if err := json.Unmarshal(data, &out); err != nil {
			return resp.StatusCode, nil, fmt.Errorf("%s %s: %d with a body that is not JSON: %q", method, path, resp.StatusCode, data)
		}
	}
	return resp.StatusCode, out, nil
}

const auditDate = "2006-01-02 15:04"

// Three replicas on one PostgreSQL schema, 32 clients spread over them, running the
// concurrency audit's workload (runConcurrencyAudit: hosts, floating IPs and instance
// slots) for -audit-duration; then the schema is audited with SQL.
func TestReplicasConcurrencyAudit(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 3 server subprocesses for -audit-duration")
	}
	dsn := postgres.TestDSN(t)
	bin := climateBinary(t)
	const nReplicas = 3
	var urls []string
	for _, r := range startReplicas(t, bin, nReplicas, nil, "--database", dsn, "--log-level", "error") {
		urls = append(urls, r.URL)
	}
	runConcurrencyAudit(t, auditTarget{label: fmt.Sprintf("%d replicas on PostgreSQL", nReplicas), urls: urls, clients: 32,
		driver: "pgx", dsn: dsn})
}
