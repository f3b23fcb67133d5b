// Package bench is the benchmark harness behind "climate bench": the blazar-90d workload
// (shared/bench/WORKLOAD.md) loaded into a store (load), timed in the planner in process
// (plan), through the HTTP API of "climate serve" subprocesses (api), and under a flood of
// idle and slow connections (soak). cmd/climate only maps its flags onto the options here.
package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// benchScale is a workload size: H hosts and R existing leases.
type benchScale struct{ hosts, leases int }

func (s benchScale) String() string { return fmt.Sprintf("%d:%d", s.hosts, s.leases) }

// parseScales reads "H:R[,H:R…]".
func parseScales(s string) ([]benchScale, error) {
	var out []benchScale
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		h, r, ok := strings.Cut(part, ":")
		hn, herr := strconv.Atoi(h)
		rn, rerr := strconv.Atoi(r)
		if !ok || herr != nil || rerr != nil || hn <= 0 || rn < 0 {
			return nil, fmt.Errorf("--scales %q: want HOSTS:LEASES[,HOSTS:LEASES…] with HOSTS > 0, e.g. 1000:10000", s)
		}
		out = append(out, benchScale{hn, rn})
	}
	return out, nil
}

// blazarBaseline is upstream Blazar's median CPU seconds per call on the workload
// (WORKLOAD.md, "Baseline"), where it was measured.
type blazarBaseline struct{ plain, filtered, create float64 }

var blazarBaselines = map[benchScale]blazarBaseline{
	{100, 1000}:   {plain: 0.35, filtered: 0.11, create: 0.81},
	{1000, 10000}: {plain: 4.9, filtered: 1.04, create: 8.8},
	{5000, 50000}: {plain: 26, filtered: 5.3, create: 59},
}

// baseline returns Blazar's figure for a scale and kind ("plain", "filtered" or
// "create"), nil when it was not measured.
func baseline(s benchScale, kind string) *float64 {
	b, ok := blazarBaselines[s]
	if !ok {
		return nil
	}
	v := map[string]float64{"plain": b.plain, "filtered": b.filtered, "create": b.create}[kind]
	return &v
}

// checkOutput validates -o.
func checkOutput(o string) error {
	if o != "table" && o != "json" {
		return fmt.Errorf("-o %q: want table or json", o)
	}
	return nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// percentile returns the nearest-rank p-quantile (0 < p ≤ 1) of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// medianP99 sorts d and returns its median and 99th percentile.
func medianP99(d []time.Duration) (median, p99 time.Duration) {
	slices.Sort(d)
	return percentile(d, 0.5), percentile(d, 0.99)
}

func micros(d time.Duration) float64 { return round(float64(d)/float64(time.Microsecond), 2) }
func millis(d time.Duration) float64 { return round(float64(d)/float64(time.Millisecond), 3) }

func round(v float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}

// progressLine shows progress on w (stderr): on a terminal one line rewritten in place; on
// anything else (a log file, a pipe) a line at most every few seconds.
type progressLine struct {
	w       io.Writer
	started bool
	tty     bool
	last    int       // length of the line shown (terminal)
	printed time.Time // when a line was last written (not a terminal)
	pending string    // latest text not yet written (not a terminal)
}

const progressEvery = 5 * time.Second

func (p *progressLine) set(format string, args ...any) {
	if !p.started {
		p.started = true
		if f, ok := p.w.(*os.File); ok {
			if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
				p.tty = true
			}
		}
	}
	s := fmt.Sprintf(format, args...)
	if !p.tty {
		p.pending = s
		if time.Since(p.printed) >= progressEvery {
			p.flush()
		}
		return
	}
	pad := ""
	if n := p.last - len(s); n > 0 {
		pad = strings.Repeat(" ", n)
	}
	fmt.Fprint(p.w, "\r"+s+pad)
	p.last = len(s)
}

func (p *progressLine) flush() {
	if p.pending != "" {
		fmt.Fprintln(p.w, p.pending)
		p.pending, p.printed = "", time.Now()
	}
}

// follow shows line() now and every 200 ms until stop is called, which shows it a last
// time.
func (p *progressLine) follow(line func() string) (stop func()) {
	tick := time.NewTicker(200 * time.Millisecond)
	quit, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		defer tick.Stop()
		for {
			p.set("%s", line())
			select {
			case <-tick.C:
			case <-quit:
				p.set("%s", line())
				return
			}
		}
	}()
	return func() { close(quit); <-stopped }
}

// done ends the progress, leaving its last state visible.
func (p *progressLine) done() {
	if !p.tty {
		p.flush()
	} else if p.last > 0 {
		fmt.Fprintln(p.w)
	}
	p.last = 0
}

// clear ends the progress and erases it (on a terminal).
func (p *progressLine) clear() {
	if !p.tty {
		p.flush()
	} else if p.last > 0 {
		fmt.Fprint(p.w, "\r"+strings.Repeat(" ", p.last)+"\r")
	}
	p.last = 0
}

// loadProgress reports workload.Load's progress on p.
func loadProgress(p *progressLine) func(done, total int) {
	return func(done, total int) {
		pct := 100
		if total > 0 {
			pct = done * 100 / total
		}
		p.set("loading leases %d/%d (%d%%)", done, total, pct)
	}
}

func formatBlazar(v *float64) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatFloat(*v, 'f', -1, 64) + " s"
}

// formatSpeedup says how many times faster than Blazar a median is.
func formatSpeedup(blazar *float64, median time.Duration) string {
	if blazar == nil || median <= 0 {
		return "-"
	}
	x := *blazar / median.Seconds()
	switch {
	case x >= 100:
		return fmt.Sprintf("%.0f×", x)
	case x >= 10:
		return fmt.Sprintf("%.1f×", x)
	}
	return fmt.Sprintf("%.2f×", x)
}
