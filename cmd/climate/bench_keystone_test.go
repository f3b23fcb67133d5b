package main

import (
	"io"
	"net/http"
	"testing"
	"time"

	climatehttp "climate/http"
	"climate/keystone"
)

// BenchmarkKeystoneAuth measures what --auth keystone adds to a request against the real
// Keystone of keystone_test.go: GET /v1/leases/<unknown id> (404 after authentication,
// the cheapest authenticated route) without authentication, with a token whose validation
// is cached, and with the cache off (--keystone-cache-ttl 0: one Keystone round trip per
// request), plus the authenticator alone on a cached token. keystone-req/1k-calls counts
// the HTTP requests that reached Keystone per 1,000 API calls.
//
//	go test -run '^$' -bench KeystoneAuth -benchtime 1000x ./cmd/climate
func BenchmarkKeystoneAuth(b *testing.B) {
	k := needKeystone(b)
	demo := k.token(b, "demo", "demopass", "demo")
	get := func(b *testing.B, url string, header map[string]string) {
		req, _ := http.NewRequest("GET", url, nil)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 404 {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
	const path = "/v1/leases/00000000-0000-0000-0000-000000000000"

	b.Run("noauth", func(b *testing.B) {
		s := startServer(b, serveOptions{})
		for b.Loop() {
			get(b, s.url+path, nil)
		}
	})
	run := func(name string, ttl time.Duration) {
		b.Run(name, func(b *testing.B) {
			o := keystoneServe(k)
			o.keystone.cacheTTL = ttl
			var client *keystone.Client
			o.keystone.connected = func(c *keystone.Client, _ *climatehttp.Keystone) { client = c }
			s := startServer(b, o)
			get(b, s.url+path, authTok(demo)) // validated (and cached, with a TTL) once
			before := client.Requests()
			calls := 0
			for b.Loop() {
				get(b, s.url+path, authTok(demo))
				calls++
			}
			b.ReportMetric(float64(client.Requests()-before)*1000/float64(calls), "keystone-req/1k-calls")
		})
	}
	run("keystone-cached", climatehttp.DefaultKeystoneCacheTTL)
	run("keystone-uncached", 0)

	b.Run("authenticate-cached", func(b *testing.B) {
		o := keystoneServe(k)
		var auth *climatehttp.Keystone
		o.keystone.connected = func(_ *keystone.Client, a *climatehttp.Keystone) { auth = a }
		startServer(b, o)
		req, _ := http.NewRequest("GET", "http://127.0.0.1"+path, nil)
		req.Header.Set("X-Auth-Token", demo)
		if _, err := auth.Authenticate(req); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := auth.Authenticate(req); err != nil {
				b.Fatal(err)
			}
		}
	})

	// Calls by 50 users in turn (50 tokens): one validation per token, however many calls.
	b.Run("keystone-50-users", func(b *testing.B) {
		o := keystoneServe(k)
		var client *keystone.Client
		o.keystone.connected = func(c *keystone.Client, _ *climatehttp.Keystone) { client = c }
		s := startServer(b, o)
		tokens := make([]string, 50)
		for i := range tokens {
			tokens[i] = k.token(b, "demo", "demopass", "demo") // a new token each: a new user to the cache
		}
		before := client.Requests()
		calls := 0
		for b.Loop() {
			get(b, s.url+path, authTok(tokens[calls%len(tokens)]))
			calls++
		}
		b.ReportMetric(float64(client.Requests()-before)*1000/float64(calls), "keystone-req/1k-calls")
		b.Logf("%d calls, %d Keystone requests", calls, client.Requests()-before)
	})
}
