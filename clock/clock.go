// Package clock is the time source of a netjam run.
//
// Every component that schedules packets (impair, wifi, flows, and the gVisor
// stacks through an adapter in package stack) takes a Clock instead of calling
// package time, so that a run uses one notion of "now" and tests can drive the
// whole packet path with a Manual clock, exactly and without sleeping.
package clock

import (
	"sync"
	"time"
)

// Clock tells the time and makes timers.
type Clock interface {
	// Now returns the current time. It is monotonic: it never goes back.
	Now() time.Time
	// NewTimer returns a timer that fires once, d from now.
	NewTimer(d time.Duration) Timer
	// AfterFunc calls f in its own goroutine d from now, unless the
	// returned timer is stopped first. Its C is nil.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a one-shot timer, reusable with Reset, as time.Timer.
type Timer interface {
	// C is the channel the timer sends its firing time on. It has a buffer
	// of one and the timer never blocks on it.
	C() <-chan time.Time
	// Reset makes the timer fire d from now, discarding a pending firing.
	Reset(d time.Duration)
	// Stop prevents the timer from firing; it reports whether it was armed.
	Stop() bool
}

// Real is the wall clock, backed by package time.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// NewTimer returns a time.Timer.
func (Real) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

// AfterFunc returns a time.AfterFunc timer.
func (Real) AfterFunc(d time.Duration, f func()) Timer { return realTimer{time.AfterFunc(d, f)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }

// Reset relies on Go 1.23 timer semantics: Reset on an unfired or fired
// timer discards any value not yet received, so no stale tick is seen.
func (r realTimer) Reset(d time.Duration) { r.t.Reset(d) }
func (r realTimer) Stop() bool            { return r.t.Stop() }

// Manual is a clock that moves only when told to. Its zero time is Epoch.
// It is safe for concurrent use.
type Manual struct {
	mu     sync.Mutex // guards now and timers
	now    time.Time
	timers []*manualTimer
}

// Epoch is the time a new Manual clock starts at. Any fixed instant would do;
// a round one makes test failures easy to read.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// NewManual returns a Manual clock set to Epoch.
func NewManual() *Manual { return &Manual{now: Epoch} }

// Now returns the clock's current time.
func (m *Manual) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now
}

// Since returns the time elapsed since Epoch; handy in test messages.
func (m *Manual) Since() time.Duration { return m.Now().Sub(Epoch) }

// Advance moves the clock forward by d and fires every timer whose deadline
// has been reached, in deadline order.
func (m *Manual) Advance(d time.Duration) { m.Set(m.Now().Add(d)) }

// Set moves the clock to t (never backwards) and fires due timers.
func (m *Manual) Set(t time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t.After(m.now) {
		m.now = t
	}
	for {
		var due *manualTimer
		for _, mt := range m.timers {
			if mt.armed && !mt.when.After(m.now) && (due == nil || mt.when.Before(due.when)) {
				due = mt
			}
		}
		if due == nil {
			return
		}
		due.armed = false
		if due.f != nil {
			go due.f()
			continue
		}
		select {
		case due.c <- due.when:
		default: // a firing is already pending; like time.Timer, never block
		}
	}
}

// NewTimer returns a timer driven by Advance and Set.
func (m *Manual) NewTimer(d time.Duration) Timer {
	mt := &manualTimer{m: m, c: make(chan time.Time, 1)}
	m.mu.Lock()
	m.timers = append(m.timers, mt)
	m.mu.Unlock()
	mt.Reset(d)
	return mt
}

// Next returns the earliest deadline of an armed timer, if any. Tests use it
// to step a simulation from event to event.
func (m *Manual) Next() (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var t time.Time
	ok := false
	for _, mt := range m.timers {
		if mt.armed && (!ok || mt.when.Before(t)) {
			t, ok = mt.when, true
		}
	}
	return t, ok
}

// Armed returns how many timers are armed. Tests wait for the goroutines
// they drive to arm theirs before they move the clock: a timer armed
// after a move counts its duration from the new time.
func (m *Manual) Armed() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, mt := range m.timers {
		if mt.armed {
			n++
		}
	}
	return n
}

// AfterFunc returns a timer that calls f in a new goroutine when Advance
// or Set reaches its deadline.
func (m *Manual) AfterFunc(d time.Duration, f func()) Timer {
	mt := &manualTimer{m: m, f: f}
	m.mu.Lock()
	m.timers = append(m.timers, mt)
	m.mu.Unlock()
	mt.Reset(d)
	return mt
}

type manualTimer struct {
	m     *Manual
	c     chan time.Time // nil for AfterFunc timers
	f     func()         // nil for channel timers
	when  time.Time      // guarded by m.mu
	armed bool           // guarded by m.mu
}

func (t *manualTimer) C() <-chan time.Time { return t.c }

func (t *manualTimer) Reset(d time.Duration) {
	t.m.mu.Lock()
	t.drain()
	t.when = t.m.now.Add(d)
	t.armed = true
	fire := d <= 0
	t.m.mu.Unlock()
	if fire {
		t.m.Set(t.m.Now())
	}
}

func (t *manualTimer) Stop() bool {
	t.m.mu.Lock()
	defer t.m.mu.Unlock()
	was := t.armed
	t.armed = false
	t.drain()
	return was
}

func (t *manualTimer) drain() { drain(t.c) }

// drain discards a pending firing on c, as time.Timer does since Go 1.23;
// c is nil for AfterFunc timers.
func drain(c chan time.Time) {
	if c == nil {
		return
	}
	select {
	case <-c:
	default:
	}
}
