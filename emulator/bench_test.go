package emulator

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"
)

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkLabCost measures what the rootless lab costs: CPU seconds per
// emulated second for one TCP flow filling a bottleneck of each rate, and
// the goodput it reached. Run with -benchtime=1x: each iteration is a
// 3-second real-time run.
//
//	go test -run XXX -bench LabCost -benchtime 1x ./emulator/
func BenchmarkLabCost(b *testing.B) {
	for _, rate := range []string{"10Mbps", "100Mbps", "1Gbps", "unlimited"} {
		b.Run("rate="+rate, func(b *testing.B) {
			const dur = 3 * time.Second
			y := fmt.Sprintf(`
duration: %v
link: {rate: %s, delay: 1ms, queue: 1000}
flows: [{name: bulk, type: tcp, duration: %v}]
`, dur, rate, dur)
			var cpu, wall time.Duration
			var bps float64
			for b.Loop() {
				p := mustPlan(b, y)
				c0, w0 := cpuTime(), time.Now()
				sum, err := Run(context.Background(), p, Options{})
				if err != nil {
					b.Fatal(err)
				}
				cpu += cpuTime() - c0
				wall += time.Since(w0)
				bps += sum.Runs[0].Flows[0].ThroughputBps
			}
			n := float64(b.N)
			b.ReportMetric(cpu.Seconds()/wall.Seconds(), "cpu-s/s")
			b.ReportMetric(bps/n/1e6, "Mbit/s")
		})
	}
}
