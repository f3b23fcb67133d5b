package engine

import (
	"context"
	"errors"
	"strings"
	"testing"

	"climate"
)

type tokenTrusts map[string]string // trust id → token; missing: gone

func (t tokenTrusts) Create(context.Context, climate.Identity) (string, error) { return "", nil }
func (t tokenTrusts) Delete(context.Context, string) error                     { return nil }
func (t tokenTrusts) Token(_ context.Context, id string) (string, error) {
	if tok, ok := t[id]; ok {
		return tok, nil
	}
	return "", errors.New("Keystone refused to get a token from trust " + id + ": 404 trust not found")
}

// seenTokens records the trust token each action ran with.
type seenTokens []string

func (s *seenTokens) record(ctx context.Context) error {
	*s = append(*s, climate.TrustToken(ctx))
	return nil
}
func (s *seenTokens) OnStart(ctx context.Context, _ *climate.Lease) error   { return s.record(ctx) }
func (s *seenTokens) OnEnd(ctx context.Context, _ *climate.Lease) error     { return s.record(ctx) }
func (s *seenTokens) BeforeEnd(ctx context.Context, _ *climate.Lease) error { return s.record(ctx) }

// Actions run with their lease's trust token; a lease whose trust is gone fails its
// start with a message that says so, yet still ends.
func TestWithTrusts(t *testing.T) {
	var seen seenTokens
	acts := WithTrusts(&seen, tokenTrusts{"t1": "tok-1"})
	ctx := context.Background()
	ok := &climate.Lease{ID: "l1", TrustID: "t1"}
	if err := acts.OnStart(ctx, ok); err != nil || len(seen) != 1 || seen[0] != "tok-1" {
		t.Fatalf("start with a trust: %v, tokens %v", err, seen)
	}
	gone := &climate.Lease{ID: "l2", TrustID: "t2"}
	err := acts.OnStart(ctx, gone)
	if err == nil || !strings.Contains(err.Error(), "its trust t2 is gone or unusable") || len(seen) != 1 {
		t.Fatalf("start with a deleted trust: %v (actions ran %d times)", err, len(seen))
	}
	if err := acts.OnEnd(ctx, gone); err != nil || len(seen) != 2 || seen[1] != "" {
		t.Fatalf("end with a deleted trust: %v, tokens %v", err, seen)
	}
	if err := acts.OnStart(ctx, &climate.Lease{ID: "l3"}); err != nil || seen[2] != "" {
		t.Fatalf("a lease without a trust: %v, tokens %v", err, seen)
	}
	if err := WithTrusts(nil, tokenTrusts{}).OnStart(ctx, gone); err == nil {
		t.Fatal("without actions, a gone trust still fails the start")
	}
}
