package impair

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"
)

// Live changes: a direction's settings change between two packets, on the
// goroutine that owns the chain, and keep what it holds. As with netem's
// `tc change`:
//   - loss, duplication and corruption apply from the next packet;
//   - a new rate applies from the next packet put on the wire (the one on
//     it finishes at the old rate); the queue keeps its packets. A rate
//     lifted to unlimited drains the queue at once;
//   - a new delay, jitter or reordering applies to packets that enter the
//     delay line from then on; those in it leave when they were due (in
//     order-keeping mode no packet overtakes one ahead of it);
//   - a stage a change brings in starts empty; one a change takes out
//     stays in place, doing nothing, so that what it holds still leaves.
// Random decisions after a change draw from new streams, derived from the
// seed and the number of changes so far: the same changes at the same
// moments repeat the same decisions.
//
// What cannot change while the direction runs is refused with an error
// saying so: the queue discipline and its settings other than the limits
// (a smaller limit drops the excess at once, see queue_limits.go), slots,
// the input limit and the name. A rate trace may come and go: it starts
// at the change.

// maxLiveRate stands for "unlimited" once a direction had a rate: its
// bottleneck stays and sends at 1 Tbit/s (12 ns per 1500-byte packet).
const maxLiveRate = 1_000_000_000_000

// Set changes the chain to cfg now, keeping the packets it holds. It must
// be called where Arrive and Advance are (the Runner's goroutine; see
// Runner.Set). On error nothing changed.
func (c *Chain) Set(cfg Config) error {
	// Check everything first: a refused change changes nothing.
	if err := c.canSet(cfg); err != nil {
		return err
	}
	c.changes++
	stream := c.name + "#" + strconv.Itoa(c.changes)
	rnd := func(stage string) *rand.Rand { return newRand(cfg.Seed, stream, stage) }
	stages := c.setChances(cfg, rnd)
	live := cfg
	live.Name = stream
	if b, _ := c.stage("queue").(*bottleneck); b != nil {
		b.set(cfg, c.now)
		stages = append(stages, b)
	} else if cfg.Rate.limited() {
		nb := newBottleneck(live)
		if cfg.Rate.Trace != nil {
			nb.switchTrace(cfg.Rate.Trace, c.now) // from the change on
		}
		stages = append(stages, nb)
	}
	if g := c.stage("slot"); g != nil {
		stages = append(stages, g)
	} else if cfg.Slot.enabled() {
		stages = append(stages, newSlotGate(live))
	}
	if d, _ := c.stage("delay").(*delayLine); d != nil {
		d.set(live)
		stages = append(stages, d)
	} else if cfg.Delay.Time > 0 || cfg.Delay.Jitter > 0 || cfg.Reorder.P > 0 {
		stages = append(stages, newDelayLine(live))
	}
	c.install(stages)
	c.keep.Store(cfg.TakesSegments())
	c.loses.Store(cfg.Loses())
	c.cfg.Store(&cfg)
	return nil
}

// stage returns the chain's stage of that name, or nil.
func (c *Chain) stage(name string) Stage {
	for _, s := range c.stages {
		if s.Name() == name {
			return s
		}
	}
	return nil
}

// canSet says why the chain cannot take cfg while it runs, or nil.
func (c *Chain) canSet(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("impair: direction %q: %w", cfg.Name, err)
	}
	if cfg.Name != c.name {
		return fmt.Errorf("impair: direction %q: cannot become %q", c.name, cfg.Name)
	}
	if b, _ := c.stage("queue").(*bottleneck); b != nil {
		if err := b.canSet(cfg); err != nil {
			return err
		}
	}
	if g, _ := c.stage("slot").(*slotGate); g != nil && g.cfg != cfg.Slot {
		return errors.New("impair: slots cannot change while the direction runs")
	}
	if d, _ := c.stage("delay").(*delayLine); d != nil && d.cfg.AllowReorder != cfg.Delay.AllowReorder && d.len() > 0 {
		return errors.New("impair: reordering by jitter cannot be switched while packets are in the delay line")
	}
	return nil
}

// setChances returns the loss, duplication and corruption stages of cfg,
// in order: the chain's own with new random streams (rnd), or new ones
// for those cfg brings in.
func (c *Chain) setChances(cfg Config, rnd func(stage string) *rand.Rand) []Stage {
	var stages []Stage
	if s, ok := c.stage("loss").(*lossStage); ok {
		s.gen = newLossGen(cfg.Loss, rnd("loss"))
		stages = append(stages, s)
	} else if cfg.Loss.Model != LossNone {
		stages = append(stages, newLossStage(cfg.Loss, rnd("loss")))
	}
	if s, ok := c.stage("duplicate").(*duplicateStage); ok {
		s.chance = newChance(cfg.Duplicate, rnd("duplicate"))
		stages = append(stages, s)
	} else if cfg.Duplicate.P > 0 {
		stages = append(stages, newDuplicateStage(cfg.Duplicate, rnd("duplicate")))
	}
	if s, ok := c.stage("corrupt").(*corruptStage); ok {
		r := rnd("corrupt")
		s.chance, s.rng = newChance(cfg.Corrupt, r), r
		stages = append(stages, s)
	} else if cfg.Corrupt.P > 0 {
		stages = append(stages, newCorruptStage(cfg.Corrupt, rnd("corrupt")))
	}
	return stages
}

// newLossGen is the loss decisions of cfg; never a loss for LossNone.
func newLossGen(cfg LossConfig, r *rand.Rand) lossGen {
	if cfg.Model == LossNone {
		cfg = LossConfig{Model: LossRandom}
	}
	return newLossStage(cfg, r).(*lossStage).gen
}

// canSet says why the bottleneck cannot take cfg while it runs.
func (b *bottleneck) canSet(cfg Config) error {
	q, old := cfg.Queue, b.qcfg
	q.LimitPackets, q.LimitBytes = old.LimitPackets, old.LimitBytes
	if q != old {
		return errors.New("impair: the queue's discipline and its settings other than the limits cannot change while the direction runs")
	}
	return nil
}

// set takes cfg's rate from the next packet put on the wire (the part
// of a GSO packet on it, at most clock.Slack of transmission, finishes
// at the old rate, see start), and its queue limits at once (see queue_limits.go). A trace that cfg brings in
// (a handover from a fixed rate to a recorded cellular link, or from one
// trace to another) starts at now, as mm-link starts its trace when the
// link comes up; the same trace again (Trace.Same) goes on where it is.
func (b *bottleneck) set(cfg Config, now time.Time) {
	b.sync(now)
	if cfg.Queue != b.qcfg {
		b.qcfg = cfg.Queue
		b.q.(limitSetter).setLimits(limitsOf(cfg.Queue))
	}
	if !cfg.Rate.Trace.Same(b.rate.Trace) {
		b.switchTrace(cfg.Rate.Trace, now)
	}
	b.rate = cfg.Rate
	if !b.rate.limited() {
		b.rate.Bitrate = maxLiveRate
	}
	b.rem = 0
}

// set takes cfg's delay, jitter and reordering for the packets that enter
// from now on.
func (d *delayLine) set(cfg Config) {
	d.cfg, d.limit, d.jit, d.reorder = cfg.Delay, inflightLimit(cfg), nil, nil
	if cfg.Delay.Jitter > 0 {
		d.jit = newJitter(cfg.Delay, newRand(cfg.Seed, cfg.Name, "jitter"))
	}
	if cfg.Reorder.P > 0 {
		d.reorder = newReorderer(cfg, newRand(cfg.Seed, cfg.Name, "reorder"))
	}
}
