// Package hooks runs the operator's actions when leases start and end, in standalone mode:
// a command (argv, no shell) or a webhook per host of the lease, with the lease, the
// reservation, the host and the event in its environment (or JSON body). Actions
// implements the engine's Actions, so a failed hook fails the event and puts the lease
// into ERROR with the hook's message.
//
// Every hook run is bounded: each attempt by a timeout (a command's whole process group is
// killed at it), the attempts by a count with doubling waits between them, the hosts run
// at once by a bound, and the output kept by a size. Hooks see at-least-once calls (an
// engine taken over re-runs an event), so each run carries an action id, the same for
// every attempt and re-run of one host's event, for a hook to de-duplicate on.
package hooks

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"
)

// Hook is one configured action: a command or a webhook.
type Hook struct {
	// Argv is a command and its arguments, run without a shell.
	Argv []string
	// URL is a webhook's address: each run POSTs a JSON object to it.
	URL string
}

// Parse reads a hook from its flag form: an http:// or https:// URL is a webhook;
// anything else is a command line, split into words as a shell would split it (blanks
// separate words; single quotes keep text as is; double quotes and backslashes escape)
// but with no expansion, redirection or pipes: write `sh -c '…'` for those.
func Parse(spec string) (Hook, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return Hook{}, errors.New("empty hook: want a command line or an http(s):// URL")
	}
	if lower := strings.ToLower(spec); strings.HasPrefix(lower, "http://") || strings.HasPrefix(lower, "https://") {
		u, err := url.Parse(spec)
		if err != nil || u.Host == "" {
			return Hook{}, fmt.Errorf("webhook %s: not a URL with a host", redact(spec))
		}
		return Hook{URL: spec}, nil
	}
	argv, err := Split(spec)
	if err != nil {
		return Hook{}, err
	}
	return Hook{Argv: argv}, nil
}

// Split splits a command line into words as a POSIX shell does, without any expansion.
func Split(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("command line: unterminated single quote")
			}
			w.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				// Within double quotes a backslash escapes only these, as in sh.
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`", s[i+1]) >= 0 {
					i++
				}
				w.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, errors.New("command line: unterminated double quote")
			}
			inWord = true
		case c == '\\':
			if i+1 >= len(s) {
				return nil, errors.New("command line: trailing backslash")
			}
			i++
			w.WriteByte(s[i])
			inWord = true
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	if len(words) == 0 {
		return nil, errors.New("empty command line")
	}
	return words, nil
}

// String names the hook for logs and messages without anything secret: a command by its
// program's base name (its arguments may hold a password), a webhook by its scheme, host
// and path (no user information or query).
func (h Hook) String() string {
	if h.URL != "" {
		return "webhook " + redact(h.URL)
	}
	if len(h.Argv) == 0 {
		return "no hook"
	}
	return "command " + filepath.Base(h.Argv[0])
}

// redact keeps a URL's scheme, host and path.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}

// Vars is what a hook run is about: the event, and the lease, reservation and host it
// concerns (empty when the run concerns a host alone, as power commands may).
type Vars struct {
	Event         string
	LeaseID       string
	LeaseName     string
	ProjectID     string
	ReservationID string
	HostID        string
	HostName      string
	Start, End    time.Time
	// Token, with --auth keystone, is a token from the lease's trust: it acts as the
	// lease's owner (OS_AUTH_TOKEN for a command, X-Auth-Token for a URL); never logged.
	Token string
}

// ActionID identifies a host's event: the same for every attempt and every re-run, for
// receivers to de-duplicate at-least-once calls.
func (v Vars) ActionID() string {
	sum := sha256.Sum256([]byte(v.Event + "\x00" + v.LeaseID + "\x00" + v.ReservationID + "\x00" + v.HostID))
	return hex.EncodeToString(sum[:16])
}

// Env returns the variables a command sees: CLIMATE_EVENT, CLIMATE_LEASE_ID,
// CLIMATE_LEASE_NAME, CLIMATE_PROJECT_ID, CLIMATE_RESERVATION_ID, CLIMATE_HOST_ID,
// CLIMATE_HOST_NAME, CLIMATE_START, CLIMATE_END (RFC 3339, UTC; empty when not about a
// lease) and CLIMATE_ACTION_ID; and OS_AUTH_TOKEN when the lease has a trust token.
func (v Vars) Env() []string {
	env := []string{
		"CLIMATE_EVENT=" + v.Event,
		"CLIMATE_LEASE_ID=" + v.LeaseID,
		"CLIMATE_LEASE_NAME=" + v.LeaseName,
		"CLIMATE_PROJECT_ID=" + v.ProjectID,
		"CLIMATE_RESERVATION_ID=" + v.ReservationID,
		"CLIMATE_HOST_ID=" + v.HostID,
		"CLIMATE_HOST_NAME=" + v.HostName,
		"CLIMATE_START=" + formatTime(v.Start),
		"CLIMATE_END=" + formatTime(v.End),
		"CLIMATE_ACTION_ID=" + v.ActionID(),
	}
	if v.Token != "" {
		env = append(env, "OS_AUTH_TOKEN="+v.Token)
	}
	return env
}

// payload is a webhook's JSON body: the same facts as Env.
type payload struct {
	Event         string `json:"event"`
	ActionID      string `json:"action_id"`
	LeaseID       string `json:"lease_id"`
	LeaseName     string `json:"lease_name"`
	ProjectID     string `json:"project_id"`
	ReservationID string `json:"reservation_id"`
	HostID        string `json:"host_id"`
	HostName      string `json:"host_name"`
	Start         string `json:"start"`
	End           string `json:"end"`
}

func (v Vars) payload() payload {
	return payload{Event: v.Event, ActionID: v.ActionID(), LeaseID: v.LeaseID, LeaseName: v.LeaseName,
		ProjectID: v.ProjectID, ReservationID: v.ReservationID, HostID: v.HostID, HostName: v.HostName,
		Start: formatTime(v.Start), End: formatTime(v.End)}
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}
