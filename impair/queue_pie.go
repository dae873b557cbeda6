package impair

import (
	"math/rand/v2"
	"time"
)

// PIE's defaults (RFC 8033 §4.2, §4.4, Appendix A).
const (
	pieDefaultTarget   = 15 * time.Millisecond  // QDELAY_REF
	pieDefaultTUpdate  = 15 * time.Millisecond  // T_UPDATE
	pieDefaultMaxBurst = 150 * time.Millisecond // MAX_BURST
	pieDefaultAlpha    = 0.125                  // per second
	pieDefaultBeta     = 1.25                   // per second
)

const (
	// pieMTU is MEAN_PKTSIZE of RFC 8033 §4.1: with at most two such
	// packets queued PIE never drops, so the link cannot go idle for
	// want of packets.
	pieMTU = 1514
	// pieMaxECNProb is MAX_ECNTH (RFC 8033 §5.1): above this drop
	// probability even ECN-capable packets are dropped. So high a p means
	// marks are not holding the queue down (senders ignoring them), and
	// only drops still bound it.
	pieMaxECNProb = 0.1
	// pieMaxCatchUp bounds the periodic updates one call runs to catch
	// up with the time elapsed since the last call: 15 s at the default
	// T_UPDATE, far more than an empty queue needs to reach its fixed
	// point (p decays from 1 to 0 in under 200 updates).
	pieMaxCatchUp = 1000
)

// pieQueue is RFC 8033 PIE: a drop-tail FIFO in front of which arrivals
// are dropped at random with a probability p that a proportional-integral
// controller moves every T_UPDATE, up when the queuing delay is above the
// target or growing, down otherwise. Unlike CoDel it acts at enqueue, so a
// dropped packet never takes room in the queue.
//
// Choices the RFC leaves open, and departures from its pseudocode:
//
//   - Queuing delay is measured by timestamps (RFC 8033 §4.3; §5.2 makes
//     departure-rate estimation optional): the current delay is the sojourn
//     time of the last dequeued packet, or 0 once that dequeue left the
//     queue empty, as Linux's PIE in timestamp mode. An empty queue has no
//     delay, and without that rule the delay of the last packet of a busy
//     period would hold p up for as long as the queue stays idle.
//   - There is no timer. The periodic update of p is applied lazily: each
//     Enqueue and Dequeue first runs the updates of every T_UPDATE period
//     that ended since the last one, in order and with the state as it was
//     over that time, which is exactly what a timer would have computed,
//     since nothing the updates read changes between calls. Periods are
//     counted from the first call. One call runs at most pieMaxCatchUp
//     updates and skips the periods beyond; if the queue is empty the
//     state is then set to the fixed point that idle updates converge to
//     (p = 0, no delay, no burst allowance left until the next arrival
//     finds the queue quiet), which pieMaxCatchUp updates have reached
//     anyway: after a long idle time p has decayed to 0.
//   - The enhancements of Appendix B are used: the decay of p by 2% per
//     update while both the current and the previous delay are under half
//     the target, and the cap of 2% on a single increase once p >= 10%
//     (§5.5). Derandomization (§5.4) is not: each packet is dropped with
//     probability p independently, so the drop rate is p, which is what
//     the controller's tuning assumes; runs are reproducible through the
//     seeded random stream anyway.
//   - With ECN, an ECN-capable packet is marked instead of dropped while
//     p <= 10% (§5.1). Marked packets are queued and count in the backlog.
type pieQueue struct {
	q   fifo
	lim queueLimits
	c   *Counters
	rng *rand.Rand

	target, tUpdate, maxBurst time.Duration
	alpha, beta               float64
	ecn                       bool

	p          float64       // drop_prob_
	qdelay     time.Duration // current_qdelay: last measured queuing delay
	qdelayOld  time.Duration // qdelay_old_: current_qdelay at the previous update
	burst      time.Duration // burst_allowance_
	nextUpdate time.Time     // end of the current T_UPDATE period; zero before the first call
}

// newPIE returns a PIE queue for cfg: Target 15 ms, TUpdate 15 ms, Alpha
// 0.125, Beta 1.25 and MaxBurst 150 ms unless cfg sets them, and cfg's
// limits with tail drop. Random drops draw from rng.
func newPIE(cfg QueueConfig, c *Counters, rng *rand.Rand) Queue {
	q := &pieQueue{
		lim:      limitsOf(cfg),
		c:        c,
		rng:      rng,
		target:   cfg.Target,
		tUpdate:  cfg.TUpdate,
		maxBurst: cfg.MaxBurst,
		alpha:    cfg.Alpha,
		beta:     cfg.Beta,
		ecn:      cfg.ECN,
	}
	if q.target <= 0 {
		q.target = pieDefaultTarget
	}
	if q.tUpdate <= 0 {
		q.tUpdate = pieDefaultTUpdate
	}
	if q.maxBurst <= 0 {
		q.maxBurst = pieDefaultMaxBurst
	}
	if q.alpha <= 0 {
		q.alpha = pieDefaultAlpha
	}
	if q.beta <= 0 {
		q.beta = pieDefaultBeta
	}
	q.burst = q.maxBurst
	return q
}

// Enqueue admits p at now: tail drop (DropQueue) at the limits, else, once
// the burst allowance is spent, a random early drop (DropAQM) or ECN mark
// with probability p (RFC 8033 Appendix A's enque, with §5.1's ECN).
func (q *pieQueue) Enqueue(now time.Time, p *Packet) {
	q.catchUp(now)
	if !q.lim.admits(q.q.n, q.q.bytes, p) {
		q.c.drop(p, DropQueue)
		return
	}
	// A queue that has been quiet (no drop probability, low delay) earns
	// its full burst allowance back (§4.4).
	if q.p == 0 && q.qdelay < q.target/2 && q.qdelayOld < q.target/2 {
		q.burst = q.maxBurst
	}
	if q.burst == 0 && q.dropEarly() {
		if q.ecn && q.p <= pieMaxECNProb && markCE(p) {
			q.c.Marked.Add(1)
		} else {
			q.c.drop(p, DropAQM)
			return
		}
	}
	q.q.push(p)
	publishBacklog(q.c, q.q.n, q.q.bytes)
}

// dropEarly decides whether to drop an arrival: with probability p, except
// when the queue is plainly not congested, so that PIE stays work
// conserving (§4.1): the delay was under half the target at the last
// update and p is under 20%, or at most two packets are queued.
func (q *pieQueue) dropEarly() bool {
	if q.qdelayOld < q.target/2 && q.p < 0.2 || q.q.bytes <= 2*pieMTU {
		return false
	}
	return q.rng.Float64() < q.p
}

// Dequeue returns the oldest packet, or nil, and takes its sojourn time as
// the current queuing delay (0 if it leaves the queue empty).
func (q *pieQueue) Dequeue(now time.Time) *Packet {
	q.catchUp(now)
	p := q.q.pop()
	if p == nil {
		return nil
	}
	q.qdelay = now.Sub(p.Enqueued)
	if q.q.n == 0 {
		q.qdelay = 0
	}
	publishBacklog(q.c, q.q.n, q.q.bytes)
	return p
}

// catchUp runs the periodic updates of every period that ended at or
// before now (see pieQueue for why this equals a timer).
func (q *pieQueue) catchUp(now time.Time) {
	if q.nextUpdate.IsZero() {
		q.nextUpdate = now.Add(q.tUpdate)
		return
	}
	for i := 0; !now.Before(q.nextUpdate); i++ {
		if i == pieMaxCatchUp {
			skipped := now.Sub(q.nextUpdate)/q.tUpdate + 1
			q.nextUpdate = q.nextUpdate.Add(skipped * q.tUpdate)
			if q.q.n == 0 {
				q.p, q.qdelay, q.qdelayOld, q.burst = 0, 0, 0, 0
			}
			return
		}
		q.update()
		q.nextUpdate = q.nextUpdate.Add(q.tUpdate)
	}
}

// update is RFC 8033's calculate_drop_prob (§4.2, Appendix B), run once
// per T_UPDATE.
func (q *pieQueue) update() {
	cur, old := q.qdelay.Seconds(), q.qdelayOld.Seconds()
	delta := q.alpha*(cur-q.target.Seconds()) + q.beta*(cur-old)
	// Auto-tuning (§4.2): alpha and beta are scaled down while p is
	// small, so that a step of the controller changes p in proportion to
	// p itself; otherwise a fixed step would take p from, say, 0.0001 to
	// 0.01 in one update, and light congestion would see wild swings.
	switch {
	case q.p < 0.000001:
		delta /= 2048
	case q.p < 0.00001:
		delta /= 512
	case q.p < 0.0001:
		delta /= 128
	case q.p < 0.001:
		delta /= 32
	case q.p < 0.01:
		delta /= 8
	case q.p < 0.1:
		delta /= 2
	}
	// Cap drop adjustment (§5.5): a single TCP in slow start can fill the
	// queue so fast that p would jump; limit each increase to 2 points.
	if q.p >= 0.1 && delta > 0.02 {
		delta = 0.02
	}
	q.p += delta
	// Decay p exponentially when congestion has gone away.
	if q.qdelay < q.target/2 && q.qdelayOld < q.target/2 {
		q.p *= 0.98
	}
	q.p = min(max(q.p, 0), 1)
	q.qdelayOld = q.qdelay
	q.burst = max(q.burst-q.tUpdate, 0)
}

// Len returns the number of queued packets.
func (q *pieQueue) Len() int { return q.q.n }

// Bytes returns the number of queued bytes.
func (q *pieQueue) Bytes() int64 { return q.q.bytes }

// Flush drops every queued packet as DropFlushed.
func (q *pieQueue) Flush() { flushFIFO(&q.q, q.c) }
