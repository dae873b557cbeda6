package impair

import (
	"math/bits"
	"sync/atomic"
	"time"

	"github.com/netjam/netjam/clock"
)

// bottleneck is the queue in front of a serializer at a fixed bit rate, or
// replaying a trace of delivery opportunities: the place where a path's
// capacity is set and where queueing delay builds up.
//
// One packet at a time is "on the wire": it started transmission when the
// previous one finished (or when it arrived at an idle link) and leaves when
// its last bit is sent. The discipline chooses which queued packet goes next
// at that moment, which is when AQMs measure sojourn time.
type bottleneck struct {
	c    Counters
	q    Queue
	qcfg QueueConfig // what q was made of (see Chain.Set)
	// dt is q when it is a drop-tail queue, the one discipline that
	// takes GSO packets whole (takesWhole); nil otherwise.
	dt   *dropTail
	rate RateConfig

	cur    *Packet   // on the wire; nil when idle
	doneAt time.Time // when cur's last bit is sent
	// waiting holds, while cur is a part of a GSO packet (start), when
	// each of its segments after the first starts transmission and its
	// length; those from next on have not started yet (sync).
	waiting []segStart
	next    int
	// rem carries the sub-nanosecond remainder of transmission times
	// (in units of 1/Bitrate ns) so that their sum never drifts from
	// bytes*8/rate, whatever the rate.
	rem uint64
	// trace replays RateConfig.Trace. Set only on the chain's goroutine
	// (a live change may switch it), read by CapacityBytes on others.
	trace atomic.Pointer[traceState]
}

// traceState is the trace a bottleneck replays, with what the traces
// before it offered, swapped as one so that CapacityBytes never counts a
// trace twice or misses one.
type traceState struct {
	link   *traceLink // nil at a fixed bit rate
	before int64      // bytes the traces live changes replaced offered
}

func newBottleneck(cfg Config) *bottleneck {
	b := &bottleneck{rate: cfg.Rate, qcfg: cfg.Queue}
	st := &traceState{}
	if cfg.Rate.Trace != nil {
		st.link = newTraceLink(cfg.Rate.Trace)
	}
	b.trace.Store(st)
	b.q = newQueue(cfg.Queue, &b.c, newRand(cfg.Seed, cfg.Name, "queue"))
	b.dt, _ = b.q.(*dropTail)
	return b
}

func (b *bottleneck) Name() string        { return "queue" }
func (b *bottleneck) Counters() *Counters { return &b.c }

// segStart is when a segment of a part on the wire starts transmission,
// and its length.
type segStart struct {
	at  time.Time
	len int
}

func (b *bottleneck) Push(now time.Time, p *Packet, out Sink) {
	b.sync(now)
	if p.segs > 0 && !b.takesWhole(p) {
		// Its segments one by one, as if they came apart.
		segmentPool.SplitTo(now, p, (*bottleneckIn)(b))
		return
	}
	b.c.in(p)
	p.Enqueued = now
	b.q.Enqueue(now, p)
	if b.cur == nil {
		b.start(now)
	}
}

// bottleneckIn is the bottleneck as the sink of a GSO packet it splits
// on arrival.
type bottleneckIn bottleneck

func (b *bottleneckIn) Push(now time.Time, p *Packet) { (*bottleneck)(b).Push(now, p, nil) }

// takesWhole reports whether the GSO packet p may enter the queue whole:
// a drop-tail queue (the one discipline whose decisions on p's segments
// are the same on p: all in, or not) with room for every segment. A
// queue with room for some only takes those of its segments that fit,
// one by one; the others see the same discipline too. How p goes on the
// wire is start's.
func (b *bottleneck) takesWhole(p *Packet) bool {
	return b.dt != nil && b.dt.admits(p)
}

// sync takes off what the queue counts on the wire the segments of cur
// that started transmission by now (an arrival at the instant one starts
// comes after it, as a departure before an arrival).
func (b *bottleneck) sync(now time.Time) {
	if b.next == len(b.waiting) {
		return
	}
	dt := b.dt
	for ; b.next < len(b.waiting) && !b.waiting[b.next].at.After(now); b.next++ {
		dt.onWireN--
		dt.onWireB -= int64(b.waiting[b.next].len)
	}
	dt.publish()
}

func (b *bottleneck) Next() (time.Time, bool) { return b.doneAt, b.cur != nil }

func (b *bottleneck) Wake(now time.Time, out Sink) {
	p, t := b.cur, b.doneAt
	b.cur = nil
	b.sync(t)
	b.c.out(p)
	out.Push(t, p)
	b.start(t)
}

// start puts the next packet the discipline picks on the wire at now.
//
// A GSO packet goes on the wire a part at a time: as many of its first
// segments as take at most clock.Slack together (at least one), each
// serialized as a packet of its own, leave together when the last of
// them is sent; the rest goes back to the head of the queue, next in
// line. The part leaves at its last segment's exact time, the others in
// it at most clock.Slack late: the precision the runner delivers with
// anyway (clock.Drive).
func (b *bottleneck) start(now time.Time) {
	p := b.q.Dequeue(now)
	if p == nil {
		return
	}
	tl := b.trace.Load().link
	if p.segs > 0 {
		m := 1
		if tl == nil {
			m = b.partSegments(p)
		}
		if m < int(p.segs) {
			h := cutHead(p, m)
			b.requeue(p)
			p = h
		}
	}
	p = fit(p) // the last of a GSO packet's parts is in its 64 KiB buffer
	b.cur = p
	if tl != nil {
		// Busy from the start to the opportunity that carries the
		// last byte, waiting for opportunities included.
		b.c.Sojourn.RecordDuration(now.Sub(p.Enqueued))
		b.doneAt = tl.depart(now, int64(b.rate.wireBytes(len(p.Data))))
		b.c.BusyNs.Add(int64(b.doneAt.Sub(now)))
		return
	}
	if p.segs == 0 {
		b.c.Sojourn.RecordDuration(now.Sub(p.Enqueued))
		tx := b.txTime(len(p.Data))
		b.c.BusyNs.Add(int64(tx))
		b.doneAt = now.Add(tx)
		return
	}
	// Each segment in turn, as if they came apart: its sojourn ends
	// when it starts transmission, and until then it counts as queued.
	dt := b.dt
	b.waiting, b.next = b.waiting[:0], 0
	t := now
	hl, mss, payload := int(p.hdrLen), int(p.mss), len(p.Data)-int(p.hdrLen)
	for ; payload > 0; payload -= mss {
		n := hl + min(mss, payload)
		if t != now {
			b.waiting = append(b.waiting, segStart{at: t, len: n})
			dt.onWireN++
			dt.onWireB += int64(n)
		}
		b.c.Sojourn.RecordDuration(t.Sub(p.Enqueued))
		t = t.Add(b.txTime(n))
	}
	dt.publish()
	b.c.BusyNs.Add(int64(t.Sub(now)))
	b.doneAt = t
}

// partSegments returns how many of the first segments of p, a GSO
// packet, go on the wire together (start): those that take at most
// clock.Slack at the rate in force, at least one.
func (b *bottleneck) partSegments(p *Packet) int {
	seg := float64(b.rate.wireBytes(int(p.hdrLen)+int(p.mss))) * 8 * float64(time.Second)
	m := float64(clock.Slack) * float64(b.rate.Bitrate) / seg
	return int(max(1, min(m, float64(p.segs))))
}

// requeue puts the rest of a GSO packet back at the head of the queue;
// only a drop-tail queue takes GSO packets (takesWhole).
func (b *bottleneck) requeue(p *Packet) {
	b.dt.q.pushFront(p)
	b.dt.publish()
}

// wireBytes is what a packet of n bytes costs on the wire: its length plus
// the per-packet overhead, rounded up to whole cells when cells are set.
func (r RateConfig) wireBytes(n int) uint64 {
	n += r.PacketOverhead
	if r.CellSize > 0 {
		cells := (n + r.CellSize - 1) / r.CellSize
		n = cells * (r.CellSize + r.CellOverhead)
	}
	if n < 0 {
		return 0
	}
	return uint64(n)
}

// txTime returns the transmission time of a packet of n bytes, carrying the
// rounding remainder to the next packet.
func (b *bottleneck) txTime(n int) time.Duration {
	hi, lo := bits.Mul64(b.rate.wireBytes(n)*8, uint64(time.Second))
	lo, carry := bits.Add64(lo, b.rem, 0)
	hi += carry
	ns, rem := bits.Div64(hi, lo, b.rate.Bitrate)
	b.rem = rem
	return time.Duration(ns)
}

// CapacityBytes returns, for a trace-driven link, the bytes its delivery
// opportunities offered from its start (its first packet) up to t, used
// or lost, those of the traces live changes replaced included; false at a
// fixed rate, or before the first packet, with what earlier traces
// offered. Safe on any goroutine.
func (b *bottleneck) CapacityBytes(t time.Time) (int64, bool) {
	st := b.trace.Load()
	if st.link == nil {
		return st.before, false
	}
	c, ok := st.link.capacity(t)
	return st.before + c, ok
}

// switchTrace replaces the trace being replayed by t (nil: the fixed
// rate of the change), started at now; a zero now (a change before the
// run starts) starts it with the first packet, as a trace of the file.
func (b *bottleneck) switchTrace(t *Trace, now time.Time) {
	old := b.trace.Load()
	st := &traceState{before: old.before}
	if old.link != nil {
		if c, ok := old.link.capacity(now); ok {
			st.before += c
		}
	}
	if t != nil {
		st.link = newTraceLink(t)
		if !now.IsZero() {
			st.link.startAt(now)
		}
	}
	b.trace.Store(st)
}

func (b *bottleneck) Flush() {
	if b.cur != nil {
		b.sync(b.doneAt)
		b.c.drop(b.cur, DropFlushed)
		b.cur = nil
	}
	b.q.Flush()
}
