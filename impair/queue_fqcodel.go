package impair

import (
	"math/rand/v2"
	"time"
)

// FQ-CoDel's defaults (RFC 8290 §4.3) and Linux's overflow batch.
const (
	fqDefaultFlows   = 1024
	fqDefaultQuantum = 1514
	// fqDropBatch bounds the packets dropped from the fattest flow per
	// overflow, as Linux's drop_batch_size.
	fqDropBatch = 64
)

// Which scheduling list a flow is on.
const (
	fqIdle uint8 = iota // on no list: empty, and seen empty by the scheduler
	fqNew               // on the new-flows list
	fqOld               // on the old-flows list
)

// fqFlow is one of FQ-CoDel's per-flow queues with its CoDel state and its
// deficit-round-robin credit. All of them are allocated with the queue.
type fqFlow struct {
	q       fifo
	v       codelVars
	deficit int     // bytes the flow may still send this round (may go negative)
	list    uint8   // fqIdle, fqNew or fqOld
	next    *fqFlow // link in the list named by list
	fq      *fqCoDel
}

// pop implements codelSource: it takes the flow's head packet and keeps
// the queue's totals and gauges in step.
func (f *fqFlow) pop() *Packet {
	p := f.q.pop()
	if p != nil {
		fq := f.fq
		fq.n--
		fq.bytes -= int64(len(p.Data))
		publishBacklog(fq.c, fq.n, fq.bytes)
	}
	return p
}

// backlog implements codelSource with the whole queue's backlog, not the
// flow's, as Linux's fq_codel passes the qdisc backlog to codel_dequeue:
// CoDel's "more than one MTU" test protects the link from going idle,
// which depends on everything queued, and a flow that keeps only one
// packet queued at a time is still controlled when it causes delay.
func (f *fqFlow) backlog() int64 { return f.fq.bytes }

// flowList is an intrusive FIFO of flows. The scheduler only ever takes a
// flow off the head of a list, so one link per flow is enough.
type flowList struct {
	head, tail *fqFlow
}

func (l *flowList) pushBack(f *fqFlow) {
	f.next = nil
	if l.tail == nil {
		l.head = f
	} else {
		l.tail.next = f
	}
	l.tail = f
}

func (l *flowList) popFront() *fqFlow {
	f := l.head
	l.head = f.next
	if l.head == nil {
		l.tail = nil
	}
	f.next = nil
	return f
}

// fqCoDel is RFC 8290 FQ-CoDel: packets are hashed by 5-tuple into a fixed
// set of flow queues, each controlled by its own CoDel, and served by
// deficit round robin in which flows that have just become active (the
// new-flows list) go before the backlogged ones (old flows). A sparse
// flow, one that never builds a queue, therefore sees almost no queuing
// delay however many bulk flows share the link, and bulk flows share it
// fairly in bytes.
type fqCoDel struct {
	flows   []fqFlow
	newList flowList
	oldList flowList
	prm     codelParams
	quantum int
	seed    uint64
	lim     queueLimits
	n       int   // packets queued over all flows
	bytes   int64 // bytes queued over all flows
	c       *Counters
}

// newFQCoDel returns an FQ-CoDel queue for cfg: cfg.Flows queues (default
// 1024), cfg.Quantum bytes per round (default 1514), CoDel with cfg.Target
// and cfg.Interval per flow, and cfg's limits over the whole queue. The
// flow hash's seed is drawn from rng. Everything is allocated here, so
// nothing is allocated per packet.
func newFQCoDel(cfg QueueConfig, c *Counters, rng *rand.Rand) Queue {
	nflows := cfg.Flows
	if nflows <= 0 {
		nflows = fqDefaultFlows
	}
	fq := &fqCoDel{
		flows:   make([]fqFlow, nflows),
		prm:     newCoDelParams(cfg),
		quantum: cfg.Quantum,
		seed:    rng.Uint64(),
		lim:     limitsOf(cfg),
		c:       c,
	}
	if fq.quantum <= 0 {
		fq.quantum = fqDefaultQuantum
	}
	for i := range fq.flows {
		fq.flows[i].fq = fq
	}
	return fq
}

// flowOf returns the queue of p's flow. The hash is mapped onto the flows
// by multiply-and-shift (Linux's reciprocal_scale), which unlike a modulo
// uses the hash's high bits and needs no division.
func (fq *fqCoDel) flowOf(p *Packet) *fqFlow {
	h := flowHash(p, fq.seed)
	return &fq.flows[uint64(h)*uint64(len(fq.flows))>>32]
}

// Enqueue appends p to its flow's queue (RFC 8290 §4.1). A flow that is on
// neither list becomes a new flow with a full quantum of credit; a flow
// that is still listed, even if it has emptied meanwhile, stays where it
// is, so a flow cannot jump the queue by sending in short bursts.
//
// If the queue is then over either limit, packets are dropped (DropQueue)
// from the flow with the largest backlog in bytes, which is the one most
// likely to be causing the overflow (§4.1), in batches as dropFattest.
func (fq *fqCoDel) Enqueue(_ time.Time, p *Packet) {
	f := fq.flowOf(p)
	f.q.push(p)
	fq.n++
	fq.bytes += int64(len(p.Data))
	if f.list == fqIdle {
		f.list = fqNew
		f.deficit = fq.quantum
		fq.newList.pushBack(f)
	}
	for fq.lim.exceeded(fq.n, fq.bytes) {
		fq.dropFattest()
	}
	publishBacklog(fq.c, fq.n, fq.bytes)
}

// dropFattest drops packets from the head of the flow with the largest
// backlog, as Linux's fq_codel_drop: up to fqDropBatch packets, stopping
// once half of that flow's backlog is gone. Finding the fattest flow takes
// a scan of every flow, so a batch amortizes it over many drops under
// sustained overload. The flow's CoDel count is raised by the drops so
// its CoDel, too, reacts harder.
//
// Linux drops one batch per enqueue; Enqueue repeats until the queue is
// within both limits, so that the byte limit, too, is a hard bound.
func (fq *fqCoDel) dropFattest() {
	// Ties on bytes (only possible with empty packets) go to the flow
	// with more packets, so that fat is never empty while fq is not.
	fat := &fq.flows[0]
	for i := range fq.flows {
		f := &fq.flows[i]
		if f.q.bytes > fat.q.bytes || f.q.bytes == fat.q.bytes && f.q.n > fat.q.n {
			fat = f
		}
	}
	threshold := fat.q.bytes / 2
	var dropped int64
	var n uint32
	for p := fat.q.pop(); p != nil; p = fat.q.pop() {
		dropped += int64(len(p.Data))
		fq.n--
		fq.bytes -= int64(len(p.Data))
		fq.c.drop(p, DropQueue)
		n++
		if n >= fqDropBatch || dropped >= threshold {
			break
		}
	}
	fat.v.count += n
}

// Dequeue returns the next packet by RFC 8290 §4.2, or nil when every flow
// is empty. It serves the first new flow, or else the first old flow:
//
//   - a flow whose credit is used up gets another quantum and goes to the
//     end of the old list;
//   - otherwise its CoDel dequeues (and perhaps drops or marks) and the
//     packet's length is charged to its credit;
//   - a flow found empty leaves the new list for the end of the old list
//     (so that it cannot return to the new list at once and starve the old
//     flows), and leaves the old list for good.
func (fq *fqCoDel) Dequeue(now time.Time) *Packet {
	for {
		l := &fq.newList
		if l.head == nil {
			l = &fq.oldList
			if l.head == nil {
				return nil
			}
		}
		f := l.head
		if f.deficit <= 0 {
			f.deficit += fq.quantum
			l.popFront()
			f.list = fqOld
			fq.oldList.pushBack(f)
			continue
		}
		p := f.v.dequeue(now, &fq.prm, f, fq.c)
		if p == nil {
			l.popFront()
			if f.list == fqNew {
				f.list = fqOld
				fq.oldList.pushBack(f)
			} else {
				f.list = fqIdle
			}
			continue
		}
		f.deficit -= len(p.Data)
		return p
	}
}

// Len returns the number of queued packets.
func (fq *fqCoDel) Len() int { return fq.n }

// Bytes returns the number of queued bytes.
func (fq *fqCoDel) Bytes() int64 { return fq.bytes }

// Flush drops every queued packet as DropFlushed and takes every flow off
// the lists.
func (fq *fqCoDel) Flush() {
	for i := range fq.flows {
		f := &fq.flows[i]
		for p := f.q.pop(); p != nil; p = f.q.pop() {
			fq.c.drop(p, DropFlushed)
		}
		f.list, f.next = fqIdle, nil
	}
	fq.newList, fq.oldList = flowList{}, flowList{}
	fq.n, fq.bytes = 0, 0
	publishBacklog(fq.c, 0, 0)
}
