package main

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"climate/bench"
)

// scrape fetches url's /metrics and returns the raw text and its families.
func scrape(t *testing.T, url string) ([]byte, map[string]*dto.MetricFamily) {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d %v\n%s", resp.StatusCode, err, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v\n%s", err, body)
	}
	return body, fams
}

// counter returns the value of fams[name] with exactly labels (0 when absent).
func counter(fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
next:
	for _, m := range fams[name].GetMetric() {
		if len(m.GetLabel()) != len(labels) {
			continue
		}
		for _, l := range m.GetLabel() {
			if labels[l.GetName()] != l.GetValue() {
				continue next
			}
		}
		return m.GetCounter().GetValue()
	}
	return 0
}

// Requests are counted by the mux's route pattern, method and status, never by their raw
// path; /metrics, /healthz and /readyz answer without authentication and stay out of the
// request log.
func TestServeCountsRequestsByRoute(t *testing.T) {
	serverLog := &bench.CappedBuffer{Max: 1 << 20}
	s := startServer(t, serveOptions{logLevel: "info", logTo: serverLog})
	const id = "4f6c1e2a-0000-4000-8000-00000000abcd"
	for range 2 {
		resp, err := http.Get(s.url + "/v1/leases/" + id)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("GET a missing lease: %d", resp.StatusCode)
		}
	}
	post(t, s.url+"/v1/os-hosts", `{"name": "n1"}`, http.StatusCreated)

	raw, fams := scrape(t, s.url)
	for _, c := range []struct {
		labels map[string]string
		want   float64
	}{
		{map[string]string{"route": "/v1/leases/{id}", "method": "GET", "code": "404"}, 2},
		{map[string]string{"route": "/v1/os-hosts", "method": "POST", "code": "201"}, 1},
	} {
		if got := counter(fams, "climate_http_requests_total", c.labels); got != c.want {
			t.Errorf("climate_http_requests_total%v = %v, want %v", c.labels, got, c.want)
		}
	}
	if bytes.Contains(raw, []byte(id)) {
		t.Errorf("a lease id is in a label:\n%s", raw)
	}
	for _, name := range []string{"climate_leases", "climate_hosts_reservable", "climate_ready", "go_goroutines", "process_open_fds"} {
		if fams[name] == nil {
			t.Errorf("%s missing from /metrics", name)
		}
	}
	if got := counter(fams, "climate_http_requests_total", map[string]string{"route": "/metrics", "method": "GET", "code": "200"}); got != 0 {
		t.Errorf("scrapes are counted as API requests: %v", got)
	}

	for path, want := range map[string]string{"/healthz": "ok\n", "/readyz": `"status":"ready"`} {
		resp, err := http.Get(s.url + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Errorf("GET %s: %d %s", path, resp.StatusCode, body)
		}
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	log := serverLog.String()
	if !strings.Contains(log, "path=/v1/os-hosts") {
		t.Fatalf("the API's requests are not logged:\n%s", log)
	}
	for _, p := range []string{"path=/metrics", "path=/healthz", "path=/readyz"} {
		if strings.Contains(log, p) {
			t.Errorf("%s logged: probes would drown the request log", p)
		}
	}
}

// promtool (Debian's prometheus package) accepts the scrape (names, HELP, TYPE, units)
// and the alert rules in docs/prometheus.
// Without promtool the test is skipped, unless CLIMATE_TEST_PROMTOOL=required (CI).
func TestMetricsPassPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CLIMATE_TEST_PROMTOOL") == "required" {
			t.Fatalf("promtool not found (CLIMATE_TEST_PROMTOOL=required): apt-get install prometheus")
		}
		t.Skip("promtool not found: apt-get install prometheus, or set CLIMATE_TEST_PROMTOOL=required to fail instead")
	}
	s := startServer(t, serveOptions{})
	post(t, s.url+"/v1/os-hosts", `{"name": "n1"}`, http.StatusCreated)
	raw, _ := scrape(t, s.url)
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(raw)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
	// The README's alert rules are valid, and name metrics the scrape has.
	rules := filepath.Join("..", "..", "docs", "prometheus", "alerts.yml")
	if out, err := exec.Command(promtool, "check", "rules", rules).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	text, err := os.ReadFile(rules)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"climate_event_lateness_seconds_bucket", "climate_notification_delivery_failures_total", "climate_ready"} {
		base := strings.TrimSuffix(name, "_bucket")
		if !strings.Contains(string(text), name) || !bytes.Contains(raw, []byte("# TYPE "+base+" ")) {
			t.Errorf("%s: not in the alert rules, or not in the scrape", name)
		}
	}
}
