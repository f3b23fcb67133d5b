// Package http serves Blazar's v1 REST API. Blazar's wire shapes (JSON keys, date formats,
// error bodies, headers) live here and only here; everything behind it speaks the domain.
package http

import (
	"climate/buildinfo"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"

	"climate"
)

// MaxBodyBytes bounds request bodies; larger ones get 413.
const MaxBodyBytes = 1 << 20

// Server is the REST API.
type Server struct {
	Leases climate.LeaseService
	Hosts  climate.HostService
	// Availability serves Climate's calendar extensions; nil leaves them out.
	Availability climate.AvailabilityService
	Auth         Authenticator
	Logger       *slog.Logger
	// CrossOrigin refuses state-changing requests that a browser sends from another
	// site (CSRF); nil trusts no other origin.
	CrossOrigin *http.CrossOriginProtection
	// Notifications serves the live event stream, GET /v1/events/stream (Climate's
	// extension); nil leaves it out (404).
	Notifications climate.NotificationService
	// StreamHeartbeat is how often a quiet event stream sends a comment line, so proxies
	// keep it open; 0 means DefaultStreamHeartbeat.
	StreamHeartbeat time.Duration
	// Clock tells the time for figures computed on reading (a host's hours powered off);
	// nil: the system clock.
	Clock climate.Clock
	// Webhooks serves /v1/webhooks (Climate's extension); nil leaves it out (404).
	Webhooks climate.WebhookService
	// FloatingIPs serves /v1/floatingips (Blazar's virtual:floatingip inventory); nil
	// leaves it out (404), as Blazar does without the plugin.
	FloatingIPs climate.FloatingIPService
	// Flavors serves /v1/flavors (Climate's extension: Nova's flavors, kept by Climate in
	// standalone mode); nil leaves it out (404).
	Flavors climate.FlavorService
	// Maintenances serves hosts' maintenance windows (Climate's extension,
	// /v1/os-hosts/…/maintenances); nil: Hosts, when it offers them, else they are left
	// out (404).
	Maintenances climate.MaintenanceService
	// Audit serves the audit trail, GET /v1/audit (Climate's extension); nil: Hosts,
	// when it offers it, else it is left out (404).
	Audit climate.AuditService
	// Usage serves usage records and project limits, GET /v1/usage and
	// /v1/projects/{project_id}/limits (Climate's extension); nil: Hosts, when it offers
	// them, else they are left out (404).
	Usage climate.UsageService
	// Observe, when set, is told of every request once answered: the mux pattern that
	// matched ("" when the request was refused before routing; never the raw path, whose
	// ids would make a metric's labels unbounded), the method, status and duration.
	Observe func(route, method string, status int, d time.Duration)
	// UI serves the web calendar under /ui/ (package ui); nil leaves it out (404).
	UI http.Handler
}

func (s *Server) now() time.Time {
	if s.Clock == nil {
		return time.Now().UTC()
	}
	return s.Clock.Now()
}

// Handler returns the API's root handler.
func (s *Server) Handler() http.Handler {
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	if s.CrossOrigin == nil {
		s.CrossOrigin = http.NewCrossOriginProtection()
	}
	mux := http.NewServeMux()
	mux.Handle("/{$}", s.versions(false))
	mux.Handle("/versions", s.versions(false))
	mux.Handle("/v1", s.versions(true))
	mux.Handle("/v1/{$}", s.versions(true))
	mux.Handle("/v1/leases", s.methods(map[string]handler{"GET": s.listLeases, "POST": s.createLease}))
	mux.Handle("/v1/leases.ics", s.methods(map[string]handler{"GET": s.leasesCalendar}))
	mux.Handle("/v1/leases/{id}", s.methods(map[string]handler{"GET": s.getLease, "PUT": s.updateLease, "DELETE": s.deleteLease}))
	mux.Handle("/v1/os-hosts", s.methods(map[string]handler{"GET": s.listHosts, "POST": s.createHost}))
	mux.Handle("/v1/os-hosts/allocations", s.methods(map[string]handler{"GET": s.listAllocations}))
	mux.Handle("/v1/os-hosts/properties", s.methods(map[string]handler{"GET": s.listProperties}))
	mux.Handle("/v1/os-hosts/{id}", s.methods(map[string]handler{"GET": s.getHost, "PUT": s.updateHost, "DELETE": s.deleteHost}))
	// One pattern for both /os-hosts/properties/{name} and /os-hosts/{id}/allocation: the
	// mux cannot tell which of the two is more specific.
	setProperty := s.methods(map[string]handler{"PATCH": s.setProperty})
	getAllocation := s.methods(map[string]handler{"GET": s.getAllocation})
	notFound := s.methods(nil)
	hostMaintenances := notFound
	if s.maintenances() != nil {
		mux.Handle("/v1/os-hosts/maintenances", s.methods(map[string]handler{"GET": s.listMaintenances}))
		mux.Handle("/v1/os-hosts/{id}/maintenances/{mid}", s.methods(map[string]handler{"GET": s.getMaintenance, "DELETE": s.deleteMaintenance}))
		hostMaintenances = s.methods(map[string]handler{"GET": s.listMaintenances, "POST": s.createMaintenance})
	}
	mux.HandleFunc("/v1/os-hosts/{id}/{sub}", func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.PathValue("id") == "properties":
			setProperty.ServeHTTP(w, r)
		case r.PathValue("sub") == "allocation":
			getAllocation.ServeHTTP(w, r)
		case r.PathValue("sub") == "maintenances":
			hostMaintenances.ServeHTTP(w, r)
		default:
			notFound.ServeHTTP(w, r)
		}
	})
	if s.Availability != nil {
		mux.Handle("/v1/availability/earliest", s.methods(map[string]handler{"GET": s.earliest}))
		mux.Handle("/v1/availability/timeline", s.methods(map[string]handler{"GET": s.timeline}))
	}
	if s.Notifications != nil {
		mux.Handle("/v1/events/stream", s.methods(map[string]handler{"GET": s.streamEvents}))
	}
	if s.audit() != nil {
		// Read-only: the trail is written by the changes it records, never through the API.
		mux.Handle("/v1/audit", s.methods(map[string]handler{"GET": s.listAudit}))
	}
	if s.usage() != nil {
		mux.Handle("/v1/usage", s.methods(map[string]handler{"GET": s.listUsage}))
		mux.Handle("/v1/projects/{id}/limits", s.methods(map[string]handler{"GET": s.getLimits, "PUT": s.updateLimits}))
	}
	if s.Webhooks != nil {
		mux.Handle("/v1/webhooks", s.methods(map[string]handler{"GET": s.listWebhooks, "POST": s.createWebhook}))
		mux.Handle("/v1/webhooks/{id}", s.methods(map[string]handler{"GET": s.getWebhook, "PUT": s.updateWebhook, "DELETE": s.deleteWebhook}))
		mux.Handle("/v1/webhooks/{id}/deliveries", s.methods(map[string]handler{"GET": s.webhookDeliveries}))
	}
	if s.FloatingIPs != nil {
		mux.Handle("/v1/floatingips", s.methods(map[string]handler{"GET": s.listFloatingIPs, "POST": s.createFloatingIP}))
		mux.Handle("/v1/floatingips/{id}", s.methods(map[string]handler{"GET": s.getFloatingIP, "DELETE": s.deleteFloatingIP}))
	}
	if s.Flavors != nil {
		mux.Handle("/v1/flavors", s.methods(map[string]handler{"GET": s.listFlavors, "POST": s.createFlavor}))
		mux.Handle("/v1/flavors/{id}", s.methods(map[string]handler{"GET": s.getFlavor, "DELETE": s.deleteFlavor}))
	}
	if s.UI != nil {
		mux.Handle("/ui/", s.UI) // the web calendar's page and assets (package ui)
	}
	mux.Handle("/", s.unknownRoute(mux))
	return s.middleware(mux)
}

// unsupportedRoutes are Blazar's v1 collections this server does not serve yet.
var unsupportedRoutes = map[string]string{
	"networks": "network reservations (Blazar's network plugin)",
	"devices":  "device reservations (Blazar's device plugin)",
}

// unknownRoute answers a path no route serves with a 404 in Blazar's error shape that
// says what may be meant: the same path under /v1 (a client pointed at the server's root
// rather than its /v1 endpoint), or that a Blazar route is not supported by this server.
func (s *Server) unknownRoute(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		msg := fmt.Sprintf("The resource %s could not be found.", r.URL.Path)
		under := r.Clone(r.Context())
		under.URL.Path = "/v1" + r.URL.Path
		rest, inV1 := strings.CutPrefix(r.URL.Path, "/v1/")
		if _, pattern := mux.Handler(under); !inV1 && pattern != "/" {
			msg += fmt.Sprintf(" The API is under /v1: did you mean %s? (Give the endpoint as …/v1.)", under.URL.Path)
		} else if what, ok := unsupportedRoutes[strings.SplitN(rest, "/", 2)[0]]; inV1 && ok {
			msg = fmt.Sprintf("%s are not supported by this server: %s is one of Blazar's routes that Climate does not serve yet.", capitalize(what), r.URL.Path)
		}
		s.writeError(w, r, climate.Errorf(climate.CodeNotFound, "%s", msg))
	})
}

// capitalize returns s with its first letter in upper case.
func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// handler is an API handler: it returns the status and body to send, or an error.
type handler func(r *http.Request, who climate.Identity) (int, any, error)

// methods dispatches on the HTTP method so that 404 and 405 share the JSON error shape.
func (s *Server) methods(byMethod map[string]handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if byMethod == nil {
			s.writeError(w, r, climate.Errorf(climate.CodeNotFound, "The resource %s could not be found.", r.URL.Path))
			return
		}
		h, ok := byMethod[r.Method]
		if !ok && r.Method == http.MethodHead {
			h, ok = byMethod[http.MethodGet] // the server sends no body for HEAD
		}
		if !ok {
			allowed := make([]string, 0, len(byMethod)+1)
			for m := range byMethod {
				allowed = append(allowed, m)
			}
			if byMethod[http.MethodGet] != nil {
				allowed = append(allowed, http.MethodHead)
			}
			sort.Strings(allowed)
			w.Header().Set("Allow", strings.Join(allowed, ", "))
			s.writeErrorStatus(w, r, http.StatusMethodNotAllowed, fmt.Sprintf("Method %s is not allowed on %s.", r.Method, r.URL.Path))
			return
		}
		who, err := s.Auth.Authenticate(r)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		status, body, err := h(r, who)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if lb, ok := body.(*listBody); ok {
			s.writeList(w, r, lb)
			return
		}
		if es, ok := body.(*eventStream); ok {
			s.writeStream(w, r, es)
			return
		}
		if rb, ok := body.(*rawBody); ok {
			w.Header().Set("Content-Type", rb.contentType)
			w.Header().Set("Content-Disposition", rb.disposition)
			w.WriteHeader(status)
			_, _ = w.Write(rb.data)
			return
		}
		writeJSON(w, status, body)
	})
}

var requestIDPattern = regexp.MustCompile(`^req-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

var microversionPattern = regexp.MustCompile(`^[1-9]\d*\.([1-9]\d*|0)$`)

// middleware adds the request id and version headers, refuses cross-origin writes,
// enforces the body limit and JSON content type, strips Blazar's optional ".json" suffix, logs, and turns panics into 500s.
func (s *Server) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		reqID := "req-" + climate.NewID()
		if inbound := r.Header.Get("X-OpenStack-Request-ID"); requestIDPattern.MatchString(inbound) {
			r.Header.Set("X-OpenStack-Global-Request-ID", inbound)
		}
		h := w.Header()
		h.Set("X-OpenStack-Request-ID", reqID)
		h.Set("OpenStack-API-Version", "reservation 1.0")
		h.Set("Vary", "OpenStack-API-Version")
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler { // a list cut short (writeList)
					panic(p)
				}
				s.Logger.Error("panic serving request", "request_id", reqID, "panic", p)
				s.writeError(rec, r, &climate.Error{Code: climate.CodeInternal, Err: fmt.Errorf("panic: %v", p)})
			}
			d := time.Since(start)
			s.Logger.Info("request", "request_id", reqID, "method", r.Method, "path", r.URL.Path,
				"status", rec.status, "duration", d)
			if s.Observe != nil {
				s.Observe(r.Pattern, r.Method, rec.status, d) // the mux set r.Pattern
			}
		}()
		if err := checkMicroversion(r.Header.Get("OpenStack-API-Version")); err != nil {
			s.writeErrorStatus(rec, r, err.status, err.msg)
			return
		}
		if err := s.CrossOrigin.Check(r); err != nil {
			// A web page in the operator's browser must not act with the browser's access.
			s.writeError(rec, r, climate.Errorf(climate.CodeForbidden, "Cross-origin request refused (Origin %q): a web page on another site cannot change Climate's state", r.Header.Get("Origin")))
			return
		}
		if r.Body != nil && r.ContentLength != 0 && r.Method != http.MethodGet && r.Method != http.MethodHead {
			// Required, not only checked when present: a cross-site form or fetch can send
			// a body without preflight only as text/plain, form data or no type at all.
			ct := r.Header.Get("Content-Type")
			if ct == "" {
				s.writeError(rec, r, climate.Errorf(climate.CodeInvalid, "A request body needs the header Content-Type: application/json"))
				return
			}
			if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
				s.writeError(rec, r, climate.Errorf(climate.CodeInvalid, "Content-Type %q is not supported: send application/json", ct))
				return
			}
		}
		r.Body = http.MaxBytesReader(rec, r.Body, MaxBodyBytes)
		r = r.WithContext(climate.WithRequestID(r.Context(), reqID)) // the audit trail records it
		if uncleanPath(r.URL.Path) {
			// ServeMux would redirect these with an HTML body; answer in the API's shape.
			s.writeError(rec, r, climate.Errorf(climate.CodeNotFound, "The resource %s could not be found.", r.URL.Path))
			return
		}
		if strings.HasSuffix(r.URL.Path, ".json") {
			r.URL.Path = strings.TrimSuffix(r.URL.Path, ".json")
			r.URL.RawPath = ""
		}
		next.ServeHTTP(rec, r)
	})
}

// uncleanPath reports paths with empty, "." or ".." segments.
func uncleanPath(p string) bool {
	return strings.Contains(p, "//") || strings.Contains(p, "/./") || strings.Contains(p, "/../") ||
		strings.HasSuffix(p, "/.") || strings.HasSuffix(p, "/..")
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

// Unwrap lets http.ResponseController reach the connection (deadlines, flushing).
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

type versionError struct {
	status int
	msg    string
}

// checkMicroversion validates an OpenStack-API-Version header; only 1.0 exists.
func checkMicroversion(header string) *versionError {
	for _, part := range strings.Split(header, ",") {
		fields := strings.Fields(part)
		if len(fields) == 0 || !strings.EqualFold(fields[0], "reservation") {
			continue
		}
		if len(fields) != 2 {
			return &versionError{http.StatusBadRequest, fmt.Sprintf("Invalid OpenStack-API-Version header %q", header)}
		}
		v := fields[1]
		if v == "latest" || v == "1.0" {
			return nil
		}
		if !microversionPattern.MatchString(v) {
			return &versionError{http.StatusBadRequest, fmt.Sprintf("Version string %q is not valid", v)}
		}
		return &versionError{http.StatusNotAcceptable, fmt.Sprintf("Version %s is not supported by the API. Minimum is 1.0 and maximum is 1.0.", v)}
	}
	return nil
}

// versions serves the version document with 300 Multiple Choices, as Blazar does.
func (s *Server) versions(v1Only bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			s.writeErrorStatus(w, r, http.StatusMethodNotAllowed, fmt.Sprintf("Method %s is not allowed on %s.", r.Method, r.URL.Path))
			return
		}
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		base := scheme + "://" + r.Host
		v := []map[string]any{{
			"id": "v1.0", "status": "CURRENT", "min_version": "1.0", "max_version": "1.0",
			"links": []map[string]string{{"href": base + "/v1", "rel": "self"}},
		}}
		// Climate's build beside Blazar's document, for clients that want to know which
		// server they talk to (climate version); Blazar's clients read "versions" only.
		writeJSON(w, http.StatusMultipleChoices, map[string]any{"versions": v, "climate": buildinfo.Get()})
	})
}

// statusOf maps error codes to HTTP statuses: the one table for the whole API.
var statusOf = map[climate.Code]int{
	climate.CodeInvalid:      http.StatusBadRequest,
	climate.CodeUnauthorized: http.StatusUnauthorized,
	climate.CodeForbidden:    http.StatusForbidden,
	climate.CodeNotFound:     http.StatusNotFound,
	climate.CodeConflict:     http.StatusConflict,
	climate.CodeTooLarge:     http.StatusRequestEntityTooLarge,
	climate.CodeInternal:     http.StatusInternalServerError,
	climate.CodeUnavailable:  http.StatusServiceUnavailable,
}

// errorNames replaces Blazar's numeric error_name with readable names.
var errorNames = map[int]string{
	http.StatusBadRequest:            "BAD_REQUEST",
	http.StatusUnauthorized:          "UNAUTHORIZED",
	http.StatusForbidden:             "FORBIDDEN",
	http.StatusNotFound:              "NOT_FOUND",
	http.StatusMethodNotAllowed:      "METHOD_NOT_ALLOWED",
	http.StatusNotAcceptable:         "NOT_ACCEPTABLE",
	http.StatusConflict:              "CONFLICT",
	http.StatusRequestEntityTooLarge: "REQUEST_ENTITY_TOO_LARGE",
	http.StatusInternalServerError:   "INTERNAL_SERVER_ERROR",
	http.StatusServiceUnavailable:    "SERVICE_UNAVAILABLE",
}

func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	code := climate.ErrorCode(err)
	if code == climate.CodeInternal {
		s.Logger.Error("internal error", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	status := statusOf[code]
	if status == 0 {
		status = http.StatusInternalServerError
	}
	s.writeErrorStatus(w, r, status, climate.ErrorMessage(err))
}

func (s *Server) writeErrorStatus(w http.ResponseWriter, r *http.Request, status int, msg string) {
	if status == http.StatusUnauthorized {
		challenge := `Keystone uri="unused", X-Auth-Token`
		if c, ok := s.Auth.(Challenger); ok {
			challenge = c.Challenge()
		}
		w.Header().Set("WWW-Authenticate", challenge)
	}
	writeJSON(w, status, map[string]any{"error_code": status, "error_message": msg, "error_name": errorNames[status]})
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	if status == http.StatusNoContent {
		w.WriteHeader(status)
		return
	}
	b, err := json.Marshal(body)
	if err != nil {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(`{"error_code": 500, "error_message": "Internal Server Error", "error_name": "INTERNAL_SERVER_ERROR"}`))
		return
	}
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// readObject reads a request body that must be a JSON object; an empty body is {}.
func readObject(r *http.Request) (object, error) {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, climate.Errorf(climate.CodeTooLarge, "Request body is larger than %d bytes", MaxBodyBytes)
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, climate.Errorf(climate.CodeInvalid, "Request body not received in time: send it at once after the headers")
		}
		return nil, climate.Errorf(climate.CodeInvalid, "Cannot read request body: %v", err)
	}
	if len(strings.TrimSpace(string(data))) == 0 {
		return object{}, nil
	}
	var o object
	if err := json.Unmarshal(data, &o); err != nil || o == nil {
		msg := "the body must be a JSON object"
		var syntax *json.SyntaxError
		if errors.As(err, &syntax) {
			msg = fmt.Sprintf("invalid JSON at byte %d: %v", syntax.Offset, syntax)
		}
		return nil, climate.Errorf(climate.CodeInvalid, "Malformed request body: %s", msg)
	}
	return o, nil
}
