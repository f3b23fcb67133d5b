package main

import (
	"climate"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"climate/http/api"
	"climate/http/client"
)

func newEventsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "events",
		Short: "Watch what happens to leases, as it happens",
		Long: `Lease notifications: every lease change (lease.create, lease.update, lease.delete)
and every fired event (lease.event.start_lease, lease.event.end_lease, …), pushed by the
server as it commits them (GET /v1/events/stream).

` + clientHelp,
		Example: `  climate events watch
  climate events watch --lease train`,
	}
	o := addClientFlags(cmd)
	cmd.AddCommand(newEventsWatchCmd(o))
	return cmd
}

// eventColumns are the fields events watch can print, and its default columns.
var (
	eventFields  = []string{"seq", "time", "event_type", "status", "lease_id", "lease_name", "project_id", "error"}
	eventColumns = []string{"time", "event_type", "status", "lease_id", "lease_name"}
	// eventWidths pads table columns, so that rows printed one at a time line up.
	eventWidths = map[string]int{"seq": 8, "time": 20, "event_type": 30, "status": 11, "lease_id": 36, "lease_name": 20, "project_id": 16}
)

func newEventsWatchCmd(o *clientOptions) *cobra.Command {
	var lease, project string
	var types []string
	var after int64
	var count int
	cmd := &cobra.Command{
		Use:   "watch",
		Short: "Print notifications as the server commits them, one line each, until interrupted",
		Long: `Print lease notifications as the server commits them: one line each with the time,
the notification type, the lease's status after it, and the lease's id and name (-o json:
one JSON object per line, with the whole lease as payload). Admins see every project's
leases; everyone else their own project's.

The connection is kept open; when it drops, climate reconnects and resumes after the last
notification it printed, so none is missed or printed twice. --after SEQ starts with the
notifications the server kept after that one (each has a seq; 0: from the first).`,
		Example: `  climate events watch                              # everything you can see, from now on
  climate events watch --lease train                # one lease
  climate events watch --event lease.event.start_lease --event lease.event.end_lease
  climate events watch --after 0 --count 10         # the first 10 notifications kept
  climate events watch -o json | jq -c 'select(.error != null)'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if count < 0 {
				return fmt.Errorf("--count %d: want a positive number of notifications, or 0 for no end", count)
			}
			if after < 0 {
				return fmt.Errorf("--after %d: want a notification's seq (0: from the first kept)", after)
			}
			if o.out.sortBy != "" || o.out.reverse {
				return errors.New("--sort-by and --reverse do not apply to a stream: notifications come in commit order")
			}
			cols, err := o.out.selectColumns(eventFields, eventColumns)
			if err != nil {
				return err
			}
			c, err := o.client(cmd)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			q := client.WatchQuery{ProjectID: project, EventTypes: types, Replay: cmd.Flags().Changed("after"), After: after}
			if lease != "" {
				l, err := c.FindLease(ctx, lease)
				if err != nil {
					return err
				}
				q.LeaseID = l.ID
			}
			st, err := c.Watch(ctx, q)
			if streamUnsupported(err) && q.LeaseID == "" {
				return fmt.Errorf("%s does not serve live notifications (GET /v1/events/stream): %w", c.URL(), err)
			}
			if err != nil {
				return err
			}
			defer st.Close()
			p := &eventPrinter{w: cmd.OutOrStdout(), out: &o.out, cols: cols}
			if err := p.start(); err != nil {
				return err
			}
			printed := 0
			for n := range st.Notifications() {
				if err := p.print(n); err != nil {
					return err
				}
				if printed++; count > 0 && printed >= count {
					return nil
				}
			}
			if errors.Is(st.Err(), context.Canceled) && cmd.Context().Err() == nil {
				return nil // interrupted: the normal way to stop
			}
			return st.Err()
		},
	}
	f := cmd.Flags()
	f.StringVar(&lease, "lease", "", "only this lease's notifications (name or id)")
	f.StringSliceVar(&types, "event", nil, "only notifications of these types (repeatable, or comma separated): "+strings.Join(climate.NotificationTypes(), ", "))
	f.StringVar(&project, "project", "", "only this project's notifications (admins)")
	f.Int64Var(&after, "after", 0, "first print the notifications kept after this seq (0: all kept), then live ones")
	f.IntVar(&count, "count", 0, "exit after this many notifications (0: run until interrupted)")
	_ = cmd.RegisterFlagCompletionFunc("lease", completeLeases(o))
	return cmd
}

// streamUnsupported reports a server without the event stream (an older Climate, or
// Blazar): it answers the route with 404 or 405.
func streamUnsupported(err error) bool {
	var e *client.Error
	return errors.As(err, &e) && (e.Status == http.StatusNotFound || e.Status == http.StatusMethodNotAllowed)
}

// eventPrinter prints notifications one at a time, in the -o format.
type eventPrinter struct {
	w    io.Writer
	out  *outputOptions
	cols []string
}

// start prints the table's header, at once: the stream is open.
func (p *eventPrinter) start() error {
	if p.out.format != "table" || p.out.noHeader {
		return nil
	}
	heads := make([]string, len(p.cols))
	for i, c := range p.cols {
		heads[i] = header(c)
	}
	_, err := fmt.Fprintln(p.w, p.row(heads))
	return err
}

// eventRecord returns n's printable fields.
func eventRecord(n api.Notification) map[string]string {
	r := map[string]string{"seq": strconv.FormatInt(n.Seq, 10), "time": n.CreatedAt, "event_type": n.EventType,
		"lease_id": n.LeaseID, "project_id": n.ProjectID, "error": n.Error}
	if l, err := n.Lease(); err == nil {
		r["status"], r["lease_name"] = l.Status, l.Name
	}
	return r
}

func (p *eventPrinter) print(n api.Notification) error {
	switch p.out.format {
	case "jsonpath":
		r, err := toRecord(n)
		if err != nil {
			return err
		}
		return p.out.writeJSONPath(p.w, r)
	case "json":
		b, err := json.Marshal(n)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(p.w, "%s\n", b)
		return err
	case "yaml":
		b, err := yamlBytes(n)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(p.w, "---\n%s", b)
		return err
	}
	r := eventRecord(n)
	if t, ok := parseAnyDate(r["time"]); ok && p.out.format == "table" {
		abs := *p.out // live: a relative time would say "0s ago"
		abs.absolute = true
		r["time"] = abs.tableDate(t)
	}
	cells := make([]string, len(p.cols))
	for i, c := range p.cols {
		cells[i] = r[c]
	}
	if p.out.format == "value" {
		_, err := fmt.Fprintln(p.w, strings.Join(cells, " "))
		return err
	}
	line := p.row(cells)
	if n.Error != "" && !slices.Contains(p.cols, "error") {
		line += "  error: " + n.Error
	}
	_, err := fmt.Fprintln(p.w, line)
	return err
}

// row pads every cell but the last to its column's width.
func (p *eventPrinter) row(cells []string) string {
	var b strings.Builder
	for i, c := range cells {
		if i > 0 {
			b.WriteString("  ")
		}
		if i < len(cells)-1 {
			fmt.Fprintf(&b, "%-*s", eventWidths[p.cols[i]], c)
		} else {
			b.WriteString(c)
		}
	}
	return strings.TrimRight(b.String(), " ")
}
