package impair

import (
	"math/rand/v2"
	"time"
)

// lossStage drops packets at random, by one of netem's loss models. It
// decides on each packet as it arrives and holds none.
//
// Every model draws a fixed number of random numbers per packet, whatever
// the outcome (Random: one, Gilbert-Elliott: two, 4-state: one), so the
// decision for packet n depends only on the seed and n.
//
// A GSO packet's segments are decided one by one, in order, as if they
// came apart: the packet goes on whole when none is lost, and is split
// otherwise, its lost segments dropped and the others forwarded.
type lossStage struct {
	passive
	gen lossGen
	// fates holds the fate of each segment of the GSO packet being
	// decided: -1 kept, otherwise why it is lost (a DropReason). Its
	// capacity grows to the most segments seen (at most 65535).
	fates []int8
	cut   lossCut
}

// lossCut is the sink a split GSO packet's segments go through: each
// meets the fate drawn for it.
type lossCut struct {
	s   *lossStage
	out Sink
	i   int
}

func (c *lossCut) Push(now time.Time, p *Packet) {
	f := c.s.fates[c.i]
	c.i++
	if f >= 0 {
		c.s.c.drop(p, DropReason(f))
		return
	}
	c.s.forward(now, p, c.out)
}

// lossGen decides the fate of successive packets: lost, and if so for
// which reason.
type lossGen interface {
	lose() (r DropReason, lost bool)
}

// newLossStage returns the loss stage of cfg drawing from rng. cfg.Model
// must not be LossNone: the chain leaves the stage out then.
func newLossStage(cfg LossConfig, rng *rand.Rand) Stage {
	s := &lossStage{}
	switch cfg.Model {
	case LossGE:
		s.gen = newGilbertElliott(cfg, rng)
	case LossState:
		s.gen = newFourState(cfg, rng)
	default: // LossRandom
		s.gen = &randomLoss{newChance(Chance{P: cfg.P, Correlation: cfg.Correlation}, rng)}
	}
	return s
}

func (*lossStage) Name() string { return "loss" }

func (s *lossStage) Push(now time.Time, p *Packet, out Sink) {
	s.c.in(p)
	if p.segs == 0 {
		if r, lost := s.gen.lose(); lost {
			s.c.drop(p, r)
			return
		}
		s.forward(now, p, out)
		return
	}
	s.fates = s.fates[:0]
	lost := false
	for range p.segs {
		f := int8(-1)
		if r, l := s.gen.lose(); l {
			f, lost = int8(r), true
		}
		s.fates = append(s.fates, f)
	}
	if !lost {
		s.forward(now, p, out)
		return
	}
	s.cut = lossCut{s: s, out: out}
	segmentPool.SplitTo(now, p, &s.cut)
}

// randomLoss is netem's "loss random P [CORR]": independent losses, or with
// correlation the exact-mean Markov chain of chance (not netem's averaging,
// which lowers the loss rate below P).
type randomLoss struct{ c chance }

func (l *randomLoss) lose() (DropReason, bool) { return DropLoss, l.c.next() }

// gilbertElliott is netem's "loss gemodel p r 1-h 1-k": a two-state Markov
// chain, Good and Bad, each with its own loss probability.
//
// The order of a packet's steps follows netem's loss_gilb_ell
// (net/sched/sch_netem.c): the packet's fate is decided by the state it
// finds on arrival (1-k in Good, 1-h in Bad), and the transition it makes
// (Good→Bad with p, Bad→Good with r) applies from the next packet on. That
// is the textbook form of the model (the state of packet n emits its loss,
// then moves), and following netem keeps the four numbers meaning what they
// mean there, packet by packet: with p = 1 the first packet is still judged
// by Good. (Judging each packet by the state it moves to instead would keep
// the loss rate πG·(1-k) + πB·(1-h), πB = p/(p+r), but shift every bad
// period one packet earlier.) netem draws the transition number first and
// the loss number second, comparing the second with the loss probability
// of the state before the transition; we draw in the same order, two
// numbers per packet whatever happens.
//
// Losses in Good count as DropLoss, losses in Bad as DropBurst.
type gilbertElliott struct {
	rng                     *rand.Rand
	bad                     bool
	p, r, lossGood, lossBad float64
}

// newGilbertElliott starts in Good, as netem does.
func newGilbertElliott(cfg LossConfig, rng *rand.Rand) *gilbertElliott {
	return &gilbertElliott{
		rng:      rng,
		p:        cfg.P,
		r:        cfg.R,
		lossGood: cfg.OneMinusK,
		lossBad:  cfg.OneMinusH,
	}
}

func (g *gilbertElliott) lose() (DropReason, bool) {
	move, fate := g.rng.Float64(), g.rng.Float64()
	if g.bad {
		g.bad = move >= g.r
		return DropBurst, fate < g.lossBad
	}
	g.bad = move < g.p
	return DropLoss, fate < g.lossGood
}

// States of the 4-state model, numbered as in Salsano et al. and netem's
// man page.
const (
	gapRx     = 1 // good reception within a gap
	burstRx   = 2 // good reception within a burst
	burstLoss = 3 // loss within a burst
	gapLoss   = 4 // isolated loss within a gap
)

// fourState is netem's "loss state p13 p31 p32 p23 p14": the 4-state Markov
// model of S. Salsano, F. Ludovici, A. Ordine, "Definition of a general and
// intuitive loss model for packet networks and its implementation in the
// Netem module in the Linux kernel" (NetemCLG technical report, University
// of Rome Tor Vergata), also in tc-netem(8). Each packet moves the chain
// one step and is lost when the state it moves to is a loss state:
//
//	1 → 3 p13, 1 → 4 p14, else stays in 1
//	2 → 3 p23, else stays in 2
//	3 → 1 p31, 3 → 2 p32, else stays in 3 (DropBurst)
//	4 → 1 always (4 is DropLoss)
//
// so a gap (1) is broken by isolated losses (4) or opens a burst (3), in
// which lost (3) and received (2) packets alternate until it returns to 1.
//
// This is the documented model. netem's loss_4state computes it today
// except on ties: it compares its integer random number with the
// thresholds strictly on both sides (rnd < a, then a < rnd), so a draw
// equal to a threshold (chance 2^-32 each) leaves the state unchanged and
// delivers the packet whatever the state; a recent patch makes the
// comparisons exhaustive. Older kernels disagreed more: the original 2011
// code went 1 → 3 with p13-p14 instead of p13 (it compared with p13, not
// p14+p13) and counted the 3 → 1 step as a loss; later kernels had the
// names of states 3 and 4 swapped (harmless to the numbers). We implement
// the model: one uniform draw against the cumulative probabilities of the
// current state's exits, every draw landing in exactly one outcome.
type fourState struct {
	rng                     *rand.Rand
	state                   uint8
	p13, p14, p23, p31, p32 float64
}

// newFourState starts in state 1, as netem does.
func newFourState(cfg LossConfig, rng *rand.Rand) *fourState {
	return &fourState{
		rng:   rng,
		state: gapRx,
		p13:   cfg.P13, p14: cfg.P14, p23: cfg.P23, p31: cfg.P31, p32: cfg.P32,
	}
}

func (m *fourState) lose() (DropReason, bool) {
	u := m.rng.Float64()
	switch m.state {
	case gapRx:
		switch {
		case u < m.p14:
			m.state = gapLoss
		case u < m.p14+m.p13:
			m.state = burstLoss
		}
	case burstRx:
		if u < m.p23 {
			m.state = burstLoss
		}
	case burstLoss:
		switch {
		case u < m.p32:
			m.state = burstRx
		case u < m.p32+m.p31:
			m.state = gapRx
		}
	case gapLoss:
		m.state = gapRx
	}
	switch m.state {
	case burstLoss:
		return DropBurst, true
	case gapLoss:
		return DropLoss, true
	}
	return 0, false
}
