package metrics

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Check is one readiness check: nil when ready.
type Check struct {
	Name string
	Func func(ctx context.Context) error
}

// SchemaVersioner is a store that tells the newest migration applied to its database and
// the newest this binary knows (both stores do).
type SchemaVersioner interface {
	SchemaVersion(ctx context.Context) (applied, known int, err error)
}

// StoreChecks are the readiness checks of a store: "database" (a cheap query answers) and
// "migrations" (none of this binary's is missing; a newer binary's migrations are fine,
// so a rolling upgrade keeps older replicas ready).
func StoreChecks(st SchemaVersioner) []Check {
	var applied, known int
	var dbErr error
	// One query serves both checks; the first runs it, the second reads its answer.
	return []Check{
		{Name: "database", Func: func(ctx context.Context) error {
			applied, known, dbErr = st.SchemaVersion(ctx)
			return dbErr
		}},
		{Name: "migrations", Func: func(context.Context) error {
			if dbErr != nil {
				return errors.New("unknown: the database did not answer")
			}
			if applied < known {
				return fmt.Errorf("schema at migration %d, this binary needs %d: run climate migrate", applied, known)
			}
			return nil
		}},
	}
}

// Readiness runs its checks in order for /readyz and for the climate_ready gauge, one
// round at a time (a round's checks may share state: StoreChecks'). Make it with
// NewReadiness.
type Readiness struct {
	Checks []Check
	// Timeout bounds one round (default 2 s).
	Timeout time.Duration
	round   chan struct{}
}

// NewReadiness returns a Readiness running checks.
func NewReadiness(checks ...Check) *Readiness {
	return &Readiness{Checks: checks, round: make(chan struct{}, 1)}
}

type checkResult struct {
	Name  string `json:"name"`
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

// run runs every check and reports each outcome.
func (r *Readiness) run(ctx context.Context) []checkResult {
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	select {
	case r.round <- struct{}{}:
		defer func() { <-r.round }()
	case <-ctx.Done():
		return []checkResult{{Name: "readiness", Error: "checks busy: " + ctx.Err().Error()}}
	}
	out := make([]checkResult, 0, len(r.Checks))
	for _, c := range r.Checks {
		res := checkResult{Name: c.Name, OK: true}
		if err := c.Func(ctx); err != nil {
			res.OK, res.Error = false, err.Error()
		}
		out = append(out, res)
	}
	return out
}

// Handler serves /readyz: 200 with every check's outcome when all pass, else 503.
func (r *Readiness) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		results := r.run(req.Context())
		status, body := http.StatusOK, map[string]any{"status": "ready", "checks": results}
		for _, c := range results {
			if !c.OK {
				status, body["status"] = http.StatusServiceUnavailable, "not ready"
				body["failed"] = c.Name
				break
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(body)
	})
}

var readyDesc = prometheus.NewDesc("climate_ready",
	"1 when the readiness check (/readyz's) passes, 0 when it fails, by check.", []string{"check"}, nil)

// Describe implements prometheus.Collector.
func (r *Readiness) Describe(ch chan<- *prometheus.Desc) { ch <- readyDesc }

// Collect implements prometheus.Collector: the checks run at scrape time.
func (r *Readiness) Collect(ch chan<- prometheus.Metric) {
	for _, c := range r.run(context.Background()) {
		v := 0.0
		if c.OK {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(readyDesc, prometheus.GaugeValue, v, c.Name)
	}
}

// Healthz serves /healthz: the process is up and serving.
func Healthz() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write([]byte("ok\n"))
	})
}

// Handler serves GET (and HEAD) /metrics, /healthz and /readyz in front of api, which
// gets every other request. They need no authentication (Prometheus and probes send none)
// and bypass the API's request log, which probes every few seconds would drown. A plain
// switch, not a ServeMux: a mux would redirect unclean paths the API answers itself.
func Handler(m *Metrics, ready *Readiness, api http.Handler) http.Handler {
	metrics, healthz, readyz := m.Handler(), Healthz(), ready.Handler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			switch r.URL.Path {
			case "/metrics":
				metrics.ServeHTTP(w, r)
				return
			case "/healthz":
				healthz.ServeHTTP(w, r)
				return
			case "/readyz":
				readyz.ServeHTTP(w, r)
				return
			}
		}
		api.ServeHTTP(w, r)
	})
}
