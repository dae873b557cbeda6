package topology

import (
	"time"

	"github.com/netjam/netjam/impair"
)

// Source is where packets enter the graph from outside it (a host's
// output, a device's read loop): a node without input whose owner pushes
// into it.
type Source struct {
	name  string
	emits Emits
	out   Port
}

// NewSource returns a source from which e may leave.
func NewSource(name string, e Emits) *Source { return &Source{name: name, emits: e} }

// Node returns the source as a node of a graph.
func (s *Source) Node() Node { return Node{Name: s.name, Out: &s.out, Emits: s.emits} }

// Push puts p into the graph at now; safe on any goroutine, as every
// edge is (a node with state of its own, a direction, takes packets
// through a channel).
func (s *Source) Push(now time.Time, p *impair.Packet) { s.out.Push(now, p) }

// SinkFunc is a function as the input of a node: where packets leave the
// graph (a host taking them, a device writing them). It owns each packet
// it is given.
type SinkFunc func(now time.Time, p *impair.Packet)

// Push calls f.
func (f SinkFunc) Push(now time.Time, p *impair.Packet) { f(now, p) }
