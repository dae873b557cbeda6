package emulator

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/netjam/netjam/scenario"
	"github.com/netjam/netjam/summary"
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
	sum, err := Run(context.Background(), plan, Options{OutDir: openOut(t, out), Live: func(lv *Live) {
		scheduleErr = lv.Schedule(2*time.Second, "link.uplink.loss=1%")
	}})
	if err == nil {
		err = WriteResults(openOut(t, out), plan, sum)
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
			_, err := lv.Set("link.uplink.loss=20%")
			set <- err
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
		case end <= at-0.1:
			// An interval before the change. The one ending just before
			// it is not judged: the sampler reads the settings in force
			// when it runs, which on a loaded machine can be after a
			// change a few ms past the interval's end (CI: the interval
			// ending at 1.00 s read the loss set at 1.002 s).
			if drops[i] != 0 || conf[i] != 0 {
				t.Errorf("the interval ending at %.2f s, before the change at %.3f s: %g drops, configured loss %g", end, at, drops[i], conf[i])
			}
		case end <= at:
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

// Changes made live are checked as a timeline entry's keys are, and
// bounded, so that the resolved scenario, which records them, loads and
// replays: a whole link or direction, or a slot, is refused (before, each
// applied and the resolved scenario then failed to load); a way back
// that finds no room among the pending changes refuses the change rather
// than leave it in force for good; a way back past the run's end (a huge
// duration included, which overflowed into a way back at a negative time)
// is not scheduled; past maxLiveChanges, changes are refused.
func TestLiveChangesReplay(t *testing.T) {
	defer func(n int) { maxLiveChanges = n }(maxLiveChanges)
	maxLiveChanges = 4
	out := t.TempDir()
	// The run ends once the checks are done (they take a second or two
	// under the race detector on a loaded machine; the changes they
	// schedule are due at 29.9 s, after the end).
	plan := mustPlan(t, `
duration: 30s
link: {delay: 5ms}
flows: [{name: cbr, type: udp, rate: 1Mbps, duration: 30s}]
`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	checked := make(chan []string, 1)
	sum, err := Run(ctx, plan, Options{OutDir: openOut(t, out), Live: func(lv *Live) {
		go func() {
			checked <- liveChecks(lv)
			cancel()
		}()
	}})
	if err == nil || errors.Is(err, context.Canceled) {
		err = WriteResults(openOut(t, out), plan, sum)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range <-checked {
		t.Error(p)
	}
	again, err := scenario.Load(filepath.Join(out, "scenario.yaml"), scenario.Options{})
	if err != nil {
		t.Fatalf("the resolved scenario does not load: %v", err)
	}
	applied := 0
	for _, e := range sum.Runs[0].Timeline {
		if e.Error == "" {
			applied++
		}
	}
	if applied != maxLiveChanges || len(again.Runs[0].Timeline) == 0 {
		t.Errorf("%d changes applied, want %d; the resolved scenario has %d timeline points", applied, maxLiveChanges, len(again.Runs[0].Timeline))
	}
}

// liveChecks makes TestLiveChangesReplay's changes on lv and returns what
// went wrong.
func liveChecks(lv *Live) []string {
	var problems []string
	for _, c := range []struct{ set, want string }{
		{"link={rate: 1Mbps}", "only the links' keys"},
		{"link=null", "only the links' keys"},
		{"link.uplink={rate: 1Mbps}", "set the direction's keys one by one"},
		{"link.uplink=null", "set the direction's keys one by one"},
		{"link.slot={min: 1ms}", "slots cannot change"},
		{"link.name=x", "a link's name cannot change"},
	} {
		if _, err := lv.Set(c.set); err == nil || !strings.Contains(err.Error(), c.want) {
			problems = append(problems, fmt.Sprintf("Set(%s): %v, want an error with %q", c.set, err, c.want))
		}
	}
	// A way back past the run's end, a huge one included: not pending.
	for _, d := range []time.Duration{time.Hour, math.MaxInt64} {
		if _, err := lv.SetFor(d, "link.delay=6ms"); err != nil {
			problems = append(problems, fmt.Sprintf("SetFor(%s): %v", d, err))
		}
	}
	lv.mu.Lock()
	if len(lv.pending) != 0 {
		problems = append(problems, fmt.Sprintf("%d changes pending after ways back past the end, want none (first at %s)", len(lv.pending), lv.pending[0].at))
	}
	lv.mu.Unlock()
	// No room for the way back: the change is refused, not made.
	for range MaxPending {
		if err := lv.Schedule(29900*time.Millisecond, "link.delay=7ms"); err != nil {
			return append(problems, fmt.Sprintf("Schedule: %v", err))
		}
	}
	if _, err := lv.SetFor(time.Second, "link.loss=100%"); err == nil || !strings.Contains(err.Error(), "no room for the way back") {
		problems = append(problems, fmt.Sprintf("SetFor with %d changes pending: %v, want no room", MaxPending, err))
	}
	lv.mu.Lock()
	if v := lv.s.Value("link.loss"); v != "" {
		problems = append(problems, fmt.Sprintf("a refused SetFor left link.loss at %q", v))
	}
	lv.mu.Unlock()
	// Two changes made (the SetFors); two more, then none.
	for i := range 3 {
		_, err := lv.Set(fmt.Sprintf("link.delay=%dms", 10+i))
		if want := i == 2; want != errors.Is(err, summary.ErrTooManyChanges) {
			problems = append(problems, fmt.Sprintf("change %d of at most %d: %v", i+3, maxLiveChanges, err))
		}
	}
	return problems
}

// A run's own timeline counts against the changes made live: the resolved
// scenario replays both, and may hold no more than a timeline may.
func TestLiveChangesLeaveRoomForTheTimeline(t *testing.T) {
	defer func(n int) { maxLiveChanges = n }(maxLiveChanges)
	maxLiveChanges = 4
	plan := mustPlan(t, `
duration: 30s
link: {delay: 5ms}
flows: [{name: cbr, type: udp, rate: 1Mbps, duration: 30s}]
timeline:
  - {at: 29s, set: {link.delay: 6ms}}
  - {at: 29.5s, set: {link.delay: 7ms}}
  - {at: 29.9s, set: {link.delay: 8ms}}
`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errs := make(chan []error, 1)
	Run(ctx, plan, Options{OutDir: openOut(t, t.TempDir()), Live: func(lv *Live) {
		go func() {
			defer cancel()
			_, err1 := lv.Set("link.loss=1%")
			_, err2 := lv.Set("link.loss=2%")
			errs <- []error{err1, err2}
		}()
	}})
	got := <-errs
	if got[0] != nil || !errors.Is(got[1], summary.ErrTooManyChanges) || !strings.Contains(got[1].Error(), "beside its timeline's 3") {
		t.Errorf("with 3 timeline points of at most 4: %v, want one change made, then summary.ErrTooManyChanges", got)
	}
}

// A change says what it moved in each direction, from the value in force
// (a shared link.rate, inherited by the uplink) to the new one, as the
// direction's summary words them; a setting that does nothing is worded
// as such (0%, unlimited), and a key set to what was in force moves
// nothing.
func TestSettingChanges(t *testing.T) {
	cur := mustPlan(t, `
link: {rate: 10Mbps, delay: 5ms}
flows: [{name: cbr, type: udp, rate: 1Mbps, duration: 1s}]
`).Runs[0]
	for _, c := range []struct {
		sets []string
		want string
	}{
		{[]string{"link.uplink.rate=2Mbps"}, "uplink rate 10Mbps->2Mbps"},
		{[]string{"link.loss=100%", "link.downlink.delay=20ms"}, "uplink loss 0%->100%|downlink loss 0%->100%|downlink delay 5ms->20ms"},
		{[]string{"link.rate=null"}, "uplink rate 10Mbps->unlimited|uplink queue droptail 1000p->none|downlink rate 10Mbps->unlimited|downlink queue droptail 1000p->none"},
		{[]string{"link.uplink.rate=10Mbps"}, ""},
	} {
		next, err := cur.With(c.sets...)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, ch := range append(settingChanges("uplink", linkAt(cur, 0).Uplink, linkAt(next, 0).Uplink),
			settingChanges("downlink", linkAt(cur, 0).Downlink, linkAt(next, 0).Downlink)...) {
			got = append(got, fmt.Sprintf("%s %s %s->%s", ch.Link, ch.Setting, ch.Old, ch.New))
		}
		if strings.Join(got, "|") != c.want {
			t.Errorf("%v: %s, want %s", c.sets, strings.Join(got, "|"), c.want)
		}
	}
}

// The live view's loss of a UDP flow is a share, from 0 to 1: after a 2 s
// outage of a flow sending 200 datagrams a second, the 400 found lost at
// once in one interval of 20 sent (and 2 received) are 400 of the 402
// whose fate the interval learned, not 20 times what it sent.
func TestLossRatio(t *testing.T) {
	for _, c := range []struct {
		prev, now [2]uint64
		want      float64
		ok        bool
	}{
		{[2]uint64{1000, 0}, [2]uint64{1002, 400}, 400.0 / 402, true},
		{[2]uint64{1000, 10}, [2]uint64{1019, 11}, 1.0 / 20, true},
		{[2]uint64{1000, 10}, [2]uint64{1000, 10}, 0, false}, // nothing learned: no point
		{[2]uint64{1000, 10}, [2]uint64{900, 10}, 0, false},
	} {
		got, ok := lossRatio(c.prev, c.now)
		if ok != c.ok || math.Abs(got-c.want) > 1e-12 || got > 1 {
			t.Errorf("lossRatio(%v, %v) = %v, %v; want %v, %v", c.prev, c.now, got, ok, c.want, c.ok)
		}
	}
}
