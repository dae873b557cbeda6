package impair

import (
	"math"
	"time"
)

// CoDel's defaults: TARGET (RFC 8289 §4.3) and INTERVAL (§4.2).
const (
	codelDefaultTarget   = 5 * time.Millisecond
	codelDefaultInterval = 100 * time.Millisecond
)

// codelMTU is the backlog, in bytes, at or under which CoDel never drops
// (RFC 8289 §4.1, "Non-starvation"; MAXPACKET in §5): with at most one
// MTU-sized packet left the queue is not standing, it only holds what the
// link is about to send, and dropping would starve slow links, where one
// packet alone takes longer than the target to send. 1514 bytes is an
// Ethernet frame, Linux's default.
const codelMTU = 1514

// codelParams are CoDel's settings, shared by every instance of one queue
// (the flows of an FQ-CoDel all use the same).
type codelParams struct {
	target   time.Duration // acceptable standing queue delay (TARGET)
	interval time.Duration // sliding window over which the minimum is taken (INTERVAL)
	ecn      bool          // mark ECN-capable packets instead of dropping them
}

// newCoDelParams fills in RFC 8289's defaults for the fields cfg leaves 0.
func newCoDelParams(cfg QueueConfig) codelParams {
	prm := codelParams{target: cfg.Target, interval: cfg.Interval, ecn: cfg.ECN}
	if prm.target <= 0 {
		prm.target = codelDefaultTarget
	}
	if prm.interval <= 0 {
		prm.interval = codelDefaultInterval
	}
	return prm
}

// codelSource is what the CoDel state machine dequeues from: the whole
// queue for CoDel, one flow's queue for FQ-CoDel.
type codelSource interface {
	// pop removes and returns the oldest packet, or nil when empty, and
	// keeps the owner's totals and gauges up to date.
	pop() *Packet
	// backlog returns the bytes still queued after a pop, which the
	// "more than one MTU" test of RFC 8289 §4.1 compares with codelMTU.
	backlog() int64
}

// codelVars is the state of one CoDel instance: the member variables of
// RFC 8289 §5's codel_queue_t. The zero value is a fresh instance.
//
// The state machine follows RFC 8289 §5 line by line, with two things made
// explicit that the pseudocode leaves to its types: a zero time.Time stands
// for the pseudocode's 0 ("not above target"), and the re-entry test
// "now - drop_next < 16*INTERVAL" is signed, as Linux's codel_time_before,
// so that re-entering before drop_next (a drop "in the future") counts as
// recent.
type codelVars struct {
	firstAboveTime time.Time // when the sojourn will have been above target for an interval; zero: below
	dropNext       time.Time // when the next drop is due, while dropping
	count          uint32    // drops (or marks) since entering the dropping state
	lastCount      uint32    // count when the dropping state was last entered
	dropping       bool      // in the dropping state
}

// doDequeue is RFC 8289's dodequeue: it pops the head packet and reports
// whether it is OK to drop, that is whether the sojourn time has stayed at
// or above target, with more than an MTU of backlog, for at least an
// interval.
func (v *codelVars) doDequeue(now time.Time, prm *codelParams, src codelSource) (*Packet, bool) {
	p := src.pop()
	if p == nil {
		// The queue is empty: we cannot be above target.
		v.firstAboveTime = time.Time{}
		return nil, false
	}
	if now.Sub(p.Enqueued) < prm.target || src.backlog() <= codelMTU {
		// Went below: stay below for at least an interval.
		v.firstAboveTime = time.Time{}
		return p, false
	}
	if v.firstAboveTime.IsZero() {
		// Just went above from below. If still above at firstAboveTime,
		// it will be OK to drop.
		v.firstAboveTime = now.Add(prm.interval)
		return p, false
	}
	return p, !now.Before(v.firstAboveTime)
}

// dequeue is RFC 8289's codel_queue_t::dequeue: it returns the packet to
// send at now, or nil, dropping packets (DropAQM) as the control law
// decides. With ECN, a packet markCE accepts is marked (Counters.Marked)
// and sent instead of dropped, and the drop schedule advances as if it
// had been dropped, as Linux's codel_dequeue does.
func (v *codelVars) dequeue(now time.Time, prm *codelParams, src codelSource, c *Counters) *Packet {
	p, okToDrop := v.doDequeue(now, prm, src)
	if v.dropping {
		if !okToDrop {
			// Sojourn time below target: leave the dropping state.
			v.dropping = false
		}
		// Time for the next drop. Drop the current packet and dequeue the
		// next; if that does not take us out of the dropping state,
		// schedule the next drop. A large backlog may make the next drop
		// due at once, hence the loop.
		for v.dropping && !now.Before(v.dropNext) {
			v.count++
			if prm.ecn && markCE(p) {
				c.Marked.Add(1)
				v.dropNext = codelControlLaw(v.dropNext, prm.interval, v.count)
				return p
			}
			c.drop(p, DropAQM)
			p, okToDrop = v.doDequeue(now, prm, src)
			if !okToDrop {
				v.dropping = false
			} else {
				v.dropNext = codelControlLaw(v.dropNext, prm.interval, v.count)
			}
		}
		return p
	}
	if !okToDrop {
		return p
	}
	// Sojourn time has been above target for an interval: enter the
	// dropping state with this packet.
	if prm.ecn && markCE(p) {
		c.Marked.Add(1)
	} else {
		c.drop(p, DropAQM)
		p, _ = v.doDequeue(now, prm, src)
	}
	v.dropping = true
	// If we re-enter the dropping state soon after leaving it, the drop
	// rate that controlled the queue last time is a good starting point:
	// resume from the drops of the last cycle rather than from 1.
	// (dropNext is at most an interval after the last drop, so now -
	// dropNext approximates the time since the last drop.)
	delta := v.count - v.lastCount
	v.count = 1
	if delta > 1 && now.Sub(v.dropNext) < 16*prm.interval {
		v.count = delta
	}
	v.dropNext = codelControlLaw(now, prm.interval, v.count)
	v.lastCount = v.count
	return p
}

// codelControlLaw returns when the next drop is due after one at t, the
// count-th of the dropping state: interval/sqrt(count) later. Spacing the
// drops in inverse proportion to the square root of their number uses the
// known relation of a TCP's throughput to its drop rate (throughput ~
// 1/sqrt(rate)) to get a linear change in throughput (RFC 8289 §3.3).
func codelControlLaw(t time.Time, interval time.Duration, count uint32) time.Time {
	return t.Add(time.Duration(float64(interval) / math.Sqrt(float64(count))))
}

// codelQueue is RFC 8289 CoDel over one FIFO, with tail drop at the
// configured limits. CoDel acts at dequeue, when it knows how long the
// head packet has waited; the limits only guard memory against a sender
// that ignores drops.
type codelQueue struct {
	q   fifo
	lim queueLimits
	prm codelParams
	v   codelVars
	c   *Counters
}

// newCoDelQueue returns a CoDel queue for cfg (Target and Interval default
// to 5 ms and 100 ms), counting into c.
func newCoDelQueue(cfg QueueConfig, c *Counters) Queue {
	return &codelQueue{lim: limitsOf(cfg), prm: newCoDelParams(cfg), c: c}
}

// Enqueue admits p, or drops it as DropQueue when it would take the
// backlog over either limit, as RFC 8289 §5's enqueue.
func (q *codelQueue) Enqueue(_ time.Time, p *Packet) {
	if !q.lim.admits(q.q.n, q.q.bytes, p) {
		q.c.drop(p, DropQueue)
		return
	}
	q.q.push(p)
	publishBacklog(q.c, q.q.n, q.q.bytes)
}

// Dequeue returns the packet to send at now, or nil, after CoDel's drops.
func (q *codelQueue) Dequeue(now time.Time) *Packet {
	return q.v.dequeue(now, &q.prm, q, q.c)
}

// Len returns the number of queued packets.
func (q *codelQueue) Len() int { return q.q.n }

// Bytes returns the number of queued bytes.
func (q *codelQueue) Bytes() int64 { return q.q.bytes }

// Flush drops every queued packet as DropFlushed.
func (q *codelQueue) Flush() { flushFIFO(&q.q, q.c) }

// pop implements codelSource.
func (q *codelQueue) pop() *Packet {
	p := q.q.pop()
	if p != nil {
		publishBacklog(q.c, q.q.n, q.q.bytes)
	}
	return p
}

// backlog implements codelSource.
func (q *codelQueue) backlog() int64 { return q.q.bytes }
