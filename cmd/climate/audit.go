package main

import (
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"climate/http/client"
)

// auditColumns are the audit table's default columns.
var auditColumns = []string{"id", "created_at", "actor", "actor_user_id", "request_id", "action", "target_type", "target_id", "reason"}

func newAuditCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Read the audit trail: who changed what, when (admins)",
		Long: `The audit trail records every change: leases (created, updated, deleted, and the
service's own changes: a waiting lease booked, healing, preemption), hosts, resource
properties, maintenance windows, floating IPs, flavors and webhooks. Each entry names
who made it (a user and project, or "climate" for the service, with the reason), when,
the API request's id, the target, and the fields that changed (before/after; never
secrets). Entries are written in the same transaction as the change, so a change that
failed has none. The trail is read-only; reading it needs the climate:audit:get rule
(admins by default).

` + clientHelp,
		Example: `  climate audit list
  climate audit list --lease train -o json
  climate audit list --host node-3 --since "2030-01-01 00:00" --until +7d
  climate audit list --project physics --since "2030-01-01 00:00" -c created_at -c action -c target_id`,
	}
	o := addClientFlags(cmd)
	cmd.AddCommand(newAuditListCmd(o))
	return cmd
}

func newAuditListCmd(o *clientOptions) *cobra.Command {
	var lease, host, project, since, until string
	var limit int
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List audit entries, oldest first",
		Long: `List the audit trail's entries, oldest first, optionally only those of one lease,
host or project, or recorded in [--since, --until). --lease and --host take a name or
an id (the id of a lease or host that was deleted since works too). The server is asked
for them page by page; --limit stops after the first N.`,
		Example: `  climate audit list --lease train -o json
  climate audit list --host node-3
  climate audit list --project 5e1f… --since "2030-01-01 00:00" --until +1d
  climate audit list --limit 20 -c id -c action -c actor -c reason -o value`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if limit < 0 {
				return fmt.Errorf("--limit %d: want a positive number of entries, or 0 for all", limit)
			}
			q := client.AuditQuery{ProjectID: project, Limit: limit}
			now := time.Now()
			from := now
			if since != "" {
				t, isNow, err := parseDate("since", since, now)
				if err != nil {
					return err
				}
				if !isNow {
					from = t
				}
				q.Since = wireDate(from)
			}
			if until != "" {
				t, isNow, err := parseDate("until", until, from)
				if err != nil {
					return err
				}
				if isNow {
					t = now
				}
				if since != "" && !t.After(from) {
					return fmt.Errorf("--until %q is not after --since %q", until, since)
				}
				q.Until = wireDate(t)
			}
			c, err := o.client(cmd)
			if err != nil {
				return err
			}
			if lease != "" {
				l, err := c.FindLease(cmd.Context(), lease)
				switch {
				case err == nil:
					q.LeaseID = l.ID
				case client.IsNotFound(err) && looksLikeID(lease):
					q.LeaseID = lease // deleted: its entries remain
				default:
					return fmt.Errorf("--lease: %w", err)
				}
			}
			if host != "" {
				h, err := c.FindHost(cmd.Context(), host)
				switch {
				case err == nil:
					q.HostID = h.ID
				case client.IsNotFound(err) && isDigits(host):
					q.HostID = host // deleted: its entries remain
				default:
					return fmt.Errorf("--host: %w", err)
				}
			}
			entries, err := c.ListAudit(cmd.Context(), q)
			if err != nil {
				return err
			}
			return o.out.printList(cmd.OutOrStdout(), entries, auditColumns)
		},
	}
	cmd.Flags().StringVar(&lease, "lease", "", "only this lease's entries (name or id)")
	cmd.Flags().StringVar(&host, "host", "", "only this host's entries (name or id), its maintenance and healing included")
	cmd.Flags().StringVar(&project, "project", "", "only the entries of this project's leases and webhooks (project id)")
	cmd.Flags().StringVar(&since, "since", "", "only entries recorded at or after this date: "+dateHelp)
	cmd.Flags().StringVar(&until, "until", "", "only entries recorded before this date (+DURATION counts from --since): "+dateHelp)
	cmd.Flags().IntVar(&limit, "limit", 0, "list at most this many entries, the oldest (0: all)")
	return cmd
}

// looksLikeID reports whether s has the 8-4-4-4-12 form of lease ids.
func looksLikeID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, r := range s {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			if r != '-' {
				return false
			}
		} else if !('0' <= r && r <= '9' || 'a' <= r && r <= 'f' || 'A' <= r && r <= 'F') {
			return false
		}
	}
	return true
}

func isDigits(s string) bool {
	_, err := strconv.ParseUint(s, 10, 64)
	return err == nil
}
