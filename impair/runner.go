package impair

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/netjam/netjam/clock"
)

// Runner runs one direction in real time: it owns the one goroutine that
// drives a Chain, fed by a bounded channel and woken by a single reusable
// timer at the chain's next event. Nothing is started per packet.
//
// Lifecycle: NewRunner allocates; Start launches the goroutine; Close stops
// it, waits for it, then drops what is still in flight (DropFlushed). Close
// is idempotent. Send may be called from any goroutine at any time, also
// before Start (packets wait in the channel) and after Close (they are
// dropped).
type Runner struct {
	chain *Chain
	clk   clock.Clock
	in    chan *Packet

	ctl chan func() // Set's changes, run on the goroutine

	mu      sync.Mutex // orders Start and Set
	started bool
	closed  atomic.Bool
	cancel  context.CancelFunc
	done    chan struct{}
	once    sync.Once
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
	return &Runner{chain: c, clk: clk, in: make(chan *Packet, n), ctl: make(chan func()), done: make(chan struct{})}, nil
}

// KeepsSegments reports whether GSO packets cross the direction whole; a
// sender splits them (Pool.Split) before Send when not, so that the
// split runs on its goroutine rather than the direction's.
func (r *Runner) KeepsSegments() bool { return r.chain.keep.Load() }

// Send hands p to the direction, stamped with the clock's time. It never
// blocks: when the input channel is full, or the Runner is closed, p is
// dropped and counted (DropInput, DropFlushed). It reports whether p was
// accepted; either way the caller no longer owns p.
func (r *Runner) Send(p *Packet) bool {
	if r.closed.Load() {
		r.chain.io.in(p)
		r.chain.io.drop(p, DropFlushed)
		return false
	}
	p.Arrival = r.clk.Now()
	select {
	case r.in <- p:
		return true
	default:
		r.chain.io.in(p)
		r.chain.io.drop(p, DropInput)
		return false
	}
}

// Start launches the Runner's goroutine. It stops when ctx is done or Close
// is called.
func (r *Runner) Start(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ctx, r.cancel = context.WithCancel(ctx)
	r.started = true
	go r.loop(ctx)
}

// ErrClosed is Set's error on a closed Runner.
var ErrClosed = errors.New("impair: direction closed")

// Set changes the direction to cfg between two packets, keeping what it
// holds (see Chain.Set for what changes how, and what cannot change), and
// returns once the change is made. It may be called from any goroutine,
// before Start or while the Runner runs. The input limit cannot change.
func (r *Runner) Set(cfg Config) error {
	if n := cfg.InputLimit; n != 0 && n != cap(r.in) || n == 0 && cap(r.in) != DefaultInputLimit {
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
	r.mu.Lock()
	if !r.started {
		defer r.mu.Unlock()
		if r.closed.Load() {
			return ErrClosed
		}
		return f(false)
	}
	r.mu.Unlock()
	res := make(chan error, 1)
	select {
	case r.ctl <- func() { res <- f(true) }:
		return <-res
	case <-r.done:
		return ErrClosed
	}
}

// Close stops the goroutine, waits for it, and drops every packet still in
// flight or in the input channel. It is safe to call more than once, and
// without Start.
func (r *Runner) Close() {
	r.once.Do(func() {
		r.closed.Store(true)
		if r.cancel != nil {
			r.cancel()
			<-r.done
		}
		r.chain.Flush()
		for {
			select {
			case p := <-r.in:
				r.chain.io.in(p)
				r.chain.io.drop(p, DropFlushed)
			default:
				return
			}
		}
	})
}

// Stats returns the direction's counters; safe at any time.
func (r *Runner) Stats() Stats { return r.chain.Stats() }

// Chain returns the chain the Runner drives. Its Stats and Stages may be
// read; nothing else may be called while the Runner runs.
func (r *Runner) Chain() *Chain { return r.chain }

func (r *Runner) loop(ctx context.Context) {
	defer close(r.done)
	clock.Drive(ctx, r.clk, clock.Model[*Packet]{
		In:      r.in,
		Control: r.ctl,
		Arrive: func(p *Packet) {
			r.chain.wall = r.clk.Now()
			r.chain.Arrive(p.Arrival, p)
		},
		Advance: func(now time.Time) (time.Time, bool) {
			r.chain.wall = now
			r.chain.Advance(now)
			return r.chain.Next()
		},
	})
}
