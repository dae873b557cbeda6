package impair

import "math/rand/v2"

// reorderer is netem's "reorder P [corr] gap G": after every G-1 packets
// that take the normal delay, the next one is sent at once (past the delay
// line, so ahead of the packets still in it) with probability P. With G = 1
// every packet is a candidate. Reordering needs a delay to overtake: without
// one a packet sent "at once" is simply in order.
type reorderer struct {
	gap, counter int
	ch           chance
}

func newReorderer(cfg Config, rng *rand.Rand) *reorderer {
	gap := cfg.Reorder.Gap
	if gap < 1 {
		gap = 1
	}
	return &reorderer{gap: gap, ch: newChance(Chance{P: cfg.Reorder.P, Correlation: cfg.Reorder.Correlation}, rng)}
}

// next reports whether the next packet skips the delay. As in netem, the
// random draw happens only for packets at the end of a gap.
func (r *reorderer) next() bool {
	if r.counter >= r.gap-1 && r.ch.next() {
		r.counter = 0
		return true
	}
	r.counter++
	return false
}
