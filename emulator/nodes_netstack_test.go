package emulator

import (
	"math"
	"testing"
)

// TestVirtualNetstackNodes runs three netstack nodes on the virtual
// clock, each behind a link of its own (5, 10 and 20 ms each way), a and
// b also joined by a link of their own (2 ms): no root, no device. A UDP
// flow from a to b crosses ab (2 ms one way), one from a to c the star
// (5 + 20 ms), one from the client side to c c's link (20 ms), and a TCP
// flow from the client side reaches a. A partition [[a], [b]] from 1 s
// to 2 s drops a's datagrams to b for that second, and nothing else.
func TestVirtualNetstackNodes(t *testing.T) {
	dir, _ := runVirtualInto(t, `
name: netstack-nodes
clock: virtual
seed: 1
duration: 3s
links:
  - {name: la, delay: 5ms}
  - {name: lb, delay: 10ms}
  - {name: lc, delay: 20ms}
  - {name: ab, between: [a, b], delay: 2ms}
nodes:
  - {name: a, stack: netstack, link: la}
  - {name: b, stack: netstack, link: lb}
  - {name: c, stack: netstack, link: lc}
flows:
  - {name: a-b, type: udp, from: a, node: b, interval: 10ms, duration: 3s}
  - {name: a-c, type: udp, from: a, node: c, interval: 10ms, duration: 3s}
  - {name: client-c, type: udp, node: c, interval: 10ms, duration: 3s}
  - {name: to-a, type: tcp, node: a, size: 1MB}
timeline:
  - {at: 1s, for: 1s, partition: [[a], [b]]}
`)
	sum := readSummary(t, dir)
	r := sum.Runs[0]
	for _, c := range []struct {
		flow       string
		delayMs    float64
		lost, slop uint64
	}{{"a-b", 2, 100, 1}, {"a-c", 25, 0, 0}, {"client-c", 20, 0, 0}} {
		var found bool
		for _, f := range r.Flows {
			if f.Name != c.flow {
				continue
			}
			found = true
			u := f.UDPSummary
			t.Logf("%s: %d sent, %d lost, one-way delay p50 %.3f ms", f.Name, u.PacketsSent, u.Lost, u.DelayMs.P50)
			if math.Abs(u.DelayMs.P50-c.delayMs) > 0.01 {
				t.Errorf("%s: one-way delay p50 %.3f ms, want %.0f (its links')", f.Name, u.DelayMs.P50, c.delayMs)
			}
			if u.Lost+c.slop < c.lost || u.Lost > c.lost+c.slop {
				t.Errorf("%s: %d lost, want %d (the partition's second, at 10 ms a datagram), give or take %d", f.Name, u.Lost, c.lost, c.slop)
			}
		}
		if !found {
			t.Errorf("no flow %s", c.flow)
		}
	}
	for _, f := range r.Flows {
		if f.Name == "to-a" && f.ThroughputBps == 0 {
			t.Errorf("the TCP flow to a carried nothing")
		}
	}
	if r.PartitionDrops < 99 || r.PartitionDrops > 101 {
		t.Errorf("partition drops %d, want 100", r.PartitionDrops)
	}
}
