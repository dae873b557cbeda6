package topology_test

import (
	"context"
	"testing"
	"time"

	"github.com/netjam/netjam/clock"
	"github.com/netjam/netjam/impair"
	"github.com/netjam/netjam/netif"
	"github.com/netjam/netjam/topology"
)

// mayWaitSink records whether each packet reaching it may still wait.
type mayWaitSink struct{ got chan bool }

func (s mayWaitSink) Push(_ time.Time, p *impair.Packet) {
	s.got <- p.MayWait()
	p.Release()
}

// CopyHeld marks what it puts into the graph as a held sender's; Copy
// does not; a queue, handing packets to its own goroutine, clears the
// mark.
func TestSourceCopyHeldMarksItsPackets(t *testing.T) {
	for _, c := range []struct {
		name   string
		held   bool
		queued bool
		want   bool
	}{{"copy", false, false, false}, {"held", true, false, true}, {"held through a queue", true, true, false}} {
		t.Run(c.name, func(t *testing.T) {
			var g topology.Graph
			src := topology.NewSource("host", topology.Emits{}, pool, big)
			out := mayWaitSink{make(chan bool, 1)}
			from := g.Add(src.Node())
			if c.queued {
				q := g.Add(topology.NewQueue("inbox", 4, 1<<20, time.Second).Node())
				g.Link(from, q)
				from = q
			}
			g.Link(from, g.Add(topology.Node{Name: "end", In: out, Accepts: topology.Accepts{GSO: topology.Yes}}))
			n := mustCompile(t, &g)
			n.Start(context.Background())
			defer n.Close()
			b := segment(server, 100, 1, 1)
			if c.held {
				src.CopyHeld(t0, [][]byte{b}, netif.GSO{})
			} else {
				src.Copy(t0, [][]byte{b}, netif.GSO{})
			}
			if got := <-out.got; got != c.want {
				t.Errorf("MayWait %v at the end, want %v", got, c.want)
			}
		})
	}
}

// A held sender's GSO packet split in front of a direction that decides
// per packet: its segments keep the mark, so the sender waits at the
// direction's input (8 packets, its share for waiting senders 6) rather
// than losing segments there, and every segment arrives.
func TestHeldSplitSegmentsWaitAtAFullDirection(t *testing.T) {
	clk := clock.NewManual()
	var g topology.Graph
	src := topology.NewSource("host", topology.Emits{GSO: true}, pool, big)
	d := direction(t, impair.Config{Name: "up", Duplicate: impair.Chance{P: 1e-9}, InputLimit: 8}, clk)
	out := newSink("server", mtuChecked)
	g.Chain(g.Add(src.Node()), g.Add(d.Node()), g.Add(out.Node()))
	n := mustCompile(t, &g)
	defer n.Close()
	// Not started: nothing takes the input yet.
	first := gso(server, 6, 100, false)
	first.SetMayWait(true)
	src.Push(t0, first) // 6 segments fill the share
	second := gso(server, 3, 100, false)
	second.SetMayWait(true)
	pushed := make(chan struct{})
	go func() {
		defer close(pushed)
		src.Push(t0, second)
	}()
	waitFor(t, "the sender to wait", func() bool { return d.Runner().Stats().InputWaits == 1 })
	n.Start(context.Background())
	<-pushed
	waitFor(t, "every segment", func() bool { return len(out.seen()) == 9 })
	if st := d.Runner().Stats(); st.Drops[impair.DropInput.String()] != 0 {
		t.Errorf("input drops %v; want none", st.Drops)
	}
}
