// Package metrics owns Climate's Prometheus registry and collectors, and the health
// endpoints. Other packages know nothing of Prometheus: they take narrow hooks (funcs or
// small interfaces in their Config), which cmd/climate points at a *Metrics.
//
// No label carries tenant data: routes are the mux's patterns (never raw paths),
// destinations are kinds (log, amqp, webhook), never a webhook's id or URL.
package metrics

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"climate"
	"climate/engine"
	"climate/notify"
)

// Metrics is one process's registry and collectors. Each Metrics has its own registry
// (not the global one), so tests may run several servers in one process.
type Metrics struct {
	reg *prometheus.Registry

	requests        *prometheus.CounterVec
	requestDuration *prometheus.HistogramVec
	plan, commit    prometheus.Histogram
	conflicts       prometheus.Counter
	refreshes       *prometheus.CounterVec
	lateness        *prometheus.HistogramVec
	events          *prometheus.CounterVec
	deliveries      *prometheus.CounterVec
	failures        *prometheus.CounterVec
	claims          prometheus.Counter
	takeovers       prometheus.Counter
}

// latencyBuckets suit API requests and planning: a millisecond to ten seconds.
var latencyBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// latenessBuckets suit events: the engine fires within milliseconds when healthy, a
// takeover of a dead replica's claims takes ClaimTTL (3 s); 5 s is the alert's line.
var latenessBuckets = []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}

// New returns the metrics of a process: its own collectors, Go runtime and process
// collectors, and whatever extra collectors are given (a Store collector, readiness).
func New(extra ...prometheus.Collector) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "climate_http_requests_total",
			Help: "API requests handled, by route pattern, method and status code.",
		}, []string{"route", "method", "code"}),
		requestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "climate_http_request_duration_seconds",
			Help:    "Time to handle an API request, by route pattern and method.",
			Buckets: latencyBuckets,
		}, []string{"route", "method"}),
		plan: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "climate_plan_duration_seconds",
			Help:    "Time to plan one lease's placement on the availability view (each attempt).",
			Buckets: latencyBuckets,
		}),
		commit: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "climate_commit_duration_seconds",
			Help:    "Time of one manager write transaction with its re-check, waiting for the writer lock included.",
			Buckets: latencyBuckets,
		}),
		conflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "climate_commit_conflicts_total",
			Help: "Manager commits that lost a race (a concurrent write, or a PostgreSQL serialization or exclusion conflict) and were planned again.",
		}),
		refreshes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "climate_index_refreshes_total",
			Help: "Times the availability index was brought up to what other processes or host changes wrote: caught up from the allocation log (catch_up) or rebuilt whole (rebuild, the first build included).",
		}, []string{"how"}),
		lateness: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "climate_event_lateness_seconds",
			Help:    "How long after its due time the engine began handling an event, by event type.",
			Buckets: latenessBuckets,
		}, []string{"event_type"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "climate_events_handled_total",
			Help: "Lease events the engine handled, by event type and outcome (done or error).",
		}, []string{"event_type", "outcome"}),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "climate_notification_deliveries_total",
			Help: "Notification delivery attempts, by destination kind (log, amqp, webhook).",
		}, []string{"destination"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "climate_notification_delivery_failures_total",
			Help: "Notification delivery attempts that failed, by destination kind (log, amqp, webhook).",
		}, []string{"destination"}),
		claims: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "climate_engine_claims_total",
			Help: "Due events this process's engine claimed.",
		}),
		takeovers: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "climate_engine_takeovers_total",
			Help: "Claims of another engine run taken over: lapsed claims claimed again, and a sole engine's dead predecessor's claims taken back at start.",
		}),
	}
	m.reg.MustRegister(m.requests, m.requestDuration, m.plan, m.commit, m.conflicts, m.refreshes, m.lateness, m.events,
		m.deliveries, m.failures, m.claims, m.takeovers,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.reg.MustRegister(extra...)
	// Every known series exists from the start, at 0, so that rate() and the alerts see
	// the first event or failure rather than a series appearing.
	for _, typ := range eventTypes {
		m.lateness.WithLabelValues(string(typ))
		m.events.WithLabelValues(string(typ), "done")
		m.events.WithLabelValues(string(typ), "error")
	}
	for _, how := range []string{"catch_up", "rebuild"} {
		m.refreshes.WithLabelValues(how)
	}
	for _, kind := range []string{"log", "amqp", "webhook"} {
		m.deliveries.WithLabelValues(kind)
		m.failures.WithLabelValues(kind)
	}
	return m
}

// eventTypes are the event types the engine handles; others are labelled "other".
var eventTypes = []climate.EventType{climate.EventStartLease, climate.EventEndLease, climate.EventBeforeEndLease,
	climate.EventBeforeStartLease, climate.EventRetryDeadline, climate.EventPreemptLease}

func eventType(t climate.EventType) string {
	if slices.Contains(eventTypes, t) {
		return string(t)
	}
	return "other"
}

// Registry is the registry, for tests that gather it.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in Prometheus's text format. A collector that fails (the
// store unreachable) leaves its metrics out; the others are still served.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Request counts one API request (http.Server's Observe). route is the mux pattern that
// matched ("" when none did).
func (m *Metrics) Request(route, method string, code int, d time.Duration) {
	if route == "" {
		route = "none" // refused before routing (bad header, cross-origin, unclean path)
	}
	method = knownMethod(method)
	m.requests.WithLabelValues(route, method, strconv.Itoa(code)).Inc()
	m.requestDuration.WithLabelValues(route, method).Observe(d.Seconds())
}

// knownMethod bounds the method label: clients may send any token as a method.
func knownMethod(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions:
		return method
	}
	return "other"
}

// Planned, Committed, Conflict and Refreshed implement manager.Observer.
func (m *Metrics) Planned(d time.Duration)   { m.plan.Observe(d.Seconds()) }
func (m *Metrics) Committed(d time.Duration) { m.commit.Observe(d.Seconds()) }
func (m *Metrics) Conflict()                 { m.conflicts.Inc() }
func (m *Metrics) Refreshed(rebuilt bool) {
	how := "catch_up"
	if rebuilt {
		how = "rebuild"
	}
	m.refreshes.WithLabelValues(how).Inc()
}

// EventHandled records an engine report (engine.Config.Observe).
func (m *Metrics) EventHandled(r engine.Report) {
	typ := eventType(r.Event.Type)
	m.lateness.WithLabelValues(typ).Observe(max(r.Handled.Sub(r.Event.Time), 0).Seconds())
	outcome := "done"
	if r.Err != nil {
		outcome = "error"
	}
	m.events.WithLabelValues(typ, outcome).Inc()
}

// Claimed records a claim of due events (engine.Config.Claimed).
func (m *Metrics) Claimed(claimed, takenOver int) {
	m.claims.Add(float64(claimed))
	m.takeovers.Add(float64(takenOver))
}

// Delivered records a delivery attempt (notify.Config.Observe).
func (m *Metrics) Delivered(a notify.Attempt) {
	kind := DestinationKind(a.Destination)
	m.deliveries.WithLabelValues(kind).Inc()
	if a.Err != nil {
		m.failures.WithLabelValues(kind).Inc()
	}
}

// DestinationKind is a destination's name without its id: "webhook:<id>" is "webhook".
func DestinationKind(name string) string {
	kind, _, _ := strings.Cut(name, ":")
	return kind
}
