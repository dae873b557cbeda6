package emulator

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// A live change applies on top of the settings in force, a timeline step
// included: a loss scheduled at 2 s keeps the rate the timeline stepped
// to at 1 s, and records the values it replaced as they were. On the
// virtual clock, so that the times are exact.
func TestLiveChangeKeepsTimelineSteps(t *testing.T) {
	out := t.TempDir()
	plan := mustPlan(t, `
clock: virtual
duration: 3s
link: {uplink: {rate: 10Mbps}}
flows: [{name: cbr, type: udp, rate: 1Mbps, duration: 3s}]
timeline:
  - {at: 1s, set: {link.uplink.rate: 2Mbps}}
`)
	var scheduleErr error
	sum, err := Run(context.Background(), plan, Options{OutDir: out, Live: func(lv *Live) {
		scheduleErr = lv.Schedule(2*time.Second, "link.uplink.loss=1%")
	}})
	if err == nil {
		err = WriteResults(out, plan, sum)
	}
	if err != nil || scheduleErr != nil {
		t.Fatal(err, scheduleErr)
	}
	ts, rates := seriesOf(t, out, kindConfRate, "uplink")
	_, losses := seriesOf(t, out, kindConfLoss, "uplink")
	for i, at := range ts {
		if testing.Verbose() && at > 1.5 {
			t.Logf("%.2f rate %g loss %g", at, rates[i], losses[i])
		}
		if at > 2.05 && (rates[i] != 2e6 || losses[i] != 0.01) {
			t.Errorf("at %.2f s: rate %g, loss %g; want 2e6 and 0.01", at, rates[i], losses[i])
		}
	}
	var got []string
	for _, e := range sum.Runs[0].Timeline {
		got = append(got, fmt.Sprintf("%g %s %q->%q", e.TimeS, e.Key, e.Old, e.New))
	}
	if want := `1 link.uplink.rate "10Mbps"->"2Mbps"|2 link.uplink.loss ""->"1%"`; strings.Join(got, "|") != want {
		t.Errorf("timeline %s, want %s", strings.Join(got, "|"), want)
	}
}
