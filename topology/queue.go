package topology

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/netjam/netjam/impair"
)

// Queue hands packets to a goroutine of its own, which pushes them on:
// so that the goroutine feeding it (a direction's scheduler) does not
// wait for the node behind it (gVisor processing each packet, a write
// into a TUN device); at high rates the two then share the machine's
// cores instead of taking turns on one.
//
// The queue is bounded in packets and in bytes (a large segment that
// crossed whole holds up to 64 KiB: a bound in packets alone let an
// inbox of 1024 hold 64 MiB). When the node behind falls behind and the
// queue is full by either bound, Push waits for room (up to Wait):
// backpressure, as a real NIC's full ring stops the queue feeding it, so
// that a path configured to lose nothing loses nothing inside netjam. An
// empty queue takes any packet. The wait holds up the goroutine pushing (a
// direction's packets then run late, which its lateness figures show).
// Only a node stuck for Wait loses the packet, counted (Full).
//
// In front of a node that wants merged segments (Accepts.Merged) the
// queue hands on, each time it looks, every packet waiting (up to
// MaxBatch), with the segments of one connection among them merged, as a
// NIC's receive offload would pass them; it never waits for more. It
// looks when kicked: by each Push, except while a direction feeding it
// is in a pass (Direction holds it), whose end kicks it once. What one
// pass of a direction delivers then arrives together, instead of the
// queue's goroutine waking for the first packet of the pass and taking
// the rest one by one: a wake-up per pass instead of per packet, and
// batches that merge. No packet waits longer than its pass: they all
// left the direction at one moment of real time.
type Queue struct {
	name     string
	wait     time.Duration
	maxBytes int64
	ch       chan *impair.Packet
	// bytes is what the queue holds; room wakes a Push waiting for
	// bytes (one pending wake-up is enough: each packet taken sends one
	// while any waits), and roomWaiters counts those Pushes.
	bytes       atomic.Int64
	room        chan struct{}
	roomWaiters atomic.Int32
	out         Port
	merge       *impair.Pool // set by Compile: merge into packets of this pool
	// batch, set by Compile, is the node behind when it merges itself
	// (a Device): it is handed each batch whole instead.
	batch batcher
	// kicks wakes a merging queue's goroutine (one pending kick is
	// enough); holders counts the directions in a pass that hold it.
	kicks   chan struct{}
	holders atomic.Int32

	full  atomic.Uint64 // packets dropped after Wait: the node behind was stuck
	waits atomic.Uint64 // pushes that found the queue full and waited

	started   atomic.Bool
	done      chan struct{}
	closeOnce sync.Once
}

// MaxBatch bounds the packets a merging queue hands on at once.
const MaxBatch = 64

// NewQueue returns a queue of n packets and maxBytes bytes whose Push
// waits up to wait for room.
func NewQueue(name string, n int, maxBytes int64, wait time.Duration) *Queue {
	return &Queue{name: name, wait: wait, maxBytes: maxBytes, ch: make(chan *impair.Packet, n), room: make(chan struct{}, 1),
		kicks: make(chan struct{}, 1), done: make(chan struct{})}
}

// Node returns the queue as a node of a graph. It takes whatever it is
// given: the steps the node behind needs run on the queue's goroutine.
func (q *Queue) Node() Node {
	return Node{Name: q.name, In: q, Accepts: Accepts{GSO: Yes, Partial: true}, Out: &q.out, Life: q}
}

// Full returns the packets dropped because the node behind was stuck.
func (q *Queue) Full() uint64 { return q.full.Load() }

// Waits returns the pushes that found the queue full and waited.
func (q *Queue) Waits() uint64 { return q.waits.Load() }

// Push hands p over, waiting up to the queue's wait for room. The time
// is not kept: what runs behind a queue runs in real time.
func (q *Queue) Push(_ time.Time, p *impair.Packet) {
	p.SetMayWait(false) // its goroutine is not p's sender
	n := int64(p.Len())
	if q.fits(n) {
		select {
		case q.ch <- p:
			q.bytes.Add(n)
			if q.holders.Load() == 0 {
				q.kick()
			}
			return
		default:
		}
	}
	// Full: only now a timer, so the common case allocates nothing.
	q.waits.Add(1)
	q.kick() // whoever holds it, the goroutine must make room
	q.roomWaiters.Add(1)
	defer q.roomWaiters.Add(-1)
	t := time.NewTimer(q.wait)
	defer t.Stop()
	for {
		var in chan<- *impair.Packet // nil (never ready) while p does not fit
		if q.fits(n) {
			in = q.ch
		}
		select {
		case in <- p:
			q.bytes.Add(n)
			q.kick()
			return
		case <-q.room:
		case <-t.C:
			q.full.Add(1)
			p.Release()
			return
		}
	}
}

// fits reports whether the queue has room for n bytes more (an empty
// one always has).
func (q *Queue) fits(n int64) bool {
	b := q.bytes.Load()
	return b <= 0 || b+n <= q.maxBytes
}

// took accounts for p, taken out of the queue, and wakes a Push waiting
// for room.
func (q *Queue) took(p *impair.Packet) {
	q.bytes.Add(-int64(p.Len()))
	if q.roomWaiters.Load() > 0 {
		select {
		case q.room <- struct{}{}:
		default:
		}
	}
}

// batcher is a node that takes what its queue hands on together as one
// batch, in order, and merges it itself.
type batcher interface {
	PushBatch(ps []*impair.Packet)
}

// kick wakes a merging queue's goroutine, or leaves it a kick to find.
func (q *Queue) kick() {
	if q.merge == nil {
		return // its goroutine waits for packets, not kicks
	}
	select {
	case q.kicks <- struct{}{}:
	default:
	}
}

// hold and release bracket a pass of a direction feeding the queue:
// while one holds it, Push does not kick; release kicks when anything
// waits. A Push from elsewhere during the pass is handed on at its end.
func (q *Queue) hold() { q.holders.Add(1) }

func (q *Queue) release() {
	if q.holders.Add(-1) == 0 && len(q.ch) > 0 {
		q.kick()
	}
}

// Start launches the queue's goroutine.
func (q *Queue) Start(context.Context) {
	if !q.started.CompareAndSwap(false, true) {
		return
	}
	if q.merge != nil {
		go q.batches()
	} else {
		go q.loop()
	}
}

// Close stops the queue once what it holds is handed on; idempotent.
// Nothing may push after. A queue never started releases what it holds.
func (q *Queue) Close() {
	q.closeOnce.Do(func() {
		close(q.ch)
		q.kick()
		if q.started.CompareAndSwap(false, true) {
			for p := range q.ch {
				p.Release()
			}
			return
		}
		<-q.done
	})
}

func (q *Queue) loop() {
	defer close(q.done)
	for p := range q.ch {
		q.took(p)
		q.out.Push(time.Time{}, p)
	}
}

func (q *Queue) batches() {
	defer close(q.done)
	batch := make([]*impair.Packet, 0, MaxBatch)
	for range q.kicks {
		if !q.drain(batch) {
			return
		}
	}
}

// drain hands on everything waiting, in batches of up to MaxBatch with
// their segments merged. It reports false once the queue is closed and
// empty.
func (q *Queue) drain(batch []*impair.Packet) bool {
	for {
		batch = batch[:0]
		open := true
	more:
		for len(batch) < MaxBatch {
			select {
			case p, ok := <-q.ch:
				if !ok {
					open = false
					break more
				}
				q.took(p)
				batch = append(batch, p)
			default:
				break more
			}
		}
		if q.batch != nil {
			q.batch.PushBatch(batch)
		} else {
			for _, p := range q.merge.Coalesce(batch) {
				q.out.Push(time.Time{}, p)
			}
		}
		clear(batch[:cap(batch)])
		if !open {
			return false
		}
		if len(batch) < MaxBatch {
			return true
		}
	}
}
