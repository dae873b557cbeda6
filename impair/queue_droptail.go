package impair

import "time"

// queueLimits bounds a queue's backlog in packets and bytes; a zero field
// turns that bound off. Every discipline applies the same rule, so that
// switching discipline never changes how much a queue can hold.
type queueLimits struct {
	packets int
	bytes   int64
}

// limitsOf returns cfg's limits. Like newQueue it falls back to
// DefaultQueueLimit packets when both are off, so that a queue built
// directly is still bounded.
func limitsOf(cfg QueueConfig) queueLimits {
	l := queueLimits{packets: cfg.LimitPackets, bytes: cfg.LimitBytes}
	if l.packets <= 0 && l.bytes <= 0 {
		l.packets = DefaultQueueLimit
	}
	return l
}

// admits reports whether a backlog of n packets and b bytes has room for p
// (each of a GSO packet's segments) under both limits.
func (l queueLimits) admits(n int, b int64, p *Packet) bool {
	return (l.packets <= 0 || n+p.Segments() <= l.packets) && (l.bytes <= 0 || b+int64(p.WireLen()) <= l.bytes)
}

// exceeded reports whether a backlog of n packets and b bytes is over
// either limit.
func (l queueLimits) exceeded(n int, b int64) bool {
	return (l.packets > 0 && n > l.packets) || (l.bytes > 0 && b > l.bytes)
}

// publishBacklog stores a queue's backlog into the gauges of c, which other
// goroutines read at any time. Queues call it after every change.
func publishBacklog(c *Counters, n int, b int64) {
	c.QueueLen.Store(int64(n))
	c.QueueBytes.Store(b)
}

// dropTail is a FIFO that drops an arriving packet that does not fit: the
// plain router queue, and the default discipline. Losses then hit the
// newest packets, so a sender learns of congestion only after the whole
// standing queue ahead of the loss has drained.
type dropTail struct {
	q   fifo
	lim queueLimits
	c   *Counters
	// onWire are the segments (and their bytes) of the part of a GSO
	// packet on the bottleneck's wire that have not started transmission
	// yet: one by one they would still be queued, so they count against
	// the limits (bottleneck.start sets them).
	onWireN int
	onWireB int64
}

// newDropTail returns a drop-tail FIFO bounded by cfg.LimitPackets and
// cfg.LimitBytes, counting into c.
func newDropTail(cfg QueueConfig, c *Counters) Queue {
	return &dropTail{lim: limitsOf(cfg), c: c}
}

// Enqueue admits p, or drops it as DropQueue when it would take the
// backlog over either limit.
func (d *dropTail) Enqueue(_ time.Time, p *Packet) {
	if !d.admits(p) {
		d.c.drop(p, DropQueue)
		return
	}
	d.q.push(p)
	d.publish()
}

// admits reports whether p fits, every one of its segments.
func (d *dropTail) admits(p *Packet) bool {
	return d.lim.admits(d.q.n+d.onWireN, d.q.bytes+d.onWireB, p)
}

// publish stores the backlog, the segments waiting on the wire included,
// into the gauges.
func (d *dropTail) publish() { publishBacklog(d.c, d.q.n+d.onWireN, d.q.bytes+d.onWireB) }

// Dequeue returns the oldest packet, or nil.
func (d *dropTail) Dequeue(time.Time) *Packet {
	p := d.q.pop()
	if p != nil {
		d.publish()
	}
	return p
}

// Len returns the number of queued packets.
func (d *dropTail) Len() int { return d.q.n }

// Bytes returns the number of queued bytes.
func (d *dropTail) Bytes() int64 { return d.q.bytes }

// Flush drops every queued packet as DropFlushed.
func (d *dropTail) Flush() {
	flushFIFO(&d.q, d.c)
}

// flushFIFO drops every packet of q as DropFlushed and zeroes the gauges.
func flushFIFO(q *fifo, c *Counters) {
	for p := q.pop(); p != nil; p = q.pop() {
		c.drop(p, DropFlushed)
	}
	publishBacklog(c, 0, 0)
}

// headDrop is a FIFO that makes room for an arriving packet by dropping the
// oldest ones. The loss is then signalled a whole queue earlier than with
// drop-tail (the dropped packet was about to leave, the arrival would have
// waited behind everything), which shortens a sender's reaction time; it is
// also what a receiver of real-time data wants, the freshest data.
type headDrop struct {
	dropTail
}

// newHeadDrop returns a head-drop FIFO bounded by cfg.LimitPackets and
// cfg.LimitBytes, counting into c.
func newHeadDrop(cfg QueueConfig, c *Counters) Queue {
	return &headDrop{dropTail{lim: limitsOf(cfg), c: c}}
}

// Enqueue drops packets from the head, each as DropQueue, until p fits,
// then appends p. A packet larger than the byte limit on its own can never
// fit; it is dropped and the queue left alone.
func (h *headDrop) Enqueue(_ time.Time, p *Packet) {
	if h.lim.bytes > 0 && int64(len(p.Data)) > h.lim.bytes {
		h.c.drop(p, DropQueue)
		return
	}
	for !h.lim.admits(h.q.n, h.q.bytes, p) {
		h.c.drop(h.q.pop(), DropQueue)
	}
	h.q.push(p)
	publishBacklog(h.c, h.q.n, h.q.bytes)
}
