package stream_test

import (
	"context"
	"errors"
	"testing"

	"climate"
	"climate/notify/stream"
	"climate/policy"
)

// The hub checks blazar:leases:get with its Config.Policy: on the caller's own project,
// and on the watched lease's project and user.
func TestWatchPolicy(t *testing.T) {
	pol, _, err := policy.New(map[string]any{"blazar:leases:get": "rule:admin or (rule:project_member_api and user_id:%(user_id)s)"})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, stream.Config{Policy: pol})
	ctx := context.Background()
	forbidden := func(who climate.Identity, q climate.NotificationQuery) {
		t.Helper()
		var ce *climate.Error
		_, err := f.hub.WatchNotifications(ctx, who, q)
		if !errors.As(err, &ce) || ce.Code != climate.CodeForbidden || ce.Message != "Policy doesn't allow blazar:leases:get to be performed." {
			t.Errorf("%s %+v: %v, want Blazar's refusal", who.UserID, q, err)
		}
	}
	forbidden(rita, climate.NotificationQuery{})                  // readers no longer watch
	forbidden(alice, climate.NotificationQuery{LeaseID: f.p1.ID}) // p1 is user u's
	f.watch(alice, climate.NotificationQuery{})
	f.watch(admin, climate.NotificationQuery{LeaseID: f.p1.ID})
}
