package clock

import (
	"testing"
	"time"
)

func TestManualTimersFireInOrderAtTheirDeadline(t *testing.T) {
	m := NewManual()
	a := m.NewTimer(30 * time.Millisecond)
	b := m.NewTimer(10 * time.Millisecond)
	m.Advance(5 * time.Millisecond)
	select {
	case <-b.C():
		t.Fatal("fired early")
	default:
	}
	m.Advance(10 * time.Millisecond)
	if got := <-b.C(); !got.Equal(Epoch.Add(10 * time.Millisecond)) {
		t.Fatalf("b fired with %v", got)
	}
	if next, ok := m.Next(); !ok || !next.Equal(Epoch.Add(30*time.Millisecond)) {
		t.Fatalf("next %v %v", next, ok)
	}
	if !a.Stop() || a.Stop() {
		t.Fatal("Stop must report armed once")
	}
	m.Advance(time.Second)
	select {
	case <-a.C():
		t.Fatal("stopped timer fired")
	default:
	}
	a.Reset(time.Millisecond)
	m.Advance(time.Millisecond)
	<-a.C()
}

func TestManualResetDiscardsPendingFiring(t *testing.T) {
	m := NewManual()
	tm := m.NewTimer(time.Millisecond)
	m.Advance(time.Millisecond) // fires, value pending in C
	tm.Reset(time.Hour)
	select {
	case <-tm.C():
		t.Fatal("stale firing seen after Reset")
	default:
	}
}

func TestManualAfterFunc(t *testing.T) {
	m := NewManual()
	done := make(chan struct{})
	m.AfterFunc(time.Second, func() { close(done) })
	m.Advance(999 * time.Millisecond)
	select {
	case <-done:
		t.Fatal("ran early")
	default:
	}
	m.Advance(time.Millisecond)
	<-done
}

func TestRealClock(t *testing.T) {
	var c Clock = Real{}
	tm := c.NewTimer(time.Millisecond)
	<-tm.C()
	done := make(chan struct{})
	c.AfterFunc(time.Millisecond, func() { close(done) })
	<-done
}
