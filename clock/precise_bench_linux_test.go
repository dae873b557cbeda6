//go:build linux

package clock

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"testing"
	"time"
)

// BenchmarkPreciseLateness drives a model whose events fall every period
// on the real clock for a second, on an idle machine and beside busy
// loops (other processes, one more than there are CPUs), once with the
// kernel's default scheduler slice for the sleeping thread and once with
// the short slice it asks for (setSlice), and reports how late the events
// ran: mean, 99th percentile and worst, in microseconds, both side by
// side. A period of 100 us keeps the thread sleeping precisely between
// events; one of 3 ms makes it wait on Go's timer first, then sleep the
// last Coarse precisely.
//
//	go test -run XXX -bench PreciseLateness ./clock/
func BenchmarkPreciseLateness(b *testing.B) {
	for _, period := range []time.Duration{100 * time.Microsecond, 3 * time.Millisecond} {
		for _, busy := range []int{0, 3} {
			b.Run(fmt.Sprintf("period=%v/busy=%d", period, busy), func(b *testing.B) {
				stop := busyLoops(b, busy)
				defer stop()
				defer func(old time.Duration) { shortSlice = old }(shortSlice)
				var kernel, short []time.Duration
				for range b.N {
					shortSlice = 0
					kernel = append(kernel, driveEvery(period, time.Second)...)
					shortSlice = 100 * time.Microsecond
					short = append(short, driveEvery(period, time.Second)...)
				}
				for _, s := range []struct {
					name string
					lat  []time.Duration
				}{{"kernel", kernel}, {"short", short}} {
					mean, p99, worst := lateness(s.lat)
					b.ReportMetric(mean, s.name+"-mean-µs")
					b.ReportMetric(p99, s.name+"-p99-µs")
					b.ReportMetric(worst, s.name+"-max-µs")
				}
				_, kp99, _ := lateness(kernel)
				_, sp99, _ := lateness(short)
				fmt.Printf("ratio: period %v, %d busy loops: 99th percentile of lateness, short slice / kernel's %.2f\n", period, busy, sp99/kp99)
			})
		}
	}
}

// driveEvery runs Drive on the real clock with events every period for
// d, and returns how late each ran.
func driveEvery(period, d time.Duration) []time.Duration {
	clk := Real{}
	start := clk.Now()
	n := int(d / period)
	late := make([]time.Duration, 0, n)
	next := start.Add(period)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	Drive(ctx, clk, Model[int]{
		Advance: func(now time.Time) (time.Time, bool) {
			for !next.After(now) && len(late) < n {
				late = append(late, now.Sub(next))
				next = next.Add(period)
			}
			if len(late) == n {
				cancel()
				return time.Time{}, false
			}
			return next, true
		},
	})
	return late
}

// lateness returns the mean, 99th percentile and maximum of lat, in
// microseconds.
func lateness(lat []time.Duration) (mean, p99, worst float64) {
	if len(lat) == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(lat)
	slices.Sort(s)
	var sum time.Duration
	for _, l := range s {
		sum += l
	}
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	return us(sum / time.Duration(len(s))), us(s[len(s)*99/100]), us(s[len(s)-1])
}

// busyLoops starts n shell processes that spin until the returned
// function ends them (by their PIDs).
func busyLoops(b *testing.B, n int) (stop func()) {
	var cmds []*exec.Cmd
	stop = func() {
		for _, c := range cmds {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	}
	for range n {
		c := exec.Command("sh", "-c", "while :; do :; done")
		if err := c.Start(); err != nil {
			stop()
			b.Fatalf("starting a busy loop: %v", err)
		}
		cmds = append(cmds, c)
	}
	return stop
}
