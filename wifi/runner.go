package wifi

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/netjam/netjam/clock"
	"github.com/netjam/netjam/impair"
)

// Runner runs a Medium in real time, as impair.Runner runs a Chain: it owns
// the one goroutine that drives the medium, fed by a bounded channel and
// woken by a single reusable timer at the medium's next event. Nothing is
// started per frame.
//
// Lifecycle: NewRunner allocates; Start launches the goroutine; Close stops
// it, waits for it, then drops what is still queued (DropFlushed). Close is
// idempotent. Send may be called from any goroutine at any time, also
// before Start (packets wait in the channel) and after Close (they are
// dropped).
type Runner struct {
	m   *Medium
	clk clock.Clock
	in  chan arrival

	// background: some stations are saturated, so the medium has events
	// even with no packet queued; the goroutine then wakes every refresh
	// to keep the statistics current.
	background bool

	closed atomic.Bool
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// arrival is a packet in the input channel, with its arrival time.
type arrival struct {
	p        *impair.Packet
	t        time.Time
	station  int32
	downlink bool
}

// Timing of the Runner's goroutine.
const (
	// batch bounds how many queued arrivals the goroutine takes before it
	// lets due deliveries go, so a flood of input cannot starve the output.
	batch = 64
	// refresh is how often saturated background stations are simulated
	// when no packet is queued (they deliver nothing, so only the
	// statistics would lag).
	refresh = 10 * time.Millisecond
)

// NewRunner builds a Runner for cfg on clk. up and down are called on the
// Runner's goroutine with each delivered packet, as for NewMedium; they
// own the packet and must not block for long: the whole cell waits for
// them.
func NewRunner(cfg Config, clk clock.Clock, up, down func(now time.Time, p *impair.Packet, station int)) (*Runner, error) {
	m, err := NewMedium(cfg, up, down)
	if err != nil {
		return nil, err
	}
	r := &Runner{m: m, clk: clk, in: make(chan arrival, m.p.inputLimit), done: make(chan struct{})}
	for _, s := range cfg.Stations {
		r.background = r.background || s.Saturate > 0
	}
	return r, nil
}

// Send hands p to the cell at the clock's time: uplink from station to the
// AP, or downlink from the AP to station. It never blocks: when the input
// channel is full, or the Runner is closed, p is dropped and counted
// (DropInput, DropFlushed) against the sending contender. It reports
// whether p was accepted; either way the caller no longer owns p. It
// panics if station is out of range.
func (r *Runner) Send(p *impair.Packet, station int, downlink bool) bool {
	n := len(r.m.sta) - 1
	if station < 0 || station >= n {
		panic("wifi: Send for station " + strconv.Itoa(station) + " of " + strconv.Itoa(n))
	}
	c := &r.m.c[station]
	if downlink {
		c = &r.m.c[n]
	}
	if r.closed.Load() {
		c.drops[DropFlushed].Add(1)
		p.Release()
		return false
	}
	select {
	case r.in <- arrival{p: p, t: r.clk.Now(), station: int32(station), downlink: downlink}:
		return true
	default:
		c.drops[DropInput].Add(1)
		p.Release()
		return false
	}
}

// Start launches the Runner's goroutine. It stops when ctx is done or Close
// is called.
func (r *Runner) Start(ctx context.Context) {
	ctx, r.cancel = context.WithCancel(ctx)
	go r.loop(ctx)
}

// Close stops the goroutine, waits for it, and drops every packet still
// queued or in the input channel. It is safe to call more than once, and
// without Start.
func (r *Runner) Close() {
	r.once.Do(func() {
		r.closed.Store(true)
		if r.cancel != nil {
			r.cancel()
			<-r.done
		}
		r.m.Flush()
		for {
			select {
			case a := <-r.in:
				c := &r.m.c[a.station]
				if a.downlink {
					c = &r.m.c[len(r.m.c)-1]
				}
				c.drops[DropFlushed].Add(1)
				a.p.Release()
			default:
				return
			}
		}
	})
}

// Stats returns the cell's counters; safe at any time.
func (r *Runner) Stats() Stats { return r.m.Stats() }

// Medium returns the medium the Runner drives. Its Stats and Drops may be
// read; nothing else may be called while the Runner runs.
func (r *Runner) Medium() *Medium { return r.m }

func (r *Runner) loop(ctx context.Context) {
	defer close(r.done)
	// With the real clock, the last stretch before an event is slept with
	// nanosleep on a thread of our own, so that packets leave within
	// microseconds of their delivery time instead of up to a millisecond
	// late (see sleep_linux.go). A manual clock needs none of that.
	_, precise := r.clk.(clock.Real)
	if precise {
		defer clock.PreciseThread()()
	}
	timer := r.clk.NewTimer(time.Hour)
	timer.Stop()
	var armedAt time.Time
	armed := false
	r.advance() // the medium's time starts now
	for {
		// Run the medium up to now, then sleep until its next event.
		for {
			now := r.advance()
			t, ok := r.m.Next()
			if !ok && !r.background {
				if armed {
					timer.Stop()
					armed = false
				}
				break
			}
			if !ok {
				// Only background frames: no delivery is due, precision
				// does not matter.
				if wake := now.Add(refresh); !armed || !wake.Equal(armedAt) {
					timer.Reset(refresh)
					armed, armedAt = true, wake
				}
				break
			}
			d := t.Sub(now)
			if precise && d <= clock.Coarse {
				// Close enough to sleep through: arrivals meanwhile wait
				// at most this long in the channel, keeping their
				// arrival times.
				clock.PreciseSleep(d)
				r.drain()
				continue
			}
			wake := t
			if precise {
				wake = t.Add(-clock.Coarse) // then sleep the rest precisely
			}
			if !armed || !wake.Equal(armedAt) {
				timer.Reset(wake.Sub(now))
				armed, armedAt = true, wake
			}
			break
		}
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case a := <-r.in:
			r.arrive(a)
			r.drain()
		case <-timer.C():
			armed = false
		}
	}
}

// advance runs the medium up to the clock's time and returns that time.
func (r *Runner) advance() time.Time {
	now := r.clk.Now()
	r.m.wall = now
	r.m.Advance(now)
	return now
}

// drain takes up to a batch of queued arrivals without blocking.
func (r *Runner) drain() {
	for range batch {
		select {
		case a := <-r.in:
			r.arrive(a)
		default:
			return
		}
	}
}

func (r *Runner) arrive(a arrival) {
	r.m.wall = r.clk.Now()
	r.m.Arrive(a.t, a.p, int(a.station), a.downlink)
}
