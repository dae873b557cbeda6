package emulator

import (
	"fmt"
	"testing"
	"time"

	"github.com/netjam/netjam/impair"
)

// BenchmarkLabCeiling measures what the lab carries between two netstack
// hosts, MTU 1500, when the flow's window is not the limit: one TCP flow
// (reno: no HyStart, so its window grows until the machine is the limit)
// for 3 s over a path of 1 ms each way, with no rate, then with a rate of
// 10 Gbit/s (a stage that decides per packet: every segment split and
// handed to the receiving host on its own). It reports Gbit/s, netjam's
// CPU seconds per second, the packets dropped inside netjam (delivery
// drops: a receiving host that fell behind; input drops: a sender that
// outran a direction), the times the sender was held back at a full
// input instead (input waits) and its retransmissions. BenchmarkLabCost's rate=unlimited, with CUBIC, measures
// its window's growth rather than this (see docs/accuracy.md).
//
//	go test -run XXX -bench LabCeiling -benchtime 1x ./emulator/
func BenchmarkLabCeiling(b *testing.B) {
	for _, rate := range []string{"unlimited", "10Gbps"} {
		b.Run("rate="+rate, func(b *testing.B) {
			const dur = 3 * time.Second
			y := fmt.Sprintf(`
duration: %v
link: {rate: %s, delay: 1ms, queue: 10000}
flows: [{name: bulk, type: tcp, cc: reno, duration: %v}]
`, dur, rate, dur)
			var cpu, wall time.Duration
			var bps, drops, inDrops, waits, retrans float64
			for b.Loop() {
				r, c, w := measuredRun(b, y)
				cpu, wall = cpu+c, wall+w
				bps += r.Flows[0].ThroughputBps
				retrans += float64(r.Flows[0].Retransmissions)
				for _, l := range r.Links {
					drops += float64(l.DeliveryDrops)
					inDrops += float64(l.Drops[impair.DropInput.String()])
					waits += float64(l.InputWaits)
				}
			}
			n := float64(b.N)
			b.ReportMetric(cpu.Seconds()/wall.Seconds(), "cpu-s/s")
			b.ReportMetric(bps/n/1e9, "Gbit/s")
			b.ReportMetric(drops/n, "delivery-drops")
			b.ReportMetric(inDrops/n, "input-drops")
			b.ReportMetric(waits/n, "input-waits")
			b.ReportMetric(retrans/n, "retransmits")
		})
	}
}
