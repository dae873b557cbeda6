package topology

import (
	"time"

	"github.com/netjam/netjam/clock"
	"github.com/netjam/netjam/impair"
)

// Direction is one direction of a link (an impair.Runner: its chain of
// stages on a goroutine of its own) as a node. It takes GSO packets whole
// while its stages can decide on their segments inside
// (impair.Runner.TakesSegments, which a live change may turn either way),
// so the builder puts a conditional split in front of it, on the sender's
// goroutine.
//
// What leaves the direction in one pass of its runner leaves at one
// moment of real time; the merging queues behind it (Compile finds them)
// hold it until the pass ends, so that it reaches the node behind them
// together, as one batch, and its segments merge.
type Direction struct {
	r   *impair.Runner
	out Port
	// held are the merging queues this direction feeds; passing says the
	// current pass delivered and holds them. Both are the runner's
	// goroutine's (held is set by Compile, before Start).
	held    []*Queue
	passing bool
}

// NewDirection builds the direction cfg describes, on clk.
func NewDirection(cfg impair.Config, clk clock.Clock) (*Direction, error) {
	d := &Direction{}
	r, err := impair.NewRunner(cfg, clk, d.deliver)
	if err != nil {
		return nil, err
	}
	r.AfterPass(d.passed)
	d.r = r
	return d, nil
}

// deliver hands on what leaves the direction; the first packet of a pass
// holds the merging queues behind it.
func (d *Direction) deliver(now time.Time, p *impair.Packet) {
	if !d.passing && len(d.held) > 0 {
		d.passing = true
		for _, q := range d.held {
			q.hold()
		}
	}
	d.out.Push(now, p)
}

// passed ends a pass: the queues it held hand on what it delivered.
func (d *Direction) passed() {
	if !d.passing {
		return
	}
	d.passing = false
	for _, q := range d.held {
		q.release()
	}
}

// Runner returns the direction's runner: its statistics and its live
// settings (Set).
func (d *Direction) Runner() *impair.Runner { return d.r }

// Node returns the direction as a node of a graph, named after its
// chain.
func (d *Direction) Node() Node {
	return Node{Name: d.r.Chain().Name(), In: d, Out: &d.out, Life: d.r,
		Accepts: Accepts{GSO: Varies, Whole: d.r.TakesSegments, Partial: true}}
}

// Push hands p to the direction at the clock's time (see
// impair.Runner.Send); a full input drops it, counted.
func (d *Direction) Push(_ time.Time, p *impair.Packet) { d.r.Send(p) }
