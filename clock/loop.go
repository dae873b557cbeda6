package clock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
)

// Loop is the one goroutine that drives a Model in real time (Drive), with
// the lifecycle every runner shares (impair.Runner drives a direction,
// wifi.Runner a cell): NewLoop allocates the bounded input; Start launches
// the goroutine; Offer hands it an arrival without ever blocking; Do runs a
// change on it between two events; Close stops it, waits for it and hands
// back what was still in the input. Close is idempotent and may come
// without Start.
type Loop[T any] struct {
	clk Clock
	in  chan T
	ctl chan func()

	mu      sync.Mutex // orders Start and Do
	started bool
	closed  atomic.Bool
	cancel  context.CancelFunc
	done    chan struct{}
	once    sync.Once
}

// ErrStopped is Do's error once the Loop is closed.
var ErrStopped = errors.New("clock: loop stopped")

// NewLoop returns a loop on clk whose input holds n arrivals.
func NewLoop[T any](clk Clock, n int) *Loop[T] {
	return &Loop[T]{clk: clk, in: make(chan T, n), ctl: make(chan func()), done: make(chan struct{})}
}

// Cap returns how many arrivals the input holds.
func (l *Loop[T]) Cap() int { return cap(l.in) }

// Full reports whether the input holds as many arrivals as it can: an
// Offer now would fail.
func (l *Loop[T]) Full() bool { return len(l.in) == cap(l.in) }

// Offer hands v to the loop without blocking, also before Start (it waits
// in the input). It reports false when the input is full, or when the
// loop is closed (closed true); v is then the caller's to drop.
func (l *Loop[T]) Offer(v T) (ok, closed bool) {
	if l.closed.Load() {
		return false, true
	}
	select {
	case l.in <- v:
		return true, false
	default:
		return false, false
	}
}

// Start launches the goroutine: Drive(ctx, clk, m) with the loop's input
// and changes as m's In and Control. It stops when ctx is done or Close is
// called.
func (l *Loop[T]) Start(ctx context.Context, m Model[T]) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ctx, l.cancel = context.WithCancel(ctx)
	l.started = true
	m.In, m.Control = l.in, l.ctl
	go func() {
		defer close(l.done)
		Drive(ctx, l.clk, m)
	}()
}

// Do runs f where the model may be touched, and returns its error: on the
// loop's goroutine between two events while it runs (running true), on
// the caller's before Start; ErrStopped once the loop is closed.
func (l *Loop[T]) Do(f func(running bool) error) error {
	l.mu.Lock()
	if !l.started {
		defer l.mu.Unlock()
		if l.closed.Load() {
			return ErrStopped
		}
		return f(false)
	}
	l.mu.Unlock()
	res := make(chan error, 1)
	select {
	case l.ctl <- func() { res <- f(true) }:
		return <-res
	case <-l.done:
		return ErrStopped
	}
}

// Close stops the goroutine and waits for it, then calls flush (the model
// drops what it holds) and drop with each arrival still in the input. Safe
// to call more than once, and without Start.
func (l *Loop[T]) Close(flush func(), drop func(T)) {
	l.once.Do(func() {
		l.closed.Store(true)
		l.mu.Lock()
		cancel := l.cancel
		l.mu.Unlock()
		if cancel != nil {
			cancel()
			<-l.done
		}
		flush()
		for {
			select {
			case v := <-l.in:
				drop(v)
			default:
				return
			}
		}
	})
}
