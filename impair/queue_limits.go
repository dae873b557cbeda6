package impair

// Queue limits that change while a direction runs (Chain.Set): a larger
// limit only admits more from the next arrival on; a smaller one drops at
// once what the queue holds beyond it, each packet counted as DropQueue,
// from where the discipline drops on overflow: drop-tail, CoDel and PIE
// from the tail (the newest packets, which the new limit would have
// refused), head-drop from the head, FQ-CoDel from its fattest flows.

// limitSetter is a Queue whose limits can change in place.
type limitSetter interface {
	setLimits(l queueLimits)
}

// trimTail drops, newest first, the packets of q beyond l, counting each
// as DropQueue into c. A singly linked FIFO has no way back from its tail,
// so it keeps the longest prefix within l and drops the rest: one pass,
// once per change. A GSO packet across the limit is split, and its
// segments kept or dropped one by one. n and b are what the queue holds
// ahead of q (dropTail.onWireN and onWireB), kept.
func trimTail(q *fifo, l queueLimits, c *Counters, n int, b int64) {
	if !l.exceeded(n+q.n, b+q.bytes) {
		return
	}
	keep := fifo{n: n, bytes: b}
	full := false
	trim := func(p *Packet) {
		if full = full || l.exceeded(keep.n+p.Segments(), keep.bytes+int64(p.WireLen())); full {
			c.drop(p, DropQueue)
			return
		}
		keep.push(p)
	}
	for p := q.pop(); p != nil; p = q.pop() {
		if p.segs > 0 && !full && l.exceeded(keep.n+p.Segments(), keep.bytes+int64(p.WireLen())) {
			segmentPool.Split(p, trim)
			continue
		}
		trim(p)
	}
	keep.n, keep.bytes = keep.n-n, keep.bytes-b
	*q = keep
}

func (d *dropTail) setLimits(l queueLimits) {
	d.lim = l
	trimTail(&d.q, l, d.c, d.onWireN, d.onWireB)
	d.publish()
}

func (h *headDrop) setLimits(l queueLimits) {
	h.lim = l
	for l.exceeded(h.q.n, h.q.bytes) {
		h.c.drop(h.q.pop(), DropQueue)
	}
	publishBacklog(h.c, h.q.n, h.q.bytes)
}

func (q *codelQueue) setLimits(l queueLimits) {
	q.lim = l
	trimTail(&q.q, l, q.c, 0, 0)
	publishBacklog(q.c, q.q.n, q.q.bytes)
}

func (q *pieQueue) setLimits(l queueLimits) {
	q.lim = l
	trimTail(&q.q, l, q.c, 0, 0)
	publishBacklog(q.c, q.q.n, q.q.bytes)
}

func (fq *fqCoDel) setLimits(l queueLimits) {
	fq.lim = l
	for fq.lim.exceeded(fq.n, fq.bytes) {
		fq.dropFattest()
	}
	publishBacklog(fq.c, fq.n, fq.bytes)
}
