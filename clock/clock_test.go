package clock

import (
	"testing"
	"time"
)

func TestFakeTimersFireWhenTimePasses(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	f := NewFake(t0)
	armed := f.TimerCreated()
	late := f.NewTimer(2 * time.Hour)
	early := f.NewTimer(time.Hour)
	stopped := f.NewTimer(30 * time.Minute)
	select {
	case <-armed:
	default:
		t.Fatal("TimerCreated was not signalled")
	}
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop must report true once, then false")
	}
	f.Advance(90 * time.Minute)
	select {
	case at := <-early.C():
		if !at.Equal(t0.Add(90 * time.Minute)) {
			t.Fatalf("fired with %s", at)
		}
	default:
		t.Fatal("the 1h timer did not fire at 1h30")
	}
	select {
	case <-late.C():
		t.Fatal("the 2h timer fired at 1h30")
	case <-stopped.C():
		t.Fatal("a stopped timer fired")
	default:
	}
	f.Set(t0) // never backwards
	if !f.Now().Equal(t0.Add(90 * time.Minute)) {
		t.Fatal("Set moved the clock backwards")
	}
	if immediate := f.NewTimer(0); len(immediate.C()) != 1 {
		t.Fatal("a zero-duration timer fires at once")
	}
}
