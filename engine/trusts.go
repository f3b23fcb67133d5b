package engine

import (
	"context"
	"fmt"

	"climate"
)

// WithTrusts wraps a lease's actions (inner, nil for none) so that each event runs with
// a token from the lease's trust (climate.TrustToken), as Blazar's plugins act with the
// owner's delegated roles. A lease whose trust is gone or unusable fails its start with
// an error that says so; its before-end and end still run (without a token), so that an
// ending lease always releases what it holds.
func WithTrusts(inner Actions, trusts climate.Trusts) Actions {
	return trustActions{inner, trusts}
}

type trustActions struct {
	inner  Actions
	trusts climate.Trusts
}

// withToken returns ctx with a token from l's trust, if it has one.
func (a trustActions) withToken(ctx context.Context, l *climate.Lease) (context.Context, error) {
	if l.TrustID == "" {
		return ctx, nil
	}
	token, err := a.trusts.Token(ctx, l.TrustID)
	if err != nil {
		return ctx, fmt.Errorf("lease %s cannot act for its owner: its trust %s is gone or unusable: %w", l.ID, l.TrustID, err)
	}
	return climate.WithTrustToken(ctx, token), nil
}

func (a trustActions) OnStart(ctx context.Context, l *climate.Lease) error {
	ctx, err := a.withToken(ctx, l)
	if err != nil {
		return err
	}
	if a.inner == nil {
		return nil
	}
	return a.inner.OnStart(ctx, l)
}

func (a trustActions) OnEnd(ctx context.Context, l *climate.Lease) error {
	return a.run(ctx, l, Actions.OnEnd)
}

func (a trustActions) BeforeEnd(ctx context.Context, l *climate.Lease) error {
	return a.run(ctx, l, Actions.BeforeEnd)
}

// run runs an event that must happen even without a token.
func (a trustActions) run(ctx context.Context, l *climate.Lease, act func(Actions, context.Context, *climate.Lease) error) error {
	if a.inner == nil {
		return nil
	}
	if withToken, err := a.withToken(ctx, l); err == nil {
		ctx = withToken
	}
	return act(a.inner, ctx, l)
}
