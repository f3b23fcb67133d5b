package postgres

import (
	"sync"
	"testing"
	"time"
)

func TestTryLead(t *testing.T) {
	dsn := TestDSN(t)
	a, b := open(t, dsn), open(t, dsn) // two replicas
	lead := func(s *Store, holder string, ttl time.Duration, want bool) {
		t.Helper()
		if got, err := s.TryLead(ctx, "maintenance", holder, ttl); err != nil || got != want {
			t.Fatalf("TryLead(%s, %v): %v, %v; want %v", holder, ttl, got, err, want)
		}
	}
	lead(a, "a", time.Minute, true)
	lead(b, "b", time.Minute, false)
	lead(a, "a", time.Minute, true) // renewal
	lead(b, "b", time.Minute, false)
	if ok, err := b.TryLead(ctx, "other-role", "b", time.Minute); err != nil || !ok {
		t.Errorf("TryLead of another name: %v, %v; want b to lead it", ok, err)
	}

	// a renews for a moment only, then stops renewing (it died): b takes over once that
	// expires, by the database's clock.
	lead(a, "a", time.Millisecond, true)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, err := b.TryLead(ctx, "maintenance", "b", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("b never took over after a's lead expired")
		}
	}
	lead(a, "a", time.Minute, false)

	// Resigning hands over at once.
	if err := b.Resign(ctx, "maintenance", "a"); err != nil { // not a's to give
		t.Fatal(err)
	}
	lead(a, "a", time.Minute, false)
	if err := b.Resign(ctx, "maintenance", "b"); err != nil {
		t.Fatal(err)
	}
	lead(a, "a", time.Minute, true)

	if _, err := a.TryLead(ctx, "maintenance", "a", 0); err == nil {
		t.Error("TryLead with ttl 0: no error")
	}
}

// Replicas racing for a free role: exactly one wins.
func TestTryLeadRace(t *testing.T) {
	s := open(t, TestDSN(t))
	const n = 8
	won := make([]bool, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	ready := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-ready
			won[i], errs[i] = s.TryLead(ctx, "maintenance", string(rune('a'+i)), time.Minute)
		}()
	}
	close(ready)
	wg.Wait()
	leaders := 0
	for i := range n {
		if errs[i] != nil {
			t.Errorf("holder %d: %v", i, errs[i])
		}
		if won[i] {
			leaders++
		}
	}
	if leaders != 1 {
		t.Errorf("%d leaders; want 1", leaders)
	}
}

// A Lead renews only once a third of its ttl has passed, and asks again after a refusal
// only once a tenth has: until then Try answers from memory, and the database's row (its
// expiry) is left as it was.
func TestLeadRenewsEveryThirdOfItsTTL(t *testing.T) {
	dsn := TestDSN(t)
	a, b := open(t, dsn), open(t, dsn)
	now := time.Now()
	l := a.NewLead("deliver", "a", time.Minute)
	l.now = func() time.Time { return now }
	expiry := func() (e time.Time) {
		t.Helper()
		if err := a.pool.QueryRow(ctx, `SELECT expires_at FROM leaders WHERE name = 'deliver'`).Scan(&e); err != nil {
			t.Fatal(err)
		}
		return e
	}
	try := func(what string, want bool) {
		t.Helper()
		if got, err := l.Try(ctx); err != nil || got != want {
			t.Fatalf("%s: Try = %v, %v; want %v", what, got, err, want)
		}
	}
	try("first", true)
	first := expiry()
	now = now.Add(20*time.Second - time.Microsecond)
	try("just under a third of the ttl later", true)
	if e := expiry(); !e.Equal(first) {
		t.Errorf("expiry moved from %s to %s before a third of the ttl passed", first, e)
	}
	now = now.Add(time.Microsecond)
	try("a third of the ttl later", true)
	if e := expiry(); !e.After(first) {
		t.Errorf("expiry %s not renewed past %s after a third of the ttl", e, first)
	}

	// Another holder's lead is asked of the database every time until it is had.
	if err := a.Resign(ctx, "deliver", "a"); err != nil {
		t.Fatal(err)
	}
	if ok, err := b.TryLead(ctx, "deliver", "b", time.Minute); err != nil || !ok {
		t.Fatalf("b's TryLead after a resigned: %v, %v", ok, err)
	}
	now = now.Add(20 * time.Second)
	try("after b took over", false)

	// Told no, a holder asks again only a tenth of the ttl later: b resigning is noticed
	// then, not before.
	if err := b.Resign(ctx, "deliver", "b"); err != nil {
		t.Fatal(err)
	}
	now = now.Add(6*time.Second - time.Microsecond)
	try("just under a tenth of the ttl after the refusal", false)
	now = now.Add(time.Microsecond)
	try("a tenth of the ttl after the refusal", true)
}
