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
// When the node behind falls behind and the queue is full, Push waits
// for room (up to Wait): backpressure, as a real NIC's full ring stops
// the queue feeding it, so that a path configured to lose nothing loses
// nothing inside netjam. The wait holds up the goroutine pushing (a
// direction's packets then run late, which its lateness figures show).
// Only a node stuck for Wait loses the packet, counted (Full).
//
// In front of a node that wants merged segments (Accepts.Merged) the
// queue hands on, each time it looks, every packet waiting (up to
// MaxBatch), with the segments of one connection among them merged, as a
// NIC's receive offload would pass them; it never waits for more.
type Queue struct {
	name  string
	wait  time.Duration
	ch    chan *impair.Packet
	out   Port
	merge *impair.Pool // set by Compile: merge into packets of this pool

	full  atomic.Uint64 // packets dropped after Wait: the node behind was stuck
	waits atomic.Uint64 // pushes that found the queue full and waited

	started   atomic.Bool
	done      chan struct{}
	closeOnce sync.Once
}

// MaxBatch bounds the packets a merging queue hands on at once.
const MaxBatch = 64

// NewQueue returns a queue of n packets whose Push waits up to wait for
// room.
func NewQueue(name string, n int, wait time.Duration) *Queue {
	return &Queue{name: name, wait: wait, ch: make(chan *impair.Packet, n), done: make(chan struct{})}
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
	select {
	case q.ch <- p:
		return
	default:
	}
	// Full: only now a timer, so the common case allocates nothing.
	q.waits.Add(1)
	t := time.NewTimer(q.wait)
	defer t.Stop()
	select {
	case q.ch <- p:
	case <-t.C:
		q.full.Add(1)
		p.Release()
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
		q.out.Push(time.Time{}, p)
	}
}

func (q *Queue) batches() {
	defer close(q.done)
	batch := make([]*impair.Packet, 0, MaxBatch)
	for p := range q.ch {
		batch = append(batch[:0], p)
	more:
		for len(batch) < MaxBatch {
			select {
			case p, ok := <-q.ch:
				if !ok {
					break more
				}
				batch = append(batch, p)
			default:
				break more
			}
		}
		for _, p := range q.merge.Coalesce(batch) {
			q.out.Push(time.Time{}, p)
		}
		clear(batch)
	}
}
