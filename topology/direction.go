package topology

import (
	"time"

	"github.com/netjam/netjam/clock"
	"github.com/netjam/netjam/impair"
)

// Direction is one direction of a link (an impair.Runner: its chain of
// stages on a goroutine of its own) as a node. It takes GSO packets whole
// while no stage decides per packet (impair.Runner.KeepsSegments, which a
// live change may turn either way), so the builder puts a conditional
// split in front of it, on the sender's goroutine.
type Direction struct {
	r   *impair.Runner
	out Port
}

// NewDirection builds the direction cfg describes, on clk.
func NewDirection(cfg impair.Config, clk clock.Clock) (*Direction, error) {
	d := &Direction{}
	r, err := impair.NewRunner(cfg, clk, d.out.Push)
	if err != nil {
		return nil, err
	}
	d.r = r
	return d, nil
}

// Runner returns the direction's runner: its statistics and its live
// settings (Set).
func (d *Direction) Runner() *impair.Runner { return d.r }

// Node returns the direction as a node of a graph, named after its
// chain.
func (d *Direction) Node() Node {
	return Node{Name: d.r.Chain().Name(), In: d, Out: &d.out, Life: d.r,
		Accepts: Accepts{GSO: Varies, Whole: d.r.KeepsSegments, Partial: true}}
}

// Push hands p to the direction at the clock's time (see
// impair.Runner.Send); a full input drops it, counted.
func (d *Direction) Push(_ time.Time, p *impair.Packet) { d.r.Send(p) }
