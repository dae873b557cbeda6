package clock

import (
	"bytes"
	"container/heap"
	"context"
	"runtime"
	"runtime/metrics"
	"sync"
	"time"
)

// Virtual is a clock on which time passes only when nothing else can
// happen: Run fires the earliest timer, waits until every goroutine of the
// process is blocked again, and fires the next. A run on a Virtual clock
// takes as long as its work, not as long as its duration, and since only
// one timer fires at a time, with everything it sets off finished before
// the next, the order of events does not depend on the goroutine
// scheduler: the same seed gives the same run.
//
// What "blocked" means is read from the runtime (see quiet), so it is the
// whole process that must be idle: every goroutine that does the run's
// work must wait on this clock, on channels or on locks, never on the wall
// clock or the network, or time skips over that work. Goroutines blocked
// on the wall clock or on I/O count as idle: a control API may change the
// run at any time, and the change takes effect at the virtual instant it
// lands on.
//
// Its zero time is Epoch.
type Virtual struct {
	mu     sync.Mutex // guards now, timers and seq
	now    time.Time
	timers vtimers
	seq    uint64 // orders timers of the same deadline by when they were set

	// Work statistics for the closing numbers of a run.
	steps, slowChecks uint64 // guarded by mu
}

// NewVirtual returns a Virtual clock set to Epoch.
func NewVirtual() *Virtual { return &Virtual{now: Epoch} }

// Now returns the clock's current time.
func (v *Virtual) Now() time.Time {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.now
}

// NewTimer returns a timer that sends on its channel when Run reaches its
// deadline.
func (v *Virtual) NewTimer(d time.Duration) Timer {
	t := &vtimer{v: v, i: -1, c: make(chan time.Time, 1)}
	t.Reset(d)
	return t
}

// AfterFunc returns a timer that calls f in its own goroutine when Run
// reaches its deadline; Run waits for f (and whatever f sets off) to finish
// before it moves on.
func (v *Virtual) AfterFunc(d time.Duration, f func()) Timer {
	t := &vtimer{v: v, i: -1, f: f}
	t.Reset(d)
	return t
}

// Stats reports how many timers Run has fired and how many times it had to
// stop the world to tell whether the process was idle (see quiet).
func (v *Virtual) Stats() (steps, slowChecks uint64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.steps, v.slowChecks
}

// idlePoll is how long Run sleeps, on the wall clock, when no timer is
// armed and the process is idle: only something outside the run (a
// control request, a signal) can give it work then.
const idlePoll = time.Millisecond

// Run moves time forward until ctx is done: each time the process is
// idle, it sets the clock to the earliest deadline and fires that one
// timer. Timers of the same deadline fire in the order they were set.
// Run must be called from one goroutine only.
func (v *Virtual) Run(ctx context.Context) {
	var q quietness
	for ctx.Err() == nil {
		if !q.wait(ctx, &v.mu, &v.slowChecks) {
			return
		}
		v.mu.Lock()
		if len(v.timers) == 0 {
			v.mu.Unlock()
			time.Sleep(idlePoll)
			continue
		}
		t := heap.Pop(&v.timers).(*vtimer)
		if t.when.After(v.now) {
			v.now = t.when
		}
		v.steps++
		v.mu.Unlock()
		if t.f != nil {
			go t.f()
			continue
		}
		select {
		case t.c <- t.when:
		default: // a firing is already pending; like time.Timer, never block
		}
	}
}

type vtimer struct {
	v    *Virtual
	c    chan time.Time // nil for AfterFunc timers
	f    func()         // nil for channel timers
	when time.Time      // guarded by v.mu
	seq  uint64         // guarded by v.mu
	i    int            // index in v.timers, -1 when not armed; guarded by v.mu
}

func (t *vtimer) C() <-chan time.Time { return t.c }

func (t *vtimer) Reset(d time.Duration) {
	v := t.v
	v.mu.Lock()
	defer v.mu.Unlock()
	t.drain()
	if t.i >= 0 {
		heap.Remove(&v.timers, t.i)
	}
	t.when = v.now.Add(max(d, 0))
	v.seq++
	t.seq = v.seq
	heap.Push(&v.timers, t)
}

func (t *vtimer) Stop() bool {
	v := t.v
	v.mu.Lock()
	defer v.mu.Unlock()
	t.drain()
	if t.i < 0 {
		return false
	}
	heap.Remove(&v.timers, t.i)
	return true
}

// drain discards a pending firing, as time.Timer does since Go 1.23.
func (t *vtimer) drain() {
	if t.c == nil {
		return
	}
	select {
	case <-t.c:
	default:
	}
}

// vtimers is a heap of armed timers by deadline, then by seq.
type vtimers []*vtimer

func (h vtimers) Len() int { return len(h) }
func (h vtimers) Less(i, j int) bool {
	if !h[i].when.Equal(h[j].when) {
		return h[i].when.Before(h[j].when)
	}
	return h[i].seq < h[j].seq
}
func (h vtimers) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].i, h[j].i = i, j
}
func (h *vtimers) Push(x any) {
	t := x.(*vtimer)
	t.i = len(*h)
	*h = append(*h, t)
}
func (h *vtimers) Pop() any {
	old := *h
	t := old[len(old)-1]
	*h, t.i = old[:len(old)-1], -1
	return t
}

// quietness tells when every goroutine but the caller is blocked.
//
// The fast way reads the runtime's goroutine counts (runtime/metrics,
// Go 1.26): idle when none is runnable and only the caller runs, three
// readings in a row with a yield between them. Those counts are
// approximate, and measured on gVisor's TCP they sometimes stay one too
// high for seconds with every other goroutine parked (gVisor parks its
// processors through its own linkname to runtime.gopark). So after
// slowAfter busy readings in a row the slow way decides: a stack dump of
// every goroutine, which stops the world and shows each one's real state.
//
// Go's testing/synctest would be the natural tool, but its bubbles do not
// count gVisor's parked goroutines as durably blocked, so a bubble with a
// gVisor stack never advances (see docs/virtual-time.md).
type quietness struct {
	samples [2]metrics.Sample
	buf     []byte
}

// slowAfter is how many busy readings (about half a microsecond each) the
// fast way takes before a stack dump decides.
const slowAfter = 2000

// wait returns when the process is idle (true) or ctx is done (false).
func (q *quietness) wait(ctx context.Context, mu *sync.Mutex, slow *uint64) bool {
	if q.samples[0].Name == "" {
		q.samples[0].Name = "/sched/goroutines/runnable:goroutines"
		q.samples[1].Name = "/sched/goroutines/running:goroutines"
	}
	ok, busy := 0, 0
	for ok < 3 {
		metrics.Read(q.samples[:])
		if q.samples[0].Value.Uint64() == 0 && q.samples[1].Value.Uint64() <= 1 {
			ok++
		} else {
			ok, busy = 0, busy+1
			if busy%slowAfter == 0 {
				if ctx.Err() != nil {
					return false
				}
				mu.Lock()
				*slow++
				mu.Unlock()
				if q.stacksIdle() {
					return true
				}
			}
		}
		runtime.Gosched()
	}
	return true
}

// stacksIdle reports whether no goroutine but the caller is running or
// runnable, from a dump of every goroutine's stack. Goroutines in system
// calls count as idle, as in the fast way: they wait on the outside world.
func (q *quietness) stacksIdle() bool {
	if q.buf == nil {
		q.buf = make([]byte, 1<<20)
	}
	var n int
	for {
		n = runtime.Stack(q.buf, true)
		if n < len(q.buf) {
			break
		}
		q.buf = make([]byte, 2*len(q.buf))
	}
	b := q.buf[:n]
	first := true // the dump starts with the caller
	for {
		k := bytes.Index(b, []byte("goroutine "))
		if k < 0 {
			return true
		}
		b = b[k:]
		e := bytes.IndexByte(b, '\n')
		if e < 0 {
			e = len(b)
		}
		header := b[:e]
		b = b[e:]
		if first {
			first = false
			continue
		}
		if bytes.Contains(header, []byte("[running")) || bytes.Contains(header, []byte("[runnable")) {
			return false
		}
	}
}

// WithTimeout is context.WithTimeout on clk's time: ctx is cancelled d
// from clk's now, with context.DeadlineExceeded as its cause. On the Real
// clock it is context.WithTimeout itself.
func WithTimeout(ctx context.Context, clk Clock, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := clk.(Real); ok {
		return context.WithTimeout(ctx, d)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	t := clk.AfterFunc(d, func() { cancel(context.DeadlineExceeded) })
	return ctx, func() {
		t.Stop()
		cancel(context.Canceled)
	}
}
