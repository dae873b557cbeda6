package impair

import (
	"math/rand/v2"
	"time"
)

// Queue holds the packets waiting for the bottleneck's transmitter. A queue
// is owned by its bottleneck and used from the chain's goroutine only.
//
// Queues count into the bottleneck's Counters: drops (DropQueue for
// overflow, DropAQM for discipline decisions), ECN marks, and the QueueLen
// and QueueBytes gauges. The bottleneck itself records sojourn times.
type Queue interface {
	// Enqueue admits p at now; p.Enqueued is already set. A queue over its
	// limits drops p, or older packets for head-drop and FQ-CoDel.
	Enqueue(now time.Time, p *Packet)
	// Dequeue removes the packet to transmit next, at now, or returns nil
	// when the queue is empty. AQM disciplines may drop or mark here.
	Dequeue(now time.Time) *Packet
	// Len and Bytes return the backlog.
	Len() int
	Bytes() int64
	// Flush drops every queued packet as DropFlushed.
	Flush()
}

// newQueue builds the queue a QueueConfig describes, counting into c. rng
// serves PIE's random drops and seeds FQ-CoDel's flow hash.
func newQueue(cfg QueueConfig, c *Counters, rng *rand.Rand) Queue {
	if cfg.LimitPackets == 0 && cfg.LimitBytes == 0 {
		cfg.LimitPackets = DefaultQueueLimit
	}
	switch cfg.Discipline {
	case HeadDrop:
		return newHeadDrop(cfg, c)
	case CoDel:
		return newCoDelQueue(cfg, c)
	case FQCoDel:
		return newFQCoDel(cfg, c, rng)
	case PIE:
		return newPIE(cfg, c, rng)
	default:
		return newDropTail(cfg, c)
	}
}
