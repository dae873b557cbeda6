package emulator

import (
	"fmt"
	"os/exec"
	"strings"
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
// its window's growth rather than this (see docs/accuracy.md). Then the
// same transfer between ooni/netem's hosts (ooniNetemPeer), and netjam's
// throughput with no rate over that peer's, printed (see logRatios).
//
//	go test -run XXX -bench LabCeiling -benchtime 1x ./emulator/
func BenchmarkLabCeiling(b *testing.B) {
	got := map[string]float64{} // Gbit/s by sub-benchmark
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
			got["rate="+rate] = bps / n / 1e9
		})
	}
	// The peer: ooni/netem's two netstack hosts across its link of 1 ms
	// each way, no loss (its reno, its MTU of 1500), for as long.
	b.Run("ooni-netem", func(b *testing.B) {
		bin := ooniNetemPeer.binary(b)
		var bps, cpu float64
		for b.Loop() {
			r, c := runOoniNetem(b, bin, "-rtt", "2ms", "-duration", "3s")
			bps, cpu = bps+r, cpu+c
		}
		n := float64(b.N)
		b.ReportMetric(bps/n/1e9, "Gbit/s")
		b.ReportMetric(cpu/n, "cpu-s/s")
		got["ooni-netem"] = bps / n / 1e9
	})
	if nj, o := got["rate=unlimited"], got["ooni-netem"]; nj > 0 && o > 0 {
		fmt.Printf("ratio: netjam's lab with no rate: %.2f Gbit/s, %.1f times ooni/netem's (%.2f)\n", nj, nj/o, o)
	}
}

// BenchmarkLossBesideOoniNetem runs gVisor's reno for 10 s across 10 ms
// round trips and 5% loss each way in the lab, with no rate and with a
// rate of 100 Mbit/s it never reaches, and ooni/netem's two netstack
// hosts (gVisor's reno on both ends, its own link) across the same path
// in the same sitting, one after another in each iteration, seeds 1 to
// b.N for netjam. It reports each one's throughput as a multiple of
// Mathis's bound for the path (MSS 1420 bytes: about 6.2 Mbit/s) and
// netjam's over ooni/netem's: what a user who knows one tool sees in the
// other (issue 42).
//
//	go test -run XXX -bench LossBesideOoniNetem -benchtime 5x ./emulator/
func BenchmarkLossBesideOoniNetem(b *testing.B) {
	const mathis = 1420 * 8 / 0.010 * 1.22 / 0.22360679774997896 // sqrt(0.05)
	bin := ooniNetemPeer.binary(b)
	sums := map[string]float64{}
	i := 0
	for b.Loop() {
		i++
		for _, rate := range []string{"", "rate: 100Mbps, "} {
			r, _, _ := measuredRun(b, fmt.Sprintf(`
seed: %d
duration: 10s
link: {%sdelay: 5ms, loss: 5%%}
flows: [{name: bulk, type: tcp, cc: reno, duration: 10s}]
`, i, rate))
			name := "netjam-no-rate"
			if rate != "" {
				name = "netjam-100Mbps"
			}
			sums[name] += r.Flows[0].ThroughputBps
		}
		bps, _ := runOoniNetem(b, bin, "-rtt", "10ms", "-plr", "0.05", "-duration", "10s")
		sums["ooni-netem"] += bps
	}
	n := float64(b.N)
	for name, s := range sums {
		b.ReportMetric(s/n/mathis, name+"-xMathis")
	}
	b.ReportMetric(sums["netjam-no-rate"]/sums["ooni-netem"], "no-rate/ooni")
	b.ReportMetric(sums["netjam-100Mbps"]/sums["ooni-netem"], "100Mbps/ooni")
}

// runOoniNetem runs the ooni/netem peer bin with args and returns the
// throughput it measured, in bit/s, and the CPU seconds per second it
// took.
func runOoniNetem(b *testing.B, bin string, args ...string) (bps, cpu float64) {
	cmd := exec.Command(bin, args...)
	var errOut strings.Builder
	cmd.Stderr = &errOut
	w0 := time.Now()
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("%s: %v: %s", bin, err, errOut.String())
	}
	var bytes, secs float64
	if _, err := fmt.Sscan(string(out), &bytes, &secs); err != nil || secs <= 0 {
		b.Fatalf("%s printed %q: %v", bin, out, err)
	}
	st := cmd.ProcessState
	return bytes * 8 / secs, (st.UserTime() + st.SystemTime()).Seconds() / time.Since(w0).Seconds()
}
