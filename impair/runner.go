package impair

import (
	"context"
	"errors"
	"time"

	"github.com/netjam/netjam/clock"
)

// Runner runs one direction in real time: it owns the one goroutine that
// drives a Chain (a clock.Loop), fed by a bounded channel and woken by a
// single reusable timer at the chain's next event. Nothing is started per
// packet.
//
// Lifecycle: NewRunner allocates; Start launches the goroutine; Close stops
// it, waits for it, then drops what is still in flight (DropFlushed). Close
// is idempotent. Send may be called from any goroutine at any time, also
// before Start (packets wait in the channel) and after Close (they are
// dropped).
type Runner struct {
	chain *Chain
	clk   clock.Clock
	loop  *clock.Loop[*Packet]
	// passed, when set, runs after each pass (AfterPass).
	passed func()
}

// NewRunner builds a Runner for cfg on clk. deliver is called on the
// Runner's goroutine with each packet leaving the direction and its logical
// departure time; it owns the packet and must not block for long: the whole
// direction waits for it.
func NewRunner(cfg Config, clk clock.Clock, deliver func(now time.Time, p *Packet)) (*Runner, error) {
	c, err := NewChain(cfg, deliver)
	if err != nil {
		return nil, err
	}
	n := cfg.InputLimit
	if n == 0 {
		n = DefaultInputLimit
	}
	return &Runner{chain: c, clk: clk, loop: clock.NewLoop[*Packet](clk, n)}, nil
}

// TakesSegments reports whether GSO packets enter the direction whole
// (Config.TakesSegments); a sender splits them (Pool.Split) before Send
// when not, so that the split runs on its goroutine rather than the
// direction's.
func (r *Runner) TakesSegments() bool { return r.chain.keep.Load() }

// Loses reports whether the direction drops or spoils packets by chance
// (Config.Loses); cheap and safe on any goroutine.
func (r *Runner) Loses() bool { return r.chain.Loses() }

// Send hands p to the direction, stamped with the clock's time. When the
// input channel is full, or the Runner is closed, p is dropped and counted
// (DropInput, DropFlushed). It reports whether p was accepted; either way
// the caller no longer owns p.
//
// Send blocks only for a p that may wait (Packet.MayWait, which it
// clears): while the input is three quarters full it waits until the
// Runner has taken it down to half that (clock.Loop.WaitRoom), so that a
// sender faster than the direction is held back instead of losing
// packets, as a Linux host's TCP is by the queue below it (TCP Small
// Queues); p's arrival time is stamped after the wait. Any other packet
// (a direction's or a device's, a host's that may not wait) never waits.
func (r *Runner) Send(p *Packet) bool {
	if p.mayWait {
		p.mayWait = false
		r.loop.WaitRoom()
	}
	p.Arrival = r.clk.Now()
	ok, closed := r.loop.Offer(p)
	if !ok {
		r.chain.io.in(p)
		reason := DropInput
		if closed {
			reason = DropFlushed
		}
		r.chain.io.drop(p, reason)
	}
	return ok
}

// Full reports whether the direction's input is full: a Send now would
// drop (DropInput). A sender that can drop before doing any work on a
// packet asks first.
func (r *Runner) Full() bool { return r.loop.Full() }

// Start launches the Runner's goroutine. It stops when ctx is done or Close
// is called.
func (r *Runner) Start(ctx context.Context) {
	r.loop.Start(ctx, clock.Model[*Packet]{
		Arrive: func(p *Packet) {
			r.chain.wall = r.clk.Now()
			r.chain.Arrive(p.Arrival, p)
		},
		Advance: func(now time.Time) (time.Time, bool) {
			r.chain.wall = now
			r.chain.Advance(now)
			if r.passed != nil {
				r.passed()
			}
			return r.chain.Next()
		},
	})
}

// AfterPass makes f run on the Runner's goroutine at the end of each
// pass: once every packet due by the clock's time has left, before the
// Runner sleeps. Packets that leave in one pass leave at the same moment
// of real time (within clock.Slack), so a node behind that holds what
// it is handed until f (a queue merging segments for a device) delays
// none of them past the pass. Every delivery, also those of an arrival
// or of Set, is followed by a pass before the Runner sleeps, and Close
// runs f once more after the goroutine stopped. Call it before Start; f
// must not block.
func (r *Runner) AfterPass(f func()) { r.passed = f }

// ErrClosed is Set's error on a closed Runner.
var ErrClosed = errors.New("impair: direction closed")

// Set changes the direction to cfg between two packets, keeping what it
// holds (see Chain.Set for what changes how, and what cannot change), and
// returns once the change is made. It may be called from any goroutine,
// before Start or while the Runner runs. The input limit cannot change.
func (r *Runner) Set(cfg Config) error {
	if n := cfg.InputLimit; n != 0 && n != r.loop.Cap() || n == 0 && r.loop.Cap() != DefaultInputLimit {
		return errors.New("impair: the input limit cannot change while the direction runs")
	}
	return r.onLoop(func(running bool) error {
		if running {
			// What is due before now leaves under the settings it met.
			r.chain.wall = r.clk.Now()
			r.chain.Advance(r.clk.Now())
		}
		return r.chain.Set(cfg)
	})
}

// onLoop runs f where the chain may be touched, and returns its error: on
// the Runner's goroutine while it runs (running true), on the caller's
// before Start; ErrClosed once the Runner is closed.
func (r *Runner) onLoop(f func(running bool) error) error {
	err := r.loop.Do(f)
	if errors.Is(err, clock.ErrStopped) {
		return ErrClosed
	}
	return err
}

// Close stops the goroutine, waits for it, and drops every packet still in
// flight or in the input channel. It is safe to call more than once, and
// without Start.
func (r *Runner) Close() {
	r.loop.Close(r.chain.Flush, func(p *Packet) {
		r.chain.io.in(p)
		r.chain.io.drop(p, DropFlushed)
	})
	if r.passed != nil {
		r.passed() // a pass that stopped between a delivery and its end
	}
}

// Stats returns the direction's counters; safe at any time.
func (r *Runner) Stats() Stats {
	s := r.chain.Stats()
	s.InputWaits = r.loop.Waits()
	return s
}

// Chain returns the chain the Runner drives. Its Stats and Stages may be
// read; nothing else may be called while the Runner runs.
func (r *Runner) Chain() *Chain { return r.chain }
