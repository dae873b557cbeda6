package impair

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/netjam/netjam/stats"
)

// Chain is one direction of the emulated path as a discrete-event
// simulation: packets enter with Arrive, the caller moves time with
// Advance, and packets leave through the deliver function at their exact
// logical departure times.
//
// A Chain is not safe for concurrent use; Runner gives it a goroutine.
// Stats may be called from any goroutine.
type Chain struct {
	name    string
	stages  []Stage
	timed   []int // indices of the stages that can hold packets, last first
	hops    []hop // hops[i] feeds stages[i]; hops[len(stages)] is the exit
	deliver func(now time.Time, p *Packet)

	now  time.Time // logical time of the latest event processed
	wall time.Time // when set (by Runner), the clock reading lateness is measured against

	keep    atomic.Bool // GSO packets enter whole (Config.TakesSegments); Set may change it
	loses   atomic.Bool // a stage drops or spoils packets by chance (Config.Loses); Set may change it
	changes int         // how many times Set changed the chain
	pending []Change    // scheduled changes in time order (SetAt)
	// pub is stages for other goroutines (Stats, Drops, Stages): Set
	// replaces the chain's own slice, never this one's contents.
	pub     atomic.Pointer[[]Stage]
	cfg     atomic.Pointer[Config] // the settings in force (NewChain's, then Set's)
	io      Counters               // packets into and out of the whole direction
	transit stats.Histogram        // time from Arrive to delivery, ns
	late    stats.Histogram        // delivery lateness of a Runner behind the logical time, ns
}

// hop is the Sink in front of a stage (or, past the last one, the exit).
type hop struct {
	c *Chain
	i int
}

func (h *hop) Push(now time.Time, p *Packet) {
	c := h.c
	if h.i == len(c.stages) {
		c.exit(now, p)
		return
	}
	c.stages[h.i].Push(now, p, &c.hops[h.i+1])
}

// NewChain builds the direction cfg describes. deliver receives each packet
// that leaves the direction, with its departure time; it owns the packet
// and must Release it. deliver runs on the goroutine that calls Arrive or
// Advance and must not call back into the Chain.
func NewChain(cfg Config, deliver func(now time.Time, p *Packet)) (*Chain, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("impair: direction %q: %w", cfg.Name, err)
	}
	c := &Chain{name: cfg.Name, deliver: deliver}
	c.keep.Store(cfg.TakesSegments())
	c.loses.Store(cfg.Loses())
	c.cfg.Store(&cfg)
	var stages []Stage
	if cfg.Loss.Model != LossNone {
		stages = append(stages, newLossStage(cfg.Loss, newRand(cfg.Seed, cfg.Name, "loss")))
	}
	if cfg.Duplicate.P > 0 {
		stages = append(stages, newDuplicateStage(cfg.Duplicate, newRand(cfg.Seed, cfg.Name, "duplicate")))
	}
	if cfg.Corrupt.P > 0 {
		stages = append(stages, newCorruptStage(cfg.Corrupt, newRand(cfg.Seed, cfg.Name, "corrupt")))
	}
	if cfg.Rate.limited() {
		stages = append(stages, newBottleneck(cfg))
	}
	if cfg.Slot.enabled() {
		stages = append(stages, newSlotGate(cfg))
	}
	if cfg.Delay.Time > 0 || cfg.Delay.Jitter > 0 || cfg.Reorder.P > 0 {
		stages = append(stages, newDelayLine(cfg))
	}
	c.install(stages)
	return c, nil
}

// install makes stages the chain's, in packet order, and publishes them.
func (c *Chain) install(stages []Stage) {
	c.stages = stages
	c.hops = make([]hop, len(stages)+1)
	for i := range c.hops {
		c.hops[i] = hop{c: c, i: i}
	}
	c.timed = c.timed[:0:0]
	for i := len(stages) - 1; i >= 0; i-- {
		if _, ok := stages[i].(interface{ isPassive() }); !ok {
			c.timed = append(c.timed, i)
		}
	}
	pub := stages
	c.pub.Store(&pub)
}

// Config returns the settings in force: NewChain's, or those of the
// latest Set (a scheduled change's once it applied). Safe from any
// goroutine.
func (c *Chain) Config() Config { return *c.cfg.Load() }

// Name returns the direction's name.
func (c *Chain) Name() string { return c.name }

// Stages returns the chain's stages in packet order; safe on any
// goroutine (a Set after it does not change the slice returned).
func (c *Chain) Stages() []Stage { return *c.pub.Load() }

// Now returns the logical time of the latest event the chain processed.
func (c *Chain) Now() time.Time { return c.now }

// Arrive processes every event due up to t, then admits p at t. A t
// earlier than the chain's time is taken as the chain's time: senders on
// other goroutines may stamp packets a little out of order.
func (c *Chain) Arrive(t time.Time, p *Packet) {
	if t.Before(c.now) {
		t = c.now
	}
	c.Advance(t)
	if p.segs > 0 && !c.keep.Load() {
		// The sender should have split it (see Runner.TakesSegments);
		// segments from p's own pool then.
		segmentPool.Split(p, func(s *Packet) { c.admit(t, s) })
		return
	}
	c.admit(t, p)
}

func (c *Chain) admit(t time.Time, p *Packet) {
	p.Arrival = t
	c.io.in(p)
	c.hops[0].Push(t, p)
}

// Loses reports whether a stage of the direction drops or spoils packets
// by chance (Config.Loses); safe on any goroutine.
func (c *Chain) Loses() bool { return c.loses.Load() }

// TakesSegments reports whether GSO packets enter the direction whole
// (Config.TakesSegments); when not, senders split them first
// (Pool.Split).
func (c *Chain) TakesSegments() bool { return c.keep.Load() }

// Advance processes, in time order, every event due at or before t. Events
// at the same instant run downstream first, so a departure frees its room
// before an arrival at the same instant takes it; a scheduled change
// (SetAt) runs before the packet events of its instant.
func (c *Chain) Advance(t time.Time) {
	for {
		idx := -1
		var best time.Time
		for _, i := range c.timed {
			if nt, ok := c.stages[i].Next(); ok && !nt.After(t) && (idx < 0 || nt.Before(best)) {
				idx, best = i, nt
			}
		}
		if len(c.pending) > 0 && !c.pending[0].At.After(t) && (idx < 0 || !c.pending[0].At.After(best)) {
			c.applyNext()
			continue
		}
		if idx < 0 {
			break
		}
		if best.After(c.now) {
			c.now = best
		}
		c.stages[idx].Wake(best, &c.hops[idx+1])
	}
	if t.After(c.now) {
		c.now = t
	}
}

// Next returns the time of the chain's next event, a packet's or a
// scheduled change's; ok is false when it holds neither.
func (c *Chain) Next() (t time.Time, ok bool) {
	if len(c.pending) > 0 {
		t, ok = c.pending[0].At, true
	}
	for _, i := range c.timed {
		if nt, has := c.stages[i].Next(); has && (!ok || nt.Before(t)) {
			t, ok = nt, true
		}
	}
	return t, ok
}

func (c *Chain) exit(now time.Time, p *Packet) {
	c.io.out(p)
	c.transit.RecordDuration(now.Sub(p.Arrival))
	if !c.wall.IsZero() {
		c.late.RecordDuration(c.wall.Sub(now))
	}
	c.deliver(now, p)
}

// Flush drops every packet the chain holds, counting them as DropFlushed.
func (c *Chain) Flush() {
	for _, s := range c.stages {
		s.Flush()
	}
}

// Counters returns the direction's own counters: packets into and out of
// the whole chain, and the input drops of a Runner. Safe at any time.
func (c *Chain) Counters() *Counters { return &c.io }

// Drops returns how many packets were dropped for reason r so far, by any
// stage or at the input. Safe at any time; it allocates nothing.
func (c *Chain) Drops(r DropReason) uint64 {
	n := c.io.Drops[r].Load()
	for _, s := range *c.pub.Load() {
		n += s.Counters().Drops[r].Load()
	}
	return n
}

// Stats is a point-in-time report of one direction.
type Stats struct {
	Name       string            `json:"name"`
	InPackets  uint64            `json:"packets_in"`
	InBytes    uint64            `json:"bytes_in"`
	OutPackets uint64            `json:"packets_out"`
	OutBytes   uint64            `json:"bytes_out"`
	Drops      map[string]uint64 `json:"drops"`
	// WholeGSO counts the large TCP segments (segmentation offload) that
	// crossed the direction whole; their segments are in the packets.
	WholeGSO uint64 `json:"whole_gso,omitempty"`
	// Transit is the time packets spent in the direction (ns): queueing,
	// serialization, slot wait and delay.
	Transit stats.Summary `json:"transit_ns"`
	// Lateness is how far behind the logical departure time a Runner
	// delivered packets (ns); zero for a Chain driven directly.
	Lateness stats.Summary `json:"lateness_ns"`
	// InputWaits counts the times a Runner held back a sender that may
	// wait, its input full to their share (see Runner.Send): the sender
	// outran the direction, which lost nothing for it.
	InputWaits uint64       `json:"input_waits,omitempty"`
	Stages     []StageStats `json:"stages"`
}

// Stats returns the direction's counters. Drops sums every stage's drops
// by reason, plus the input drops of a Runner.
func (c *Chain) Stats() Stats {
	io := c.io.Snapshot(c.name)
	s := Stats{
		Name:       c.name,
		InPackets:  io.InPackets,
		InBytes:    io.InBytes,
		OutPackets: io.OutPackets,
		OutBytes:   io.OutBytes,
		WholeGSO:   io.WholeGSO,
		Drops:      map[string]uint64{},
		Transit:    c.transit.Snapshot(),
		Lateness:   c.late.Snapshot(),
	}
	for k, v := range io.Drops {
		s.Drops[k] += v
	}
	for _, st := range *c.pub.Load() {
		ss := st.Counters().Snapshot(st.Name())
		for k, v := range ss.Drops {
			s.Drops[k] += v
		}
		s.Stages = append(s.Stages, ss)
	}
	return s
}
