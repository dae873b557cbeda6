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
//
// A sender that may be held back waits for room first (WaitRoom), as a
// host's TCP waits when its packets fill the queue below it (Linux's TCP
// Small Queues), instead of losing what it sends to a full input.
type Loop[T any] struct {
	clk Clock
	in  chan T
	ctl chan func()

	// queued counts the arrivals in the input: Offer adds, the loop's
	// goroutine takes away as it takes them (atomics, so that a waiter
	// and the goroutine see each other's changes in one order; see
	// WaitRoom). high and low are WaitRoom's marks. waiters counts the
	// senders in WaitRoom, woken through room (roomMu) once the input
	// is down to low or the loop stopped; waits counts the waits.
	queued    atomic.Int64
	high, low int64
	waiters   atomic.Int32
	roomMu    sync.Mutex
	room      sync.Cond
	stopped   atomic.Bool // the goroutine ended: nothing takes the input
	waits     atomic.Uint64

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
	l := &Loop[T]{clk: clk, in: make(chan T, n), ctl: make(chan func()), done: make(chan struct{})}
	l.high = int64(n - n/4)
	l.low = l.high / 2
	l.room.L = &l.roomMu
	return l
}

// Cap returns how many arrivals the input holds.
func (l *Loop[T]) Cap() int { return cap(l.in) }

// Full reports whether the input holds as many arrivals as it can: an
// Offer now would fail.
func (l *Loop[T]) Full() bool { return len(l.in) == cap(l.in) }

// Offer hands v to the loop without blocking, also before Start (it waits
// in the input). It reports false when the input is full, or when the
// loop is closed or its goroutine has stopped, so that nothing would
// take v (closed true); v is then the caller's to drop.
func (l *Loop[T]) Offer(v T) (ok, closed bool) {
	if l.closed.Load() || l.stopped.Load() {
		return false, true
	}
	l.queued.Add(1)
	select {
	case l.in <- v:
		return true, false
	default:
		l.queued.Add(-1)
		return false, false
	}
}

// WaitRoom is for a sender that may be held back: one that nothing the
// loop waits for waits for (see impair.Packet.SetMayWait). When the
// input holds three quarters of what it can, it blocks until the loop has
// taken it down to half that, so that the sender's next Offers find room
// and a burst leaves it in one go rather than a packet per wake-up. The
// last quarter is left to senders that may not wait, which still drop
// what a full input refuses. It returns at once on a loop whose goroutine
// has stopped or that is closed (the Offer then fails). It allocates
// nothing.
func (l *Loop[T]) WaitRoom() {
	if l.queued.Load() < l.high {
		return
	}
	l.waits.Add(1)
	l.roomMu.Lock()
	// Once waiters counts this sender, the goroutine's next look at it
	// (after taking an arrival) either finds it or came before the load
	// of queued below, which then sees what it took: no wake-up is
	// missed, and the broadcast needs roomMu, which Wait gives up only
	// once it listens.
	l.waiters.Add(1)
	for l.queued.Load() > l.low && !l.stopped.Load() && !l.closed.Load() {
		l.room.Wait()
	}
	l.waiters.Add(-1)
	l.roomMu.Unlock()
}

// Waits returns how many times a sender found the input full to its
// share and waited (WaitRoom).
func (l *Loop[T]) Waits() uint64 { return l.waits.Load() }

// took counts an arrival taken out of the input, and wakes the waiting
// senders once it is down to the low mark.
func (l *Loop[T]) took() {
	if l.queued.Add(-1) <= l.low && l.waiters.Load() > 0 {
		l.wake()
	}
}

// wake wakes every sender in WaitRoom to look again.
func (l *Loop[T]) wake() {
	l.roomMu.Lock()
	l.room.Broadcast()
	l.roomMu.Unlock()
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
	arrive := m.Arrive
	m.Arrive = func(v T) {
		l.took()
		arrive(v)
	}
	go func() {
		defer close(l.done)
		Drive(ctx, l.clk, m)
		l.stop()
	}()
}

// stop marks the goroutine ended. Nothing takes the input any more: a
// sender waiting for room would wait until Close, and hold up whoever
// waits for it (gVisor's endpoint lock) meanwhile, so it is let go.
func (l *Loop[T]) stop() {
	l.stopped.Store(true)
	l.wake()
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
		l.wake()
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
