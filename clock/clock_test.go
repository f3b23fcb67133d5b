package clock

import (
	"testing"
	"time"
)

func TestFakeTimersFireWhenTimePasses(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	f := NewFake(t0)
	armed := f.TimerAt(t0.Add(time.Hour))
	late := f.NewTimer(2 * time.Hour)
	select {
	case <-armed:
		t.Fatal("TimerAt(1h) was signalled by a timer for 2h")
	default:
	}
	early := f.NewTimer(time.Hour)
	stopped := f.NewTimer(30 * time.Minute)
	for name, c := range map[string]<-chan struct{}{"armed later": armed, "already pending": f.TimerAt(t0.Add(2 * time.Hour))} {
		select {
		case <-c:
		default:
			t.Fatalf("TimerAt, %s, was not signalled", name)
		}
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
