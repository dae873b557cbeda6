package clock

import (
	"context"
	"time"
)

// Model is a discrete-event model driven in real time by Drive: packets
// arrive through a channel, and the model has events (departures,
// deliveries) at times it names.
type Model[T any] struct {
	// In carries the arrivals.
	In <-chan T
	// Arrive takes one arrival, on Drive's goroutine.
	Arrive func(T)
	// Advance runs the model up to now and returns its next event, if it
	// has one.
	Advance func(now time.Time) (next time.Time, ok bool)
	// Control, when not nil, carries functions to run on Drive's goroutine
	// between two events: changes to the model while it runs.
	Control <-chan func()
	// Refresh, when not zero, wakes Drive at least this often while the
	// model has no event, for a model that simulates something of its
	// own (saturated stations) whose statistics would otherwise lag.
	Refresh time.Duration
}

// pinThread, unpinThread and takeSlot are pinPrecise, unpinPrecise and
// preciseSlot, apart for tests.
var (
	pinThread   = pinPrecise
	unpinThread = unpinPrecise
	takeSlot    = preciseSlot
)

// slotLinger is how long a precise Drive keeps its extra processor
// (preciseSlot) after it last slept precisely: giving it back and taking
// it again each stop the world (GOMAXPROCS), so a model that goes idle
// between events a few milliseconds apart keeps it. A variable for tests.
var slotLinger = 100 * time.Millisecond

// DriveBatch bounds how many queued arrivals Drive takes before it lets
// due events go, so that a flood of input cannot starve the output.
const DriveBatch = 64

// Slack is how close together a precise Drive runs events as one: when
// the next event is less than Slack away, it sleeps Slack and then runs
// everything due, each at most Slack late, instead of waking for every
// event. At 10 Gbit/s, 1500-byte packets leave 1.2 us apart, and a
// nanosleep per packet cost more CPU than the packets' own work (measured:
// TCP out of a 10 Gbit/s path 2.6-2.7 Gbit/s without, 2.9-3.0 with).
// Linux's fq qdisc makes the same trade with its timer_slack, 10 us by
// default. Events further apart than Slack are run on time.
const Slack = 10 * time.Microsecond

// Drive runs m on the calling goroutine until ctx is done: it advances the
// model to the clock's time, sleeps until its next event or an arrival,
// and again. One reusable timer serves every wait; nothing is started per
// packet.
//
// With the Real clock, the last stretch before an event (Coarse) is slept
// with PreciseSleep on a thread of its own (pinned only while it sleeps
// so, with a processor more for everything else: see preciseSleeper),
// so that events
// happen within the kernel's wake-up latency of their time instead of up
// to a millisecond late (Slack late when events come closer together than
// that); arrivals
// meanwhile wait at most that long in the channel and keep the arrival
// times stamped on them. Any other clock (Manual) is simply waited on.
// The wake-up latency is the machine's: a few microseconds on bare
// metal, more in a virtual machine (on the 2-core one the project's CI
// uses, a nanosleep of 10 us returned after about 65 us and cost 23 us
// of CPU; the links' lateness_ms shows it, p50 about 0.04 ms).
func Drive[T any](ctx context.Context, clk Clock, m Model[T]) {
	d := &driver[T]{clk: clk, m: m, timer: clk.NewTimer(time.Hour)}
	d.timer.Stop()
	if _, d.precise = clk.(Real); d.precise {
		d.ps = newPreciseSleeper(clk)
		defer d.ps.close()
	}
	defer d.timer.Stop()
	for d.runDue(ctx) && d.wait(ctx) {
		// until ctx ends
	}
}

// driver is one Drive of a model: its clock, its one timer, and the
// precise sleeper of a Real clock's (nil otherwise).
type driver[T any] struct {
	clk     Clock
	m       Model[T]
	precise bool
	ps      *preciseSleeper
	timer   Timer
	armed   bool      // the timer is set,
	armedAt time.Time // for this time
}

// runDue runs the model up to now, and, with a precise clock, the events
// that fall due within Coarse, until its next event is further away (the
// timer is then set for it) or it has none. It returns false when ctx
// ended meanwhile.
func (d *driver[T]) runDue(ctx context.Context) bool {
	for {
		now := d.clk.Now()
		t, ok := d.m.Advance(now)
		if !ok {
			d.noEvent(now)
			return true
		}
		until := t.Sub(now)
		if !d.precise || until > Coarse {
			d.armFor(now, t)
			return true
		}
		d.ps.sleep(max(until, Slack))
		d.drain()
		// A model with events always due (a Wi-Fi cell with full
		// queues) never leaves this loop: look at ctx here too, or
		// Drive runs until the model is idle.
		select {
		case <-ctx.Done():
			return false
		case f := <-d.m.Control:
			f()
		default:
		}
	}
}

// noEvent sets the timer of a model without an event: its Refresh from
// now, else none.
func (d *driver[T]) noEvent(now time.Time) {
	switch {
	case d.m.Refresh > 0:
		d.arm(now, now.Add(d.m.Refresh))
	case d.armed:
		d.timer.Stop()
		d.armed = false
	}
}

// armFor sets the timer for the event at t: at t, or with a precise clock
// Coarse before it, the rest slept precisely.
func (d *driver[T]) armFor(now, t time.Time) {
	if d.precise {
		t = t.Add(-Coarse)
	}
	d.arm(now, t)
}

// arm sets the timer to fire at wake, unless it is set for wake already.
func (d *driver[T]) arm(now, wake time.Time) {
	if !d.armed || !wake.Equal(d.armedAt) {
		d.timer.Reset(wake.Sub(now))
		d.armed, d.armedAt = true, wake
	}
}

// drain takes the arrivals queued, at most DriveBatch of them.
func (d *driver[T]) drain() {
	for range DriveBatch {
		select {
		case a := <-d.m.In:
			d.m.Arrive(a)
		default:
			return
		}
	}
}

// wait waits for the timer, an arrival, a change or the end of the
// precise sleeper's linger, and takes it; it returns false when ctx ended
// instead.
func (d *driver[T]) wait(ctx context.Context) bool {
	d.ps.idle() // any thread may wake it now (see pinPrecise)
	select {
	case <-ctx.Done():
		return false
	case a := <-d.m.In:
		d.m.Arrive(a)
		d.drain()
	case <-d.timer.C():
		d.armed = false
	case <-d.ps.lingered():
		d.ps.giveSlot()
	case f := <-d.m.Control:
		f()
	}
	return true
}

// preciseSleeper is a precise Drive's hold on its thread and its extra
// processor: while it sleeps precisely, the goroutine is pinned to its
// thread (pinPrecise) and holds the processor (preciseSlot), which it
// keeps for slotLinger after; idle, or waiting for events further apart
// than Coarse, it waits as any goroutine does. Its methods do nothing on
// a nil preciseSleeper (any clock but Real).
type preciseSleeper struct {
	pinned bool
	give   func() // the slot's, while held
	linger Timer
}

func newPreciseSleeper(clk Clock) *preciseSleeper {
	p := &preciseSleeper{linger: clk.NewTimer(time.Hour)}
	p.linger.Stop()
	return p
}

// sleep sleeps d precisely, pinned and with the slot.
func (p *preciseSleeper) sleep(d time.Duration) {
	if !p.pinned {
		if p.give == nil {
			p.give = takeSlot()
		}
		p.linger.Stop()
		pinThread()
		p.pinned = true
	}
	PreciseSleep(d)
}

// idle unpins before a wait, and starts the slot's linger.
func (p *preciseSleeper) idle() {
	if p != nil && p.pinned {
		unpinThread()
		p.pinned = false
		p.linger.Reset(slotLinger)
	}
}

// lingered fires when the slot has lingered long enough after the last
// precise sleep; nil (never) on a nil preciseSleeper.
func (p *preciseSleeper) lingered() <-chan time.Time {
	if p == nil {
		return nil
	}
	return p.linger.C()
}

// giveSlot gives the slot back, if held.
func (p *preciseSleeper) giveSlot() {
	if p.give != nil {
		p.give()
		p.give = nil
	}
}

func (p *preciseSleeper) close() {
	p.linger.Stop()
	if p.pinned {
		unpinThread()
	}
	p.giveSlot()
}
