package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

// availabilityOptions are the connection settings of the availability commands.
type availabilityOptions struct {
	url, token, output string
	hypervisorProps    string
	resourceProps      string
}

func newAvailabilityCmd() *cobra.Command {
	o := &availabilityOptions{}
	cmd := &cobra.Command{
		Use:   "availability",
		Short: "Ask a running Climate when hosts are free (earliest slot, timeline)",
		Long: `Ask a running Climate server about free capacity. The server comes from --url or
CLIMATE_URL (default http://127.0.0.1:1234); with token authentication pass --token or
CLIMATE_TOKEN. Property filters use Blazar's query language.`,
	}
	f := cmd.PersistentFlags()
	f.StringVar(&o.url, "url", "http://127.0.0.1:1234", "Climate server URL")
	f.StringVar(&o.token, "token", "", "X-Auth-Token to send (servers started with --auth tokens)")
	f.StringVarP(&o.output, "output", "o", "table", "output format: table or json")
	f.StringVar(&o.hypervisorProps, "hypervisor-properties", "", `host filter, e.g. '[">=", "$memory_mb", "131072"]'`)
	f.StringVar(&o.resourceProps, "resource-properties", "", `host filter, e.g. '["==", "$gpu", "true"]'`)
	cmd.AddCommand(newEarliestCmd(o), newTimelineCmd(o))
	return cmd
}

func newEarliestCmd(o *availabilityOptions) *cobra.Command {
	var count, limit int
	var duration, after, deadline string
	cmd := &cobra.Command{
		Use:   "earliest",
		Short: "Find the earliest windows in which COUNT matching hosts are free for DURATION",
		Example: `  climate availability earliest --count 2 --duration 6h --resource-properties '["==", "$gpu", "true"]'
  climate availability earliest --count 10 --duration 3d --after "2030-01-01 00:00" --deadline "2030-02-01 00:00" -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if duration == "" {
				return fmt.Errorf("--duration is required (e.g. 90m, 6h, 2d)")
			}
			q := url.Values{"count": {fmt.Sprint(count)}, "duration": {duration}, "limit": {fmt.Sprint(limit)}}
			setIf(q, "after", after)
			setIf(q, "deadline", deadline)
			var out struct {
				Slots []slotOut `json:"slots"`
			}
			if err := o.get(cmd, "/v1/availability/earliest", q, &out); err != nil {
				return err
			}
			if o.output == "json" {
				return printJSON(cmd.OutOrStdout(), out)
			}
			if len(out.Slots) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "No window found before the deadline.")
				return nil
			}
			return printSlots(cmd.OutOrStdout(), out.Slots)
		},
	}
	cmd.Flags().IntVar(&count, "count", 1, "number of hosts that must be free")
	cmd.Flags().StringVar(&duration, "duration", "", "how long they must be free (90m, 6h, 2d, 1d12h)")
	cmd.Flags().StringVar(&after, "after", "", `earliest start ("YYYY-MM-DD HH:MM", RFC 3339; default now)`)
	cmd.Flags().StringVar(&deadline, "deadline", "", "the window must end by then (default a year after --after)")
	cmd.Flags().IntVar(&limit, "limit", 3, "how many windows to list")
	return cmd
}

func newTimelineCmd(o *availabilityOptions) *cobra.Command {
	var from, to, step string
	cmd := &cobra.Command{
		Use:     "timeline",
		Short:   "Count matching hosts free in each step of a time range",
		Example: `  climate availability timeline --from "2030-01-01 00:00" --to "2030-01-08 00:00" --step 1d`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if from == "" || to == "" {
				return fmt.Errorf("--from and --to are required")
			}
			q := url.Values{"from": {from}, "to": {to}, "step": {step}}
			var out struct {
				Matching int       `json:"matching_hosts"`
				Timeline []slotOut `json:"timeline"`
			}
			if err := o.get(cmd, "/v1/availability/timeline", q, &out); err != nil {
				return err
			}
			if o.output == "json" {
				return printJSON(cmd.OutOrStdout(), out)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%d matching hosts\n", out.Matching)
			return printSlots(cmd.OutOrStdout(), out.Timeline)
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "range start (\"YYYY-MM-DD HH:MM\", RFC 3339, now)")
	cmd.Flags().StringVar(&to, "to", "", "range end")
	cmd.Flags().StringVar(&step, "step", "1h", "bucket width (90m, 6h, 1d)")
	return cmd
}

type slotOut struct {
	StartDate string `json:"start_date"`
	EndDate   string `json:"end_date"`
	FreeHosts int    `json:"free_hosts"`
}

func setIf(q url.Values, key, value string) {
	if value != "" {
		q.Set(key, value)
	}
}

// get calls the server and decodes its answer, turning API errors into their message.
func (o *availabilityOptions) get(cmd *cobra.Command, path string, q url.Values, out any) error {
	if o.output != "table" && o.output != "json" {
		return fmt.Errorf("--output %q: want table or json", o.output)
	}
	setIf(q, "hypervisor_properties", o.hypervisorProps)
	setIf(q, "resource_properties", o.resourceProps)
	req, err := http.NewRequestWithContext(cmd.Context(), http.MethodGet, strings.TrimSuffix(o.url, "/")+path+"?"+q.Encode(), nil)
	if err != nil {
		return fmt.Errorf("--url %q: %v", o.url, err)
	}
	if o.token != "" {
		req.Header.Set("X-Auth-Token", o.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach Climate at %s: %v", o.url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode >= 400 {
		var e struct {
			Message string `json:"error_message"`
		}
		if json.Unmarshal(body, &e) == nil && e.Message != "" {
			return fmt.Errorf("%s", e.Message)
		}
		return fmt.Errorf("server answered %s", resp.Status)
	}
	return json.Unmarshal(body, out)
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func printSlots(w io.Writer, slots []slotOut) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "START\tEND\tFREE HOSTS")
	for _, s := range slots {
		fmt.Fprintf(tw, "%s\t%s\t%d\n", s.StartDate, s.EndDate, s.FreeHosts)
	}
	return tw.Flush()
}
