package metrics_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"climate"
	"climate/clock"
	"climate/engine"
	"climate/manager"
	"climate/metrics"
	"climate/notify"
	"climate/notify/webhook"
	"climate/sqlite"
)

var t0 = time.Date(2030, 1, 1, 10, 0, 0, 0, time.UTC)

var admin = climate.Identity{UserID: "u", ProjectID: "p", Roles: []string{"admin"}}

func openStore(t *testing.T) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), t.TempDir()+"/climate.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// family gathers m and returns the metric family name.
func family(t *testing.T, m *metrics.Metrics, name string) *dto.MetricFamily {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == name {
			return f
		}
	}
	return nil
}

// sample returns the metric of f with exactly the labels given (nil when none).
func sample(f *dto.MetricFamily, labels map[string]string) *dto.Metric {
	if f == nil {
		return nil
	}
next:
	for _, m := range f.GetMetric() {
		if len(m.GetLabel()) != len(labels) {
			continue
		}
		for _, l := range m.GetLabel() {
			if labels[l.GetName()] != l.GetValue() {
				continue next
			}
		}
		return m
	}
	return nil
}

// A start handled 7 s after its due time lands in the lateness histogram's 10 s bucket
// and not its 5 s one, under its event type.
func TestLateEventLandsInItsLatenessBucket(t *testing.T) {
	st := openStore(t)
	clk := clock.NewFake(t0)
	m := metrics.New()
	reports := make(chan engine.Report, 10)
	var eng *engine.Engine
	mgr := manager.New(st, clk, manager.Config{Observer: m, EventsChanged: func(due time.Time) {
		if eng != nil {
			eng.WakeFor(due)
		}
	}})
	ctx := context.Background()
	if _, err := mgr.CreateHost(ctx, admin, map[string]string{"name": "n1"}); err != nil {
		t.Fatal(err)
	}
	due := t0.Add(time.Minute)
	one := 1
	if _, err := mgr.CreateLease(ctx, admin, climate.LeaseRequest{
		Name: "late", Start: climate.Date{Time: due}, End: climate.Date{Time: due.Add(time.Hour)},
		Reservations: []climate.ReservationRequest{{ResourceType: climate.ResourceTypeHost, Min: &one, Max: &one}},
	}); err != nil {
		t.Fatal(err)
	}
	eng = engine.New(st, clk, engine.Config{Logger: slog.New(slog.DiscardHandler), Claimed: m.Claimed,
		Observe: func(r engine.Report) { m.EventHandled(r); reports <- r }})
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = eng.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })

	// The engine sleeps until the start is due; it wakes 7 s past it.
	select {
	case <-clk.TimerAt(due):
	case <-time.After(10 * time.Second): // a safety net against a hung engine, not a wait
		t.Fatal("the engine never slept until the start")
	}
	clk.Set(due.Add(7 * time.Second))
	var r engine.Report
	select {
	case r = <-reports:
	case <-time.After(10 * time.Second):
		t.Fatal("no event was handled")
	}
	if r.Event.Type != climate.EventStartLease || r.Err != nil {
		t.Fatalf("report %+v; want the start, handled", r)
	}

	h := sample(family(t, m, "climate_event_lateness_seconds"), map[string]string{"event_type": "start_lease"}).GetHistogram()
	if h.GetSampleCount() != 1 || h.GetSampleSum() != 7 {
		t.Fatalf("lateness histogram: %d samples, sum %v; want 1 of 7 s", h.GetSampleCount(), h.GetSampleSum())
	}
	for _, b := range h.GetBucket() {
		want := uint64(0)
		if b.GetUpperBound() >= 10 {
			want = 1
		}
		if b.GetCumulativeCount() != want {
			t.Errorf("bucket le=%v holds %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), want)
		}
	}
	if c := sample(family(t, m, "climate_events_handled_total"), map[string]string{"event_type": "start_lease", "outcome": "done"}).GetCounter().GetValue(); c != 1 {
		t.Errorf("events handled: %v, want 1", c)
	}
	if c := family(t, m, "climate_engine_claims_total").GetMetric()[0].GetCounter().GetValue(); c != 1 {
		t.Errorf("claims: %v, want 1", c)
	}
	for _, name := range []string{"climate_plan_duration_seconds", "climate_commit_duration_seconds"} {
		if n := family(t, m, name).GetMetric()[0].GetHistogram().GetSampleCount(); n == 0 {
			t.Errorf("%s: no sample after a lease was created", name)
		}
	}
}

// A failing webhook delivery counts an attempt and a failure under the destination kind
// "webhook": the webhook's id and URL are no label.
func TestFailingWebhookDeliveryCountsAFailure(t *testing.T) {
	st := openStore(t)
	clk := clock.NewFake(t0)
	m := metrics.New()
	// The receiver accepts the creation's ping, then answers 500.
	var calls atomic.Int32
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer receiver.Close()
	guard := webhook.Guard{AllowPrivate: true}
	sender := webhook.NewSender(guard, clk, 5*time.Second)
	hooks := &webhook.Service{Store: st, Clock: clk, Guard: guard, Sender: sender}
	hook, err := hooks.CreateWebhook(context.Background(), admin, climate.WebhookRequest{URL: receiver.URL + "/climate"})
	if err != nil {
		t.Fatal(err)
	}
	mgr := manager.New(st, clk, manager.Config{})
	if _, err := mgr.CreateHost(context.Background(), admin, map[string]string{"name": "n1"}); err != nil {
		t.Fatal(err)
	}
	one := 1
	if _, err := mgr.CreateLease(context.Background(), admin, climate.LeaseRequest{ // writes a notification
		Name: "l", Start: climate.Date{Time: t0.Add(time.Hour)}, End: climate.Date{Time: t0.Add(2 * time.Hour)},
		Reservations: []climate.ReservationRequest{{ResourceType: climate.ResourceTypeHost, Min: &one, Max: &one}},
	}); err != nil {
		t.Fatal(err)
	}
	webhooks := sender.Destinations(st, notify.DefaultGiveUpAfter)
	w := notify.NewWorker(st, clk, notify.Config{
		Destinations: func(ctx context.Context) ([]notify.Destination, error) {
			d, err := webhooks(ctx)
			return append(d, notify.Log{Logger: slog.New(slog.DiscardHandler)}), err
		},
		Observe: m.Delivered,
		Logger:  slog.New(slog.DiscardHandler),
	})
	if _, err := w.Round(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("the receiver was called %d times, want the ping and one delivery", n)
	}
	deliveries, failures := family(t, m, "climate_notification_deliveries_total"), family(t, m, "climate_notification_delivery_failures_total")
	for _, c := range []struct {
		f    *dto.MetricFamily
		kind string
		want float64
	}{{deliveries, "webhook", 1}, {failures, "webhook", 1}, {deliveries, "log", 1}, {failures, "log", 0}} {
		if got := sample(c.f, map[string]string{"destination": c.kind}).GetCounter().GetValue(); got != c.want {
			t.Errorf("%s{destination=%q} = %v, want %v", c.f.GetName(), c.kind, got, c.want)
		}
	}
	for _, f := range []*dto.MetricFamily{deliveries, failures} {
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if strings.Contains(l.GetValue(), hook.ID) || strings.Contains(l.GetValue(), "127.0.0.1") {
					t.Errorf("%s has the webhook's id or URL in a label: %v", f.GetName(), s)
				}
			}
		}
	}
}

// readyz answers 200 with its checks while the database answers, and 503 naming the
// database once it is closed (climate_ready says so too); healthz stays 200.
func TestReadyzFailsWhenTheDatabaseIsClosed(t *testing.T) {
	st := openStore(t)
	ready := metrics.NewReadiness(metrics.StoreChecks(st)...)
	m := metrics.New(ready)
	srv := httptest.NewServer(metrics.Handler(m, ready, http.NotFoundHandler()))
	defer srv.Close()
	get := func(path string, want int) map[string]any {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			t.Fatalf("GET %s: %d %s, want %d", path, resp.StatusCode, body, want)
		}
		var out map[string]any
		if path == "/readyz" {
			if err := json.Unmarshal(body, &out); err != nil {
				t.Fatalf("GET %s: %v in %s", path, err, body)
			}
		} else if string(body) != "ok\n" {
			t.Fatalf("GET %s: %q, want ok", path, body)
		}
		return out
	}
	if got := get("/readyz", http.StatusOK); got["status"] != "ready" || len(got["checks"].([]any)) != 2 {
		t.Fatalf("readyz: %v", got)
	}
	st.Close()
	if got := get("/readyz", http.StatusServiceUnavailable); got["failed"] != "database" {
		t.Fatalf("readyz with the database closed: %v; want database failed", got)
	}
	get("/healthz", http.StatusOK)
	ok := family(t, m, "climate_ready") // the gauge runs the same checks
	if v := sample(ok, map[string]string{"check": "database"}).GetGauge().GetValue(); v != 0 || len(ok.GetMetric()) != 2 {
		t.Fatalf("climate_ready: %v; want database 0", ok)
	}
}

// A manager's index refreshes are counted by how: its first build is a rebuild, and
// another manager's commit on the same store reaches it as a catch-up from the log.
func TestIndexRefreshesCountedByHow(t *testing.T) {
	st := openStore(t)
	m := metrics.New()
	ctx := context.Background()
	writer, reader := manager.New(st, clock.NewFake(t0), manager.Config{}), manager.New(st, clock.NewFake(t0), manager.Config{Observer: m})
	if _, err := writer.CreateHost(ctx, admin, map[string]string{"name": "h1"}); err != nil {
		t.Fatal(err)
	}
	count := func(how string) float64 {
		s := sample(family(t, m, "climate_index_refreshes_total"), map[string]string{"how": how})
		if s == nil {
			t.Fatalf("no climate_index_refreshes_total{how=%q}", how)
		}
		return s.GetCounter().GetValue()
	}
	for i, step := range []struct {
		write            func() error
		rebuild, catchUp float64
	}{
		{nil, 1, 0},
		{func() error {
			one := 1
			_, err := writer.CreateLease(ctx, admin, climate.LeaseRequest{Name: "l",
				Start: climate.Date{Time: t0.Add(time.Hour)}, End: climate.Date{Time: t0.Add(2 * time.Hour)},
				Reservations: []climate.ReservationRequest{{ResourceType: climate.ResourceTypeHost, Min: &one, Max: &one}}})
			return err
		}, 1, 1},
	} {
		if step.write != nil {
			if err := step.write(); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := reader.Warm(ctx); err != nil {
			t.Fatal(err)
		}
		if r, c := count("rebuild"), count("catch_up"); r != step.rebuild || c != step.catchUp {
			t.Errorf("step %d: %v rebuilds and %v catch-ups, want %v and %v", i, r, c, step.rebuild, step.catchUp)
		}
	}
}
