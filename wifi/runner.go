package wifi

import (
	"context"
	"strconv"
	"time"

	"github.com/netjam/netjam/clock"
	"github.com/netjam/netjam/impair"
)

// Runner runs a Medium in real time, as impair.Runner runs a Chain: it owns
// the one goroutine that drives the medium (a clock.Loop), fed by a
// bounded channel and woken by a single reusable timer at the medium's
// next event. Nothing is started per frame.
//
// Lifecycle: NewRunner allocates; Start launches the goroutine; Close stops
// it, waits for it, then drops what is still queued (DropFlushed). Close is
// idempotent. Send may be called from any goroutine at any time, also
// before Start (packets wait in the channel) and after Close (they are
// dropped).
type Runner struct {
	m    *Medium
	clk  clock.Clock
	loop *clock.Loop[arrival]

	// background: some stations are saturated, so the medium has events
	// even with no packet queued; the goroutine then wakes every refresh
	// to keep the statistics current.
	background bool
}

// arrival is a packet in the input channel, with its arrival time.
type arrival struct {
	p        *impair.Packet
	t        time.Time
	station  int32
	downlink bool
}

// refresh is how often saturated background stations are simulated when no
// packet is queued (they deliver nothing, so only the statistics would
// lag).
const refresh = 10 * time.Millisecond

// NewRunner builds a Runner for cfg on clk. up and down are called on the
// Runner's goroutine with each delivered packet, as for NewMedium; they
// own the packet and must not block for long: the whole cell waits for
// them.
func NewRunner(cfg Config, clk clock.Clock, up, down func(now time.Time, p *impair.Packet, station int)) (*Runner, error) {
	m, err := NewMedium(cfg, up, down)
	if err != nil {
		return nil, err
	}
	r := &Runner{m: m, clk: clk, loop: clock.NewLoop[arrival](clk, m.p.inputLimit)}
	for _, s := range cfg.Stations {
		r.background = r.background || s.Saturate > 0
	}
	return r, nil
}

// Send hands p to the cell at the clock's time: uplink from station to the
// AP, or downlink from the AP to station. When the input channel is full,
// or the Runner is closed, p is dropped and counted (DropInput,
// DropFlushed) against the sending contender. It reports whether p was
// accepted; either way the caller no longer owns p. It panics if station
// is out of range. It blocks only for a p that may wait, as
// impair.Runner.Send does (and clears its mark).
func (r *Runner) Send(p *impair.Packet, station int, downlink bool) bool {
	n := len(r.m.sta) - 1
	if station < 0 || station >= n {
		panic("wifi: Send for station " + strconv.Itoa(station) + " of " + strconv.Itoa(n))
	}
	if p.MayWait() {
		p.SetMayWait(false)
		r.loop.WaitRoom()
	}
	a := arrival{p: p, t: r.clk.Now(), station: int32(station), downlink: downlink}
	ok, closed := r.loop.Offer(a)
	if !ok {
		reason := DropInput
		if closed {
			reason = DropFlushed
		}
		r.drop(a, reason)
	}
	return ok
}

// drop counts a as dropped for reason against its sender, and releases
// its packet.
func (r *Runner) drop(a arrival, reason DropReason) {
	c := &r.m.c[a.station]
	if a.downlink {
		c = &r.m.c[len(r.m.c)-1]
	}
	c.drops[reason].Add(1)
	a.p.Release()
}

// Start launches the Runner's goroutine. It stops when ctx is done or Close
// is called.
func (r *Runner) Start(ctx context.Context) {
	m := clock.Model[arrival]{
		Arrive: func(a arrival) {
			r.m.wall = r.clk.Now()
			r.m.Arrive(a.t, a.p, int(a.station), a.downlink)
		},
		Advance: func(now time.Time) (time.Time, bool) {
			r.m.wall = now
			r.m.Advance(now)
			return r.m.Next()
		},
	}
	if r.background {
		m.Refresh = refresh
	}
	r.loop.Start(ctx, m)
}

// Close stops the goroutine, waits for it, and drops every packet still
// queued or in the input channel. It is safe to call more than once, and
// without Start.
func (r *Runner) Close() {
	r.loop.Close(r.m.Flush, func(a arrival) { r.drop(a, DropFlushed) })
}

// Stats returns the cell's counters; safe at any time.
func (r *Runner) Stats() Stats { return r.m.Stats() }

// Medium returns the medium the Runner drives. Its Stats and Drops may be
// read; nothing else may be called while the Runner runs.
func (r *Runner) Medium() *Medium { return r.m }
