package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"climate"
	"climate/http/api"
)

// webhookColumns are webhook list's default columns; deliveryColumns deliveries'.
var (
	webhookColumns  = []string{"id", "project_id", "url", "event_types", "enabled"}
	deliveryColumns = []string{"seq", "event_type", "lease_id", "status", "attempts", "response_code", "last_attempt_at", "last_error"}
)

func newWebhookCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "webhook",
		Short: "Subscribe URLs to your leases' notifications, signed (Climate's extension)",
		Long: `A webhook receives your project's lease notifications (lease.create, lease.update,
lease.delete, lease.event.start_lease, …) as signed HTTP POSTs, each with the
notification's JSON as the event stream shows it, in order. A delivery the receiver
does not accept (2xx) is retried with growing waits; after a day of failures the
webhook is disabled, with the reason (climate webhook show).
Deliveries carry Climate-Signature: t=UNIX,v1=HMAC-SHA256(secret, "UNIX.BODY"),
Climate-Delivery (the id to de-duplicate on) and Climate-Event headers, and are signed
the Standard Webhooks way too (webhook-id, webhook-timestamp, webhook-signature), so its
libraries verify them. The secret is shown once, when the webhook is created. Members manage their project's webhooks,
readers list them, admins may subscribe to every project's (--all-projects).

` + clientHelp,
		Example: `  climate webhook create https://hooks.example.org/climate --event lease.event.start_lease
  climate webhook list
  climate webhook deliveries 6f1c9c2e-…`,
	}
	o := addClientFlags(cmd)
	cmd.AddCommand(newWebhookCreateCmd(o), newWebhookListCmd(o), newWebhookShowCmd(o), newWebhookUpdateCmd(o),
		newWebhookDeleteCmd(o), newWebhookDeliveriesCmd(o))
	return cmd
}

func newWebhookCreateCmd(o *clientOptions) *cobra.Command {
	var (
		events      []string
		project     string
		allProjects bool
		secretFile  string
	)
	cmd := &cobra.Command{
		Use:   "create URL",
		Short: "Subscribe a URL to lease notifications",
		Long: `Subscribe URL (http or https) to the notifications of your project's leases: all of
them, or only the --event types given. Climate first sends the URL a signed test
delivery (event webhook.ping) and refuses a URL that does not answer it with 2xx.

The answer shows the signing secret, once: keep it to verify deliveries. Give your own
with --secret-file (16 to 256 printable characters, read from a file or, with -, from
standard input), so a receiver configured beforehand can verify the test delivery too.

Event types: ` + strings.Join(climate.NotificationTypes(), ", ") + `.`,
		Example: `  climate webhook create https://hooks.example.org/climate
  climate webhook create https://hooks.example.org/starts --event lease.event.start_lease --event lease.event.end_lease
  climate webhook create https://hooks.example.org/climate --secret-file ./secret
  pass show climate/hook | climate webhook create https://hooks.example.org/climate --secret-file -
  climate webhook create https://ops.example.org/all --all-projects -o value -c secret   # admins`,
		Args: exactArgs(1, "URL"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if project != "" && allProjects {
				return fmt.Errorf("give --project or --all-projects, not both")
			}
			req := api.WebhookRequest{URL: args[0], EventTypes: events, ProjectID: project, AllProjects: allProjects}
			if secretFile != "" {
				secret, err := readSecret(cmd.InOrStdin(), secretFile)
				if err != nil {
					return err
				}
				req.Secret = secret
			}
			c, err := o.client(cmd)
			if err != nil {
				return err
			}
			w, err := c.CreateWebhook(cmd.Context(), req)
			if err != nil {
				return err
			}
			if err := o.out.printObject(cmd.OutOrStdout(), w); err != nil {
				return err
			}
			fmt.Fprintln(cmd.ErrOrStderr(), "Note: the secret is shown only now; keep it to verify the Climate-Signature of deliveries.")
			return nil
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&events, "event", nil, "notification type to send (repeatable; default: all)")
	f.StringVar(&project, "project", "", "the project whose leases' notifications to send (default: yours; another needs admin)")
	f.BoolVar(&allProjects, "all-projects", false, "every project's notifications (admins)")
	f.StringVar(&secretFile, "secret-file", "", "read the signing secret from this file (- for standard input) instead of letting the server generate one")
	_ = cmd.RegisterFlagCompletionFunc("event", completeEventTypes)
	return cmd
}

// readSecret reads a secret from a file, or from in when path is "-"; surrounding
// whitespace (a final newline) is dropped.
func readSecret(in io.Reader, path string) (string, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(io.LimitReader(in, 64<<10))
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return "", fmt.Errorf("--secret-file: %v", err)
	}
	secret := strings.TrimSpace(string(b))
	if secret == "" {
		return "", fmt.Errorf("--secret-file %s: no secret in it", path)
	}
	return secret, nil
}

func newWebhookListCmd(o *clientOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List your project's webhooks (admins: all)",
		Long:  `List webhooks in creation order. EVENT TYPES is empty for a webhook that receives every type.`,
		Example: `  climate webhook list
  climate webhook list -c id,url,enabled,disabled_reason
  climate webhook list -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.client(cmd)
			if err != nil {
				return err
			}
			hooks, err := c.ListWebhooks(cmd.Context())
			if err != nil {
				return err
			}
			return o.out.printList(cmd.OutOrStdout(), hooks, webhookColumns)
		},
	}
}

func newWebhookShowCmd(o *clientOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "show ID",
		Short: "Show a webhook (without its secret)",
		Example: `  climate webhook show 6f1c9c2e-…
  climate webhook show 6f1c9c2e-… -o value -c disabled_reason`,
		Args:              exactArgs(1, "ID"),
		ValidArgsFunction: completeWebhooks(o),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client(cmd)
			if err != nil {
				return err
			}
			w, err := c.GetWebhook(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return o.out.printObject(cmd.OutOrStdout(), w)
		},
	}
}

func newWebhookUpdateCmd(o *clientOptions) *cobra.Command {
	var (
		newURL          string
		events          []string
		allEvents       bool
		enable, disable bool
	)
	cmd := &cobra.Command{
		Use:     "update ID",
		Aliases: []string{"set"},
		Short:   "Change a webhook's URL or event types, or disable and enable it",
		Long: `Change a webhook. A --new-url gets a test delivery first, as at creation. --event
replaces the event types (repeat it for several); --all-events sends every type.

A webhook whose deliveries failed for a day is disabled (show gives the reason).
--enable turns it back on: deliveries resume with the next notification, and what
happened while it was disabled is not sent.`,
		Example: `  climate webhook update 6f1c9c2e-… --disable
  climate webhook update 6f1c9c2e-… --enable
  climate webhook update 6f1c9c2e-… --new-url https://hooks.example.org/v2
  climate webhook update 6f1c9c2e-… --event lease.create --event lease.delete
  climate webhook update 6f1c9c2e-… --all-events`,
		Args:              exactArgs(1, "ID"),
		ValidArgsFunction: completeWebhooks(o),
		RunE: func(cmd *cobra.Command, args []string) error {
			var u api.WebhookUpdate
			switch {
			case enable && disable:
				return fmt.Errorf("give --enable or --disable, not both")
			case allEvents && len(events) > 0:
				return fmt.Errorf("give --event or --all-events, not both")
			}
			if cmd.Flags().Changed("new-url") {
				u.URL = &newURL
			}
			if len(events) > 0 {
				u.EventTypes = &events
			} else if allEvents {
				u.EventTypes = &[]string{}
			}
			if enable || disable {
				u.Enabled = &enable
			}
			if u.URL == nil && u.EventTypes == nil && u.Enabled == nil {
				return fmt.Errorf("nothing to change: give --new-url, --event, --all-events, --enable or --disable")
			}
			c, err := o.client(cmd)
			if err != nil {
				return err
			}
			w, err := c.UpdateWebhook(cmd.Context(), args[0], u)
			if err != nil {
				return err
			}
			return o.out.printObject(cmd.OutOrStdout(), w)
		},
	}
	f := cmd.Flags()
	// Not --url: that is the server's (every client command's flag).
	f.StringVar(&newURL, "new-url", "", "send to this URL instead (it gets a test delivery first)")
	f.StringArrayVar(&events, "event", nil, "notification type to send (repeatable): replaces the current types")
	f.BoolVar(&allEvents, "all-events", false, "send every notification type")
	f.BoolVar(&enable, "enable", false, "enable the webhook: deliveries resume with the next notification")
	f.BoolVar(&disable, "disable", false, "disable the webhook: nothing is sent until it is enabled")
	_ = cmd.RegisterFlagCompletionFunc("event", completeEventTypes)
	return cmd
}

func newWebhookDeleteCmd(o *clientOptions) *cobra.Command {
	return &cobra.Command{
		Use:               "delete ID…",
		Short:             "Delete webhooks: deliveries to them stop at once",
		Example:           "  climate webhook delete 6f1c9c2e-…\n  climate webhook list -o value -c id | xargs climate webhook delete",
		Args:              minArgs(1, "ID…"),
		ValidArgsFunction: completeWebhooks(o),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client(cmd)
			if err != nil {
				return err
			}
			for _, id := range args {
				if err := c.DeleteWebhook(cmd.Context(), id); err != nil {
					return fmt.Errorf("deleting webhook %s: %w", id, err)
				}
				if o.out.format == "table" {
					fmt.Fprintf(cmd.OutOrStdout(), "Deleted webhook %s\n", id)
				}
			}
			return nil
		},
	}
}

func newWebhookDeliveriesCmd(o *clientOptions) *cobra.Command {
	var limit int
	cmd := &cobra.Command{
		Use:   "deliveries ID",
		Short: "Show a webhook's latest deliveries and how they went",
		Long: fmt.Sprintf(`Show a webhook's latest deliveries, latest first: each notification's status
(delivered, retrying, failed), the attempts it took, the receiver's last HTTP status (0
when it did not answer) and the last error. A webhook keeps its %d latest.`, climate.WebhookDeliveriesKept),
		Example: `  climate webhook deliveries 6f1c9c2e-…
  climate webhook deliveries 6f1c9c2e-… --limit 5 -c seq,status,last_error
  climate webhook deliveries 6f1c9c2e-… -o json`,
		Args:              exactArgs(1, "ID"),
		ValidArgsFunction: completeWebhooks(o),
		RunE: func(cmd *cobra.Command, args []string) error {
			if limit < 0 {
				return fmt.Errorf("--limit %d: want a positive number of deliveries, or 0 for all kept", limit)
			}
			c, err := o.client(cmd)
			if err != nil {
				return err
			}
			ds, err := c.WebhookDeliveries(cmd.Context(), args[0], limit)
			if err != nil {
				return err
			}
			return o.out.printList(cmd.OutOrStdout(), ds, deliveryColumns)
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 0, "show at most this many, the latest (0: all kept)")
	return cmd
}

// completeWebhooks completes webhook ids from the server, described by their URL.
func completeWebhooks(o *clientOptions) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
		c, err := o.completionClient(cmd)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		hooks, err := c.ListWebhooks(cmd.Context())
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		out := make([]string, 0, len(hooks))
		for _, w := range hooks {
			out = append(out, w.ID+"\t"+w.URL)
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeEventTypes completes --event with the notification types.
func completeEventTypes(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return climate.NotificationTypes(), cobra.ShellCompDirectiveNoFileComp
}
