package emulator

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/netjam/netjam/impair"
	"github.com/netjam/netjam/summary"
)

// TestLabSendersHeldBackLoseNothing runs a TCP flow each way (reno,
// whose window grows until the machine is the limit) over a path whose
// rate, 10 Gbit/s, decides per packet and is faster than the machine,
// with inputs of 64 packets: each sending host outruns the direction it
// sends into many times over. Its TCP must be held back at the full
// input (Linux's TCP Small Queues) rather than lose packets there: no
// input drops, and the run ends (each host's TCP waits for a direction
// while its inbox takes the other direction's packets: a cycle of waits,
// were an inbox to wait, would hang it).
//
// The bound on the run's end: its duration, drainGrace, and what closing
// takes; a lab closes in well under a second (TestLabRunEnds...), so a
// run not over 10 s past its duration hangs.
func TestLabSendersHeldBackLoseNothing(t *testing.T) {
	res := runHeld(t, context.Background())
	if res.err != nil {
		t.Fatal(res.err)
	}
	r := res.sum.Runs[0]
	for _, l := range r.Links {
		if n := l.Drops[impair.DropInput.String()]; n > 0 {
			t.Errorf("%s: %d input drops; want none (drops %v)", l.Name, n, l.Drops)
		}
		// Delivery drops (an inbox full for 100 ms: a receiving host
		// descheduled that long) are TestLabCleanPathLosesNothing's.
		t.Logf("%s: senders held back %d times, %d delivery drops", l.Name, l.InputWaits, l.DeliveryDrops)
	}
	for _, name := range []string{"up", "down"} {
		f := flowByName(t, r, name)
		if f.BytesReceived == 0 {
			t.Errorf("flow %s: nothing arrived", name)
		}
		t.Logf("%s: %.0f Mbit/s, %d retransmissions", name, f.ThroughputBps/1e6, f.Retransmissions)
	}
}

// TestLabHeldSendersLetGoWhenInterrupted interrupts the same run half way:
// the directions stop taking packets, and the senders they hold back
// must be let go (they hold gVisor's endpoint locks, which closing the
// connections takes), or the run never ends.
func TestLabHeldSendersLetGoWhenInterrupted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	runHeld(t, ctx) // its error, if any, is the interruption's
}

// heldResult is what runHeld's run returned.
type heldResult struct {
	sum *summary.Summary
	err error
}

// runHeld runs a TCP flow each way for 2 s over 10 Gbit/s directions
// whose inputs hold 64 packets, and fails the test if the run does not
// end (see TestLabSendersHeldBackLoseNothing for the bound).
func runHeld(t *testing.T, ctx context.Context) heldResult {
	t.Helper()
	const dur = 2 * time.Second
	p := mustPlan(t, `
duration: 2s
link: {rate: 10Gbps, delay: 1ms, queue: 10000}
flows:
  - {name: up, type: tcp, cc: reno, duration: 2s}
  - {name: down, type: tcp, cc: reno, direction: down, duration: 2s}
`)
	s := p.Runs[0]
	for i := range s.Links {
		s.Links[i].Uplink.InputLimit, s.Links[i].Downlink.InputLimit = 64, 64
	}
	done := make(chan heldResult, 1)
	go func() {
		sum, err := Run(ctx, p, Options{})
		done <- heldResult{sum, err}
	}()
	select {
	case res := <-done:
		return res
	case <-time.After(dur + drainGrace + 10*time.Second):
		buf := make([]byte, 1<<20)
		t.Fatalf("the run did not end: a cycle of waits?\n%s", buf[:runtime.Stack(buf, true)])
		return heldResult{}
	}
}
