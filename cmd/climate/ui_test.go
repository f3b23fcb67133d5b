package main

// End-to-end tests of the web calendar (/ui/) in a real headless Chromium, driven with
// chromedp over the DevTools protocol: the real server in process, the page's own
// JavaScript against the public API.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"climate/sqlite"
	"climate/workload"
)

// chromiumPath finds Debian's chromium (or CLIMATE_CHROMIUM); without it the test is
// skipped, or fails when CLIMATE_TEST_CHROMIUM=required (as .ci/run sets).
func chromiumPath(t testing.TB) string {
	t.Helper()
	p := os.Getenv("CLIMATE_CHROMIUM")
	if p == "" {
		p = "chromium"
	}
	path, err := exec.LookPath(p)
	if err != nil {
		if os.Getenv("CLIMATE_TEST_CHROMIUM") == "required" {
			t.Fatalf("CLIMATE_TEST_CHROMIUM=required but %s is not found: %v (apt-get install chromium)", p, err)
		}
		t.Skipf("%s is not installed (apt-get install chromium; CLIMATE_TEST_CHROMIUM=required makes this a failure)", p)
	}
	return path
}

// newBrowser starts a headless Chromium and returns a context for its first tab. The
// deadline is a safety net for a hung browser, not a timed assertion.
func newBrowser(t testing.TB) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.WindowSize(1400, 860),
		chromedp.NoSandbox, // root in containers
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("force-device-scale-factor", "1"),
		chromedp.UserDataDir(t.TempDir()),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // start the browser
		t.Fatalf("starting chromium: %v", err)
	}
	return ctx
}

// newTab opens another tab of ctx's browser: its own sessionStorage (another login).
func newTab(t testing.TB, ctx context.Context) context.Context {
	t.Helper()
	tab, cancel := chromedp.NewContext(ctx)
	t.Cleanup(cancel)
	if err := chromedp.Do(tab); err != nil {
		t.Fatal(err)
	}
	return tab
}

// screenshotDir is where the tests leave their screenshots: CLIMATE_UI_SCREENSHOT_DIR,
// else a temporary directory.
func screenshotDir(t testing.TB) string {
	if d := os.Getenv("CLIMATE_UI_SCREENSHOT_DIR"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// calBar is one entry of the page's "Visible bookings" list: the bars drawn.
type calBar struct {
	Host, Lease, Project, Busy, Start, End string
}

// ready waits until the page has drawn what it fetched (body[data-state=ready]).
var ready = chromedp.WaitReady(chromedp.CSS(`body[data-state="ready"]`))

func visibleBars(t testing.TB, ctx context.Context) []calBar {
	t.Helper()
	if err := chromedp.Do(ctx, ready); err != nil {
		t.Fatal(err)
	}
	bars, err := chromedp.Run(ctx, chromedp.Evaluate[[]calBar](
		`[...document.querySelectorAll('#bars button')].map(b => ({Host: b.dataset.host, Lease: b.dataset.lease, Project: b.dataset.project, Busy: b.dataset.busy, Start: b.dataset.start, End: b.dataset.end}))`))
	if err != nil {
		t.Fatal(err)
	}
	return bars
}

// summary renders bars as "host:lease/project" (busy ones "host:busy"), in list order.
func summary(bars []calBar) string {
	var out []string
	for _, b := range bars {
		if b.Busy == "true" {
			out = append(out, b.Host+":busy")
		} else {
			out = append(out, b.Host+":"+b.Lease+"/"+b.Project)
		}
	}
	return strings.Join(out, " ")
}

// apiCall sends a JSON request with a token and decodes the answer.
func apiCall(t testing.TB, base, token, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("X-Auth-Token", token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func mustAPI(t testing.TB, base, token, method, path string, body any, want int) map[string]any {
	t.Helper()
	status, out := apiCall(t, base, token, method, path, body)
	if status != want {
		t.Fatalf("%s %s: %d %v, want %d", method, path, status, out, want)
	}
	return out
}

func hostLease(name, start, end string, count int, props string) map[string]any {
	return map[string]any{"name": name, "start_date": start, "end_date": end, "reservations": []map[string]any{{
		"resource_type": "physical:host", "min": count, "max": count, "hypervisor_properties": "", "resource_properties": props}}}
}

// login types a token into the page's login field, as a person would.
func login(token string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		chromedp.WaitReady(chromedp.CSS(`body[data-state="login"]`)),
		chromedp.SendKeys(chromedp.ID("token"), token),
		chromedp.Click(chromedp.CSS(`#login button[type=submit]`)),
		ready,
	)
}

func TestWebCalendarInChromium(t *testing.T) {
	ctx := newBrowser(t)
	tokens := filepath.Join(t.TempDir(), "tokens")
	err := os.WriteFile(tokens, []byte("admin-token root ops admin\nbob-token bob physics member\ncarol-token carol chemistry member\n"), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, serveOptions{auth: "tokens", tokensFile: tokens})
	for i, h := range []struct{ gpu, rack string }{{"true", "r1"}, {"true", "r2"}, {"false", "r2"}, {"false", "r1"}} {
		mustAPI(t, s.url, "admin-token", "POST", "/v1/os-hosts", map[string]any{"name": fmt.Sprintf("compute-%d", i+1), "gpu": h.gpu, "rack": h.rack}, 201)
	}
	gpu := `["==", "$gpu", "true"]`
	mustAPI(t, s.url, "bob-token", "POST", "/v1/leases", hostLease("gpu-training", "2030-01-02 09:00", "2030-01-02 17:00", 2, gpu), 201)
	mustAPI(t, s.url, "carol-token", "POST", "/v1/leases", hostLease("chem-run", "2030-01-02 12:00", "2030-01-03 12:00", 2, `["==", "$gpu", "false"]`), 201)
	mustAPI(t, s.url, "carol-token", "POST", "/v1/leases", hostLease("chem-gpu", "2030-01-03 00:00", "2030-01-04 00:00", 1, gpu), 201)
	shots := screenshotDir(t)
	page := s.url + "/ui/?at=2030-01-01T12:00:00Z&zoom=week"

	// The admin sees every lease by name, coloured by project.
	do(t, ctx, chromedp.Navigate(page), login("admin-token"))
	if title := eval[string](t, ctx, `document.title`); title != "Climate calendar" {
		t.Errorf("title %q", title)
	}
	want := "compute-1:gpu-training/physics compute-1:chem-gpu/chemistry compute-2:gpu-training/physics compute-3:chem-run/chemistry compute-4:chem-run/chemistry"
	if got := summary(visibleBars(t, ctx)); got != want {
		t.Errorf("admin's bars:\n got %s\nwant %s", got, want)
	}
	screenshot(t, ctx, filepath.Join(shots, "calendar-admin.png"))
	// Clicking the first bar on the canvas shows its lease.
	xy := eval[[]float64](t, ctx, `(() => { const r = document.getElementById('gantt').getBoundingClientRect(), b = climateCalendar.bars[0];
		return [r.left + (b.x0 + b.x1) / 2, r.top + b.y + 11]; })()`)
	do(t, ctx, chromedp.MouseClickXY(xy[0], xy[1]))
	if text := eval[string](t, ctx, `document.getElementById('detail').textContent`); !strings.Contains(text, "Leasegpu-training") ||
		!strings.Contains(text, "Projectphysics") || !strings.Contains(text, "StatusPENDING") || !strings.Contains(text, "2030-01-02 09:00 – 2030-01-02 17:00") {
		t.Errorf("details of the clicked bar: %s", text)
	}
	// Grouped by a property: a heading row per value.
	do(t, ctx, chromedp.Navigate(page+"&group=rack"), ready)
	if rows := eval[[]string](t, ctx, `climateCalendar.rows.map(r => r.group || r.name)`); strings.Join(rows, ",") != "rack = r1,compute-1,compute-4,rack = r2,compute-2,compute-3" {
		t.Errorf("rows grouped by rack: %v", rows)
	}

	// Zoom with the keyboard (+ halves the span around the middle) and the buttons.
	do(t, ctx, chromedp.Focus(chromedp.ID("scroller")), chromedp.KeyEvent("+"), ready)
	span := eval[float64](t, ctx, `climateCalendar.span`)
	do(t, ctx, chromedp.Click(chromedp.ID("zoom-day")), ready)
	spanDay := eval[float64](t, ctx, `climateCalendar.span`)
	if span != float64(84*time.Hour/time.Millisecond) || spanDay != float64(24*time.Hour/time.Millisecond) {
		t.Errorf("spans after + and Day: %v, %v ms", span, spanDay)
	}
	// Back to the week, then the arrow keys move in time: → by an eighth of the span.
	do(t, ctx, chromedp.Navigate(page), ready)
	before := eval[float64](t, ctx, `climateCalendar.start`)
	do(t, ctx, chromedp.Focus(chromedp.ID("scroller")), chromedp.KeyEvent(kb.ArrowRight), ready)
	after := eval[float64](t, ctx, `climateCalendar.start`)
	if after-before != float64(7*24*time.Hour/time.Millisecond)/8 {
		t.Errorf("ArrowRight moved the view by %v ms", after-before)
	}
	// Enter leads from the chart into the list of visible bookings, ↓ along it.
	do(t, ctx, chromedp.KeyEvent(kb.Enter), chromedp.KeyEvent(kb.ArrowDown))
	if focused := eval[string](t, ctx, `document.activeElement.closest('#bars') ? document.activeElement.textContent : 'not in the list: ' + document.activeElement.id`); !strings.HasPrefix(focused, "compute-1: chem-gpu, project chemistry") {
		t.Errorf("focus after Enter and ↓: %q", focused)
	}
	// Home comes back to now.
	do(t, ctx, chromedp.Focus(chromedp.ID("scroller")), chromedp.KeyEvent(kb.Home), ready)
	if start, now := eval[float64](t, ctx, `climateCalendar.start`), float64(time.Now().UnixMilli()); start > now || now-start > float64(2*24*time.Hour/time.Millisecond) {
		t.Errorf("after Home the view starts at %v, now is %v", time.UnixMilli(int64(start)).UTC(), time.UnixMilli(int64(now)).UTC())
	}

	// Filter by a property: only the GPU hosts are rows.
	do(t, ctx, chromedp.Navigate(page), ready,
		chromedp.SendKeys(chromedp.ID("filter"), "gpu=true"), chromedp.Click(chromedp.CSS(`#filter-form button[type=submit]`)), ready)
	if got, want := summary(visibleBars(t, ctx)), "compute-1:gpu-training/physics compute-1:chem-gpu/chemistry compute-2:gpu-training/physics"; got != want {
		t.Errorf("bars with gpu=true:\n got %s\nwant %s", got, want)
	}
	if rows := eval[int](t, ctx, `climateCalendar.rows.length`); rows != 2 {
		t.Errorf("rows with gpu=true: %d", rows)
	}
	// Climate's JSON query language works too.
	do(t, ctx, chromedp.SetValue(chromedp.ID("filter"), `["and", ["==", "$rack", "r2"], ["!=", "$gpu", "true"]]`),
		chromedp.Click(chromedp.CSS(`#filter-form button[type=submit]`)), ready)
	if got := summary(visibleBars(t, ctx)); got != "compute-3:chem-run/chemistry" {
		t.Errorf("bars with rack r2 and no GPU: %s", got)
	}

	// Find the earliest slot for two GPU hosts and book it through the form.
	do(t, ctx, chromedp.Navigate(page), ready,
		chromedp.SetValue(chromedp.ID("count"), "2"), chromedp.SetValue(chromedp.ID("duration"), "3h"),
		chromedp.SendKeys(chromedp.ID("props"), "gpu=true"), chromedp.SendKeys(chromedp.ID("lease-name"), "ui-booked"),
		chromedp.Click(chromedp.CSS(`#earliest button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS("#slots button.book")),
		chromedp.Click(chromedp.CSS("#slots button.book")),
		chromedp.WaitReady(chromedp.CSS("#book-status[data-lease-id]")),
		ready)
	leaseID := eval[string](t, ctx, `document.getElementById('book-status').dataset.leaseId`)
	lease := mustAPI(t, s.url, "admin-token", "GET", "/v1/leases/"+leaseID, nil, 200)["lease"].(map[string]any)
	if lease["name"] != "ui-booked" || lease["project_id"] != "ops" {
		t.Fatalf("booked lease: %v", lease)
	}
	allocs := mustAPI(t, s.url, "admin-token", "GET", "/v1/os-hosts/allocations?lease_id="+leaseID, nil, 200)["allocations"].([]any)
	var held []string
	for _, a := range allocs {
		if len(a.(map[string]any)["reservations"].([]any)) > 0 {
			held = append(held, a.(map[string]any)["resource_id"].(string))
		}
	}
	if strings.Join(held, ",") != "1,2" {
		t.Errorf("ui-booked holds hosts %v, want the GPU hosts 1,2", held)
	}
	// The page moved to the new lease and shows it.
	if got := summary(visibleBars(t, ctx)); !strings.Contains(got, "compute-1:ui-booked/ops") || !strings.Contains(got, "compute-2:ui-booked/ops") {
		t.Errorf("after booking, bars: %s", got)
	}

	// A member (another tab: its own sessionStorage) sees its project's leases by name
	// and the others' only as busy.
	bob := newTab(t, ctx)
	do(t, bob, chromedp.Navigate(page), login("bob-token"))
	bars := visibleBars(t, bob)
	if got, want := summary(bars), "compute-1:gpu-training/physics compute-1:busy compute-2:gpu-training/physics compute-3:busy compute-4:busy"; got != want {
		t.Errorf("bob's bars:\n got %s\nwant %s", got, want)
	}
	if text := eval[string](t, bob, `document.getElementById('bars').textContent`); strings.Contains(text, "chem") || strings.Contains(text, "carol") {
		t.Errorf("bob's list names another project's lease: %s", text)
	}
	screenshot(t, bob, filepath.Join(shots, "calendar-member.png"))
	t.Logf("screenshots in %s", shots)
}

// BenchmarkWebCalendarLoad measures, in Chromium, the calendar's load at the benchmark
// book's scale (1,000 hosts, 10,000 leases; CLIMATE_UI_BENCH_HOSTS/_LEASES to change):
// from navigation to the first week drawn, as the admin (every lease by name), and a
// move to the next week. Figures in the log, not asserted:
//
//	go test -run '^$' -bench WebCalendarLoad -benchtime 3x ./cmd/climate/
func BenchmarkWebCalendarLoad(b *testing.B) {
	hosts, leases := envInt(b, "CLIMATE_UI_BENCH_HOSTS", 1000), envInt(b, "CLIMATE_UI_BENCH_LEASES", 10000)
	ctx := newBrowser(b)
	dir := b.TempDir()
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "climate.db"))
	if err != nil {
		b.Fatal(err)
	}
	book := workload.Generate(hosts, leases)
	if err := workload.Load(context.Background(), st, book, nil); err != nil {
		b.Fatal(err)
	}
	st.Close()
	s := startServer(b, serveOptions{dataDir: dir})
	page := s.url + "/ui/?at=2030-01-10T00:00:00Z&zoom=week"
	b.ResetTimer()
	var total, inPage, pan time.Duration
	for b.Loop() {
		start := time.Now()
		do(b, ctx, chromedp.Navigate(page), ready)
		total += time.Since(start)
		readyMs := eval[float64](b, ctx, `climateCalendar.firstReadyMs`)
		inPage += time.Duration(readyMs * float64(time.Millisecond))
		start = time.Now()
		do(b, ctx, chromedp.Click(chromedp.ID("next")), ready)
		pan += time.Since(start)
	}
	bars := visibleBars(b, ctx)
	do(b, ctx, chromedp.Navigate(page), ready)
	b.Logf("requests of the last load (ms, bytes): %s", eval[string](b, ctx,
		`performance.getEntriesByType('resource').map(e => e.name.replace(location.origin, '').split('?')[0] + ' ' + Math.round(e.duration) + ' ' + e.transferSize).join('; ')`))
	n := time.Duration(b.N)
	b.ReportMetric(float64((total / n).Milliseconds()), "ms/load")
	b.ReportMetric(float64((pan / n).Milliseconds()), "ms/next-week")
	b.Logf("H=%d R=%d: load %v (navigation to first draw, page's own clock %v), next week %v; %d bars in the list",
		hosts, leases, (total / n).Round(time.Millisecond), (inPage / n).Round(time.Millisecond), (pan / n).Round(time.Millisecond), len(bars))
	screenshot(b, ctx, filepath.Join(screenshotDir(b), fmt.Sprintf("calendar-%dx%d.png", hosts, leases)))
}

// do runs browser steps, failing the test on error.
func do(t testing.TB, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	// A bound on a hung page (not a timed assertion): the tab outlives it, so the
	// failure can say what the page shows.
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := chromedp.Do(sctx, steps...); err != nil {
		state, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.dataset.state + ': ' + document.getElementById('error').textContent + ' / ' + document.getElementById('book-status').textContent`))
		t.Fatalf("%v; the page: %s", err, state)
	}
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](t testing.TB, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return v
}

// screenshot saves the tab's viewport as a PNG file.
func screenshot(t testing.TB, ctx context.Context, file string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, png, 0o644); err != nil {
		t.Fatal(err)
	}
}

func envInt(t testing.TB, name string, def int) int {
	if v := os.Getenv(name); v != "" {
		var n int
		if _, err := fmt.Sscan(v, &n); err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive number", name, v)
		}
		return n
	}
	return def
}
