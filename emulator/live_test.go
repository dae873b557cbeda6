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

// A live change shows in the time series within one sample interval: a
// loss of 20% set at about 1 s of a 5 Mbit/s UDP flow drops datagrams in
// the first whole interval after it (62 datagrams: an interval without a
// drop has probability 0.8^62, about 1e-6), and none before it; the
// interval the change falls in may have too few datagrams after it to
// tell. The configured loss is there within one interval of it.
func TestLiveChangeInTheTimeSeries(t *testing.T) {
	out := t.TempDir()
	plan := mustPlan(t, `
duration: 3s
sample_interval: 100ms
link: {delay: 5ms}
flows: [{name: cbr, type: udp, rate: 5Mbps, packet_size: 1000, duration: 3s}]
`)
	set := make(chan error, 1)
	sum := runInto(t, plan, out, Options{Live: func(lv *Live) {
		go func() {
			time.Sleep(time.Second)
			set <- lv.Set("link.uplink.loss=20%")
		}()
	}})
	if err := <-set; err != nil {
		t.Fatal(err)
	}
	tl := sum.Runs[0].Timeline
	if len(tl) != 1 {
		t.Fatalf("timeline %+v, want the one change", tl)
	}
	at := tl[0].TimeS
	ts, drops := seriesOf(t, out, kindDrops, "uplink")
	_, conf := seriesOf(t, out, kindConfLoss, "uplink")
	sampled, whole := false, false
	for i, end := range ts {
		switch {
		case end <= at:
			if drops[i] != 0 || conf[i] != 0 {
				t.Errorf("the interval ending at %.2f s, before the change at %.3f s: %g drops, configured loss %g", end, at, drops[i], conf[i])
			}
		case !sampled && end >= at+0.1:
			// Within one interval: the sampler reads the wall clock,
			// the direction applies the change at its logical time and
			// may run behind on a loaded machine, so the sample right
			// after the change may still see the old settings.
			sampled = true
			if conf[i] != 0.2 {
				t.Errorf("the first sample an interval after the change at %.3f s (%.2f s): configured loss %g, want 0.2", at, end, conf[i])
			}
		}
		switch {
		case end <= at:
		case !whole && i > 0 && ts[i-1] >= at:
			whole = true
			if drops[i] == 0 {
				t.Errorf("the first whole interval after the change at %.3f s (%.2f to %.2f s) has no drop", at, ts[i-1], end)
			}
		}
	}
	if !whole {
		t.Errorf("no whole interval after the change at %.3f s", at)
	}
}
