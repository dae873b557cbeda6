package impair

import (
	"math/rand/v2"
	"time"
)

// duplicateStage is netem's "duplicate P [CORR]": it forwards every packet
// and, with the chance, a copy right after it. Copies are counted in
// Counters.Duplicated (and in OutPackets) and are never duplicated again.
//
// Unlike netem, which re-enqueues the copy at the root of the qdisc tree
// where it meets the loss decision again, the copy here is made after the
// loss stage (see the package comment for the order): a packet and its copy
// share one loss decision and then travel independently (queue, delay).
type duplicateStage struct {
	passive
	chance chance
}

// newDuplicateStage returns the duplicate stage of c drawing from rng.
func newDuplicateStage(c Chance, rng *rand.Rand) Stage {
	return &duplicateStage{chance: newChance(c, rng)}
}

func (*duplicateStage) Name() string { return "duplicate" }

func (s *duplicateStage) Push(now time.Time, p *Packet, out Sink) {
	s.c.in(p)
	if !s.chance.next() {
		s.forward(now, p, out)
		return
	}
	// Clone before forwarding: once out has p it may drop and release it
	// (a full queue) before Push returns.
	dup := p.clone()
	s.c.Duplicated.Add(1)
	s.forward(now, p, out)
	s.forward(now, dup, out)
}
