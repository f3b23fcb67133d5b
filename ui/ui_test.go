package ui

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func get(t *testing.T, h http.Handler, method, path string, header map[string]string) *http.Response {
	t.Helper()
	r := httptest.NewRequest(method, path, nil)
	for k, v := range header {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Result()
}

func TestAssetsHaveTypesPolicyAndCaching(t *testing.T) {
	h := Handler()
	for _, tc := range []struct{ path, ctype, contains string }{
		{"/ui/", "text/html; charset=utf-8", `<script src="calendar.js" defer></script>`},
		{"/ui/index.html", "text/html; charset=utf-8", "Climate calendar"},
		{"/ui/calendar.js", "text/javascript; charset=utf-8", "'use strict'"},
		{"/ui/calendar.css", "text/css; charset=utf-8", "#scroller"},
	} {
		resp := get(t, h, "GET", tc.path, nil)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != tc.ctype || !strings.Contains(string(body), tc.contains) {
			t.Errorf("%s: %d %q, body has %q: %v", tc.path, resp.StatusCode, resp.Header.Get("Content-Type"), tc.contains, strings.Contains(string(body), tc.contains))
		}
		if resp.Header.Get("Content-Security-Policy") != ContentSecurityPolicy || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: security headers %v", tc.path, resp.Header)
		}
		etag := resp.Header.Get("ETag")
		if resp.Header.Get("Cache-Control") != "no-cache" || etag == "" {
			t.Errorf("%s: Cache-Control %q, ETag %q", tc.path, resp.Header.Get("Cache-Control"), etag)
		}
		if again := get(t, h, "GET", tc.path, map[string]string{"If-None-Match": etag}); again.StatusCode != http.StatusNotModified {
			t.Errorf("%s with If-None-Match: %d, want 304", tc.path, again.StatusCode)
		}
	}
	if resp := get(t, h, "GET", "/ui/nothing.js", nil); resp.StatusCode != 404 {
		t.Errorf("unknown asset: %d", resp.StatusCode)
	}
	if resp := get(t, h, "POST", "/ui/", nil); resp.StatusCode != 405 || resp.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST: %d, Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
	}
}

// The policy forbids inline script and style: the page must not need them.
func TestPageHasNoInlineScriptOrStyle(t *testing.T) {
	page, err := static.ReadFile("static/index.html")
	if err != nil {
		t.Fatal(err)
	}
	for _, tag := range regexp.MustCompile(`(?i)<script[^>]*>`).FindAll(page, -1) {
		if !strings.Contains(string(tag), ` src="`) {
			t.Errorf("index.html has an inline script: %s", tag)
		}
	}
	for _, bad := range []*regexp.Regexp{
		regexp.MustCompile(`<script(?:\s[^>]*)?>\s*[^<\s]`), // a script with a body
		regexp.MustCompile(`(?i)\sstyle=`),
		regexp.MustCompile(`(?i)<style`),
		regexp.MustCompile(`(?i)\son[a-z]+=`),
	} {
		if m := bad.Find(page); m != nil {
			t.Errorf("index.html has %q", m)
		}
	}
}
