package scenario

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/netjam/netjam/impair"
)

func pointsText(ps []TimelinePoint) string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "%v", p.At)
		for _, c := range p.Changes {
			fmt.Fprintf(&b, " %s:%q->%q", c.Key, c.Old, c.New)
		}
		for _, r := range p.Resets {
			fmt.Fprintf(&b, " reset:%s", r)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// TestTimelineCompiles: steps, a for window, a repeat and their reverts
// in time order, each point with both directions' settings.
func TestTimelineCompiles(t *testing.T) {
	s := mustParse(t, `name: x
duration: 30s
link: {rate: 10Mbps, delay: 20ms}
timeline:
  - {at: 10s, set: {link.uplink.rate: 2Mbps}}
  - {at: 5s, for: 1s, set: {link.loss: 100%}}
  - {every: 10s, from: 2s, for: 500ms, set: {link.downlink.loss: 30%}}
`)
	want := `2s link.downlink.loss:""->"30%"
2.5s link.downlink.loss:"30%"->""
5s link.loss:""->"100%"
6s link.loss:"100%"->""
10s link.uplink.rate:"10Mbps"->"2Mbps"
12s link.downlink.loss:""->"30%"
12.5s link.downlink.loss:"30%"->""
22s link.downlink.loss:""->"30%"
22.5s link.downlink.loss:"30%"->""
`
	if got := pointsText(s.Timeline); got != want {
		t.Fatalf("timeline:\n%s\nwant:\n%s", got, want)
	}
	p := s.Timeline[2] // 5 s: both directions lose everything
	if p.Uplink.Loss.P != 1 || p.Downlink.Loss.P != 1 || p.Uplink.Rate.Bitrate != 10e6 {
		t.Errorf("at 5s: up %+v, down %+v", p.Uplink, p.Downlink)
	}
	p = s.Timeline[4] // 10 s: the uplink's own rate, the downlink's shared one
	if p.Uplink.Rate.Bitrate != 2e6 || p.Downlink.Rate.Bitrate != 10e6 || p.Uplink.Loss.Model != impair.LossNone || p.Uplink.Delay.Time != 20*time.Millisecond {
		t.Errorf("at 10s: up %+v, down %+v", p.Uplink, p.Downlink)
	}
}

// TestTimelineRevertsToNotSet: a for window on a direction's key goes
// back to the key not set, so the direction follows the shared key again.
func TestTimelineRevertsToNotSet(t *testing.T) {
	s := mustParse(t, `name: x
link: {rate: 10Mbps}
timeline:
  - {at: 1s, for: 1s, set: {link.uplink.rate: 2Mbps}}
  - {at: 3s, set: {link.rate: 5Mbps}}
`)
	want := `1s link.uplink.rate:"10Mbps"->"2Mbps"
2s link.uplink.rate:"2Mbps"->"10Mbps"
3s link.rate:"10Mbps"->"5Mbps"
`
	if got := pointsText(s.Timeline); got != want {
		t.Fatalf("timeline:\n%s\nwant:\n%s", got, want)
	}
	if p := s.Timeline[2]; p.Uplink.Rate.Bitrate != 5e6 || p.Downlink.Rate.Bitrate != 5e6 {
		t.Errorf("at 3s: up %d, down %d; want both 5 Mbit/s", p.Uplink.Rate.Bitrate, p.Downlink.Rate.Bitrate)
	}
}

// TestTimelineRamp: a ramp changes linearly in steps of at most 10 ms,
// from the value in force, and ends on its target exactly.
func TestTimelineRamp(t *testing.T) {
	s := mustParse(t, `name: x
link: {delay: 100ms, rate: 10Mbps}
timeline:
  - {at: 1s, ramp: 25ms, set: {link.delay: 200ms}}
  - {at: 2s, ramp: 1s, set: {link.uplink.rate: 1Mbps}}
`)
	ps := s.Timeline
	// 25 ms in 3 steps of 8.33 ms: 133.33, 166.67, 200 ms.
	if len(ps) != 3+100 {
		t.Fatalf("%d points, want 103:\n%s", len(ps), pointsText(ps))
	}
	wantAt := []time.Duration{1008333333, 1016666666, 1025000000}
	wantDelay := []time.Duration{133333333, 166666667, 200 * time.Millisecond}
	for i := range 3 {
		if ps[i].At != wantAt[i] || ps[i].Uplink.Delay.Time != wantDelay[i] || ps[i].Downlink.Delay.Time != wantDelay[i] {
			t.Errorf("step %d: at %v delay %v, want at %v delay %v", i, ps[i].At, ps[i].Uplink.Delay.Time, wantAt[i], wantDelay[i])
		}
	}
	for i, p := range ps[3:] {
		want := uint64(10e6 - 9e6*float64(i+1)/100)
		if p.At != 2*time.Second+time.Duration(i+1)*10*time.Millisecond || p.Uplink.Rate.Bitrate != want || p.Downlink.Rate.Bitrate != 10e6 {
			t.Fatalf("rate step %d: at %v, up %d down %d; want up %d", i, p.At, p.Uplink.Rate.Bitrate, p.Downlink.Rate.Bitrate, want)
		}
	}
}

// TestTimelineErrors: every mistake is reported with file:line:key.
func TestTimelineErrors(t *testing.T) {
	wd, _ := os.Getwd()
	for _, tc := range []struct{ src, want string }{
		{"timeline: {at: 1s}", `x.yaml:2: timeline: expected a list of changes like {at: 10s, set: {link.loss: 5%}}, got a mapping`},
		{"timeline:\n  - {at: 1s, set: {link.queue.discipline: codel}}", `x.yaml:3: timeline[0].set.link.queue.discipline: the queue's discipline cannot change while the run runs (its limit and bytes can)`},
		{"link: {queue: 100}\ntimeline:\n  - {at: 1s, set: {link.queue: 50}}", ``},
		{"link: {queue: 100}\ntimeline:\n  - {at: 1s, set: {link.uplink.queue: {discipline: codel}}}", `x.yaml:4: timeline[0]: the uplink's queue settings other than its limits (limit, bytes) cannot change while the run runs (at 1s)`},
		{"link: {delay: {time: 5ms, allow_reorder: true}}\ntimeline:\n  - {at: 1s, set: {link.delay: 10ms}}", `x.yaml:4: timeline[0]: the uplink's allow_reorder cannot change while the run runs (at 1s)`},
		{"timeline:\n  - {at: 1s, set: {link.uplink.slot: {min: 1ms, max: 2ms}}}", `x.yaml:3: timeline[0].set.link.uplink.slot: slots cannot change while the run runs`},
		{"timeline:\n  - {at: 1s, set: {mtu: 1400}}", `x.yaml:3: timeline[0].set.mtu: only the links' keys (link.loss, link.uplink.rate, links.NAME.delay, ...) change while the run runs`},
		{"links: [{name: a, mtu: 1400}]\ntimeline:\n  - {at: 1s, set: {links.a.mtu: 1300}}", `x.yaml:4: timeline[0].set.links.a.mtu: a link's MTU cannot change while the run runs`},
		// A trace may come in at run time (a handover), but its file
		// must be there; a ramp does not start from one.
		{"timeline:\n  - {at: 1s, set: {link.rate.trace: x.trace}}", `x.yaml:3: link.rate.trace: cannot read the trace: open ` + filepath.Join(wd, "x.trace") + `: no such file or directory (in the link the timeline makes at 1s, timeline[0])`},
		{"link: {rate: 10Mbps}\ntimeline:\n  - {at: 1s, for: 2s, set: {link.downlink.rate: {trace: ../configs/traces/cellular-8s.down}}}", ``},
		{"link: {rate: {trace: ../configs/traces/cellular-8s.down}}\ntimeline:\n  - {at: 1s, ramp: 1s, set: {link.rate: 1Mbps}}", `x.yaml:4: timeline[0].set.link.rate: the rate is a trace when the ramp starts (1s): a ramp goes from a bitrate`},
		{"timeline:\n  - {at: 1s, set: {link.loss: 150%}}", `x.yaml:3: link.loss: 150% is out of range (expected 0% to 100%) (in the link the timeline makes at 1s, timeline[0])`},
		{"timeline:\n  - {at: 1s, set: {link.lost: 1%}}", `x.yaml:3: link.lost: unknown key; did you mean "loss"? (in the link the timeline makes at 1s, timeline[0])`},
		{"timeline:\n  - {at: 1s, for: 2s, set: {link.loss: 1%}}\n  - {at: 2s, for: 2s, set: {link.loss: 5%}}", `x.yaml:4: timeline[1].set.link.loss: overlaps a for or ramp window of link.loss at 1s (timeline[0], line 3)`},
		{"timeline:\n  - {at: 1s, for: 2s, set: {link.delay: 10ms}}\n  - {at: 2s, set: {link.delay.jitter: 5ms}}", `x.yaml:4: timeline[1].set.link.delay.jitter: overlaps a for or ramp window of link.delay at 1s (timeline[0], line 3)`},
		{"timeline:\n  - {at: 40s, set: {link.loss: 1%}}", ``}, // after the run's end: checked, never applies
		{"timeline:\n  - {at: 40s, set: {link.loss: 150%}}", `x.yaml:3: link.loss: 150% is out of range (expected 0% to 100%) (in the link the timeline makes at 40s, timeline[0])`},
		{"timeline:\n  - {at: 1s, ramp: 1s, set: {link.queue.limit: 10}}", `x.yaml:3: timeline[0].set.link.queue.limit: cannot ramp: ramps change a rate, a delay, a jitter or a loss (link.rate, link.delay, link.delay.jitter, link.loss, each also per direction; links.NAME.rate, ... likewise)`},
		{"timeline:\n  - {at: 1s, ramp: 1s, set: {link.rate: 1Mbps}}", `x.yaml:3: timeline[0].set.link.rate: the rate is unlimited when the ramp starts (1s): set a rate to ramp from first`},
		{"timeline:\n  - {every: 1s, for: 1s, set: {link.loss: 1%}}", `x.yaml:3: timeline[0].for: 1s is not shorter than every (1s): the windows would overlap`},
		{"timeline:\n  - {every: 1ms, set: {link.loss: 1%}}", `x.yaml:3: timeline[0]: the timeline makes more than 10000 changes; make repeats rarer or ramps shorter`},
		{"duration: 24h\nlink: {delay: 1ms}\ntimeline:\n  - {at: 1s, ramp: 23h, set: {link.delay: 2ms}}", `x.yaml:5: timeline[0]: the timeline makes more than 10000 changes; make repeats rarer or ramps shorter`},
		{"timeline:\n  - {at: 1s, every: 2s, set: {link.loss: 1%}}", `x.yaml:3: timeline[0].every: an entry is at a time or repeats every, not both`},
		{"timeline:\n  - {set: {link.loss: 1%}}", `x.yaml:3: timeline[0]: missing key at (or every)`},
		{"timeline:\n  - {at: 1s, set: {link.uplink.delay: 5ms}}\nlink: {reorder: 10%, delay: 10ms}\n", ``},
		{"timeline:\n  - {at: 1s, set: {link.delay: null}}\nlink: {reorder: 10%, delay: 10ms}\n", `x.yaml:4: link.reorder: reorder needs a delay in this direction to reorder against (in the link the timeline makes at 1s, timeline[0])`},
		{"flows: [{name: bulk, type: tcp, duration: 10s}, {name: cbr, type: udp, rate: 1Mbps, duration: 10s}]\ntimeline:\n  - {at: 1s, reset: {flow: cbr}}", `x.yaml:4: timeline[0].reset.flow: "cbr" is a udp flow; only tcp connections can be reset`},
		{"flows: [{name: bulk, type: tcp, duration: 10s}, {name: cbr, type: udp, rate: 1Mbps, duration: 10s}]\ntimeline:\n  - {at: 1s, reset: {flow: bluk}}", `x.yaml:4: timeline[0].reset.flow: "bluk" names no flow of the scenario`},
		{"flows: [{name: bulk, type: tcp, duration: 10s}, {name: cbr, type: udp, rate: 1Mbps, duration: 10s}]\ntimeline:\n  - {at: 1s, reset: {}}", `x.yaml:4: timeline[0].reset: missing key flow (the name of a tcp flow)`},
		{"flows: [{name: bulk, type: tcp, duration: 10s}, {name: cbr, type: udp, rate: 1Mbps, duration: 10s}]\ntimeline:\n  - {at: 1s, reset: {flows: bulk}}", `x.yaml:4: timeline[0].reset.flows: unknown key; did you mean "flow"?`},
		{"flows: [{name: bulk, type: tcp, duration: 10s}, {name: cbr, type: udp, rate: 1Mbps, duration: 10s}]\ntimeline:\n  - {at: 1s, for: 1s, reset: {flow: bulk}}", `x.yaml:4: timeline[0].for: a reset entry ends connections; it has no for (give the change an entry of its own)`},
		{"flows: [{name: bulk, type: tcp, duration: 10s}, {name: cbr, type: udp, rate: 1Mbps, duration: 10s}]\ntimeline:\n  - {at: 1s, reset: {flow: bulk}, set: {link.loss: 1%}}", `x.yaml:4: timeline[0].set: a reset entry ends connections; it has no set (give the change an entry of its own)`},
		{"flows: [{name: bulk, type: tcp, duration: 10s}, {name: cbr, type: udp, rate: 1Mbps, duration: 10s}]\ntimeline:\n  - {reset: {flow: bulk}}", `x.yaml:4: timeline[0]: missing key at (or every)`},
	} {
		_, err := parse("name: x\n" + tc.src)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("source:\n%s\ngot:  %s\nwant: %s", tc.src, got, tc.want)
		}
	}
}

// TestTimelineVariant: a variant and --set may set the timeline, a normal
// key.
func TestTimelineVariant(t *testing.T) {
	p, err := parse(`name: x
link: {rate: 10Mbps}
variants:
  - {name: steady}
  - name: step
    set: {timeline: [{at: 10s, set: {link.rate: 2Mbps}}]}
`)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Runs[0].Timeline) != 0 || len(p.Runs[1].Timeline) != 1 || p.Runs[1].Timeline[0].Uplink.Rate.Bitrate != 2e6 {
		t.Errorf("variants' timelines: %v, %v", p.Runs[0].Timeline, p.Runs[1].Timeline)
	}
	s := mustParse(t, "name: x\n", `timeline=[{at: 1s, for: 1s, set: {link.loss: 100%}}]`)
	if len(s.Timeline) != 2 {
		t.Errorf("--set timeline: %v", s.Timeline)
	}
}

// TestTimelineNullSurvivesYAML: a timeline's null (back to the key not
// set), in the file or added by AddTimeline, is in the resolved YAML, so
// running that file applies it too. YAML dropped every null, and wrote
// the entry as `set: {}`, which does not load.
func TestTimelineNullSurvivesYAML(t *testing.T) {
	p, err := Parse("x.yaml", []byte(`name: x
duration: 10s
link: {loss: 2%, uplink: {loss: 5%}, delay: 5ms}
flows: [{name: a, type: udp, interval: 5ms, count: 10}]
timeline: [{at: 1s, set: {link.uplink.loss: null}}]
`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := p.Runs[0]
	if err := s.AddTimeline(2*time.Second, "link.delay=null"); err != nil {
		t.Fatal(err)
	}
	y, err := s.YAML()
	if err != nil {
		t.Fatal(err)
	}
	again, err := Parse("resolved.yaml", y, Options{})
	if err != nil {
		t.Fatalf("%v\n%s", err, y)
	}
	got := fmt.Sprint(again.Runs[0].Timeline[0].Changes, again.Runs[0].Timeline[1].Changes)
	if want := "[{link.uplink.loss 5% }] [{link.delay 5ms }]"; got != want {
		t.Errorf("the replay's timeline: %s, want %s\n%s", got, want, y)
	}
}

// TestTimelineReset: reset entries, at a time and repeating, become points
// of their own or join the link's changes at the same time, and leave
// the link as it is.
func TestTimelineReset(t *testing.T) {
	s := mustParse(t, `name: x
duration: 10s
link: {rate: 10Mbps}
flows: [{name: bulk, type: tcp, duration: 10s}, {name: other, type: tcp, duration: 10s}]
timeline:
  - {at: 2s, reset: {flow: bulk}}
  - {at: 4s, set: {link.rate: 2Mbps}}
  - {every: 4s, from: 4s, reset: {flow: other}}
`)
	want := `2s reset:bulk
4s link.rate:"10Mbps"->"2Mbps" reset:other
8s reset:other
`
	if got := pointsText(s.Timeline); got != want {
		t.Fatalf("timeline:\n%s\nwant:\n%s", got, want)
	}
	if p := s.Timeline[0]; p.Uplink.Rate.Bitrate != 10e6 || p.Downlink.Rate.Bitrate != 10e6 {
		t.Errorf("a reset changed the link: %+v", p)
	}
	if p := s.Timeline[2]; p.Uplink.Rate.Bitrate != 2e6 {
		t.Errorf("after the step, a reset's point has the stepped link: %+v", p.Uplink.Rate)
	}
}

// TestWithReadsNoFiles: a change from the control API (With) may not name
// a trace file, whatever the file: netjam, perhaps root, would read it for
// a client and quote its first line in the error. A trace in the file's
// own timeline is read as the file's link is.
func TestWithReadsNoFiles(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte("hunter2\n"), 0o600)
	p, err := Parse("x.yaml", []byte("name: x\nlink: {rate: 10Mbps}\ntimeline:\n  - {at: 1s, set: {link.rate: {trace: ../configs/traces/cellular-8s.down}}}\n"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := p.Runs[0]
	for _, set := range []string{
		"link.uplink.rate={trace: " + secret + "}",
		"link.downlink.rate.trace=" + secret,
		"link={rate: {trace: " + secret + "}}",
	} {
		_, err := s.With(set)
		if err == nil || !strings.Contains(err.Error(), "names no trace file") || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("With(%q): %v, want a refusal that reads nothing", set, err)
		}
	}
	if _, err := s.With("link.loss=1%"); err != nil {
		t.Errorf("a change next to the timeline's trace: %v", err)
	}
}

// TestWithNamesTheScenarioTraces: a change (With) may name again a trace
// file the scenario was read with, from one change to the next, and it is
// not read again: netjam proxy puts a path's rate back to the scenario's
// trace when a toxic that changed it is removed.
func TestWithNamesTheScenarioTraces(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "lte.down")
	os.WriteFile(trace, []byte("1\n2\n"), 0o644)
	other := filepath.Join(dir, "other.down")
	os.WriteFile(other, []byte("1\n2\n"), 0o644)
	file := filepath.Join(dir, "s.yaml")
	os.WriteFile(file, []byte("link:\n  downlink: {rate: {trace: lte.down}}\n"), 0o644)
	p, err := Load(file, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := p.Runs[0]
	os.Remove(trace) // read already: a change does not read it again
	s, err = s.With("link.downlink.rate=5Mbps")
	if err != nil {
		t.Fatal(err)
	}
	back, err := s.With("link.downlink.rate={trace: " + trace + "}")
	if err != nil {
		t.Fatalf("the scenario's trace again: %v", err)
	}
	if tr := back.Downlink.Rate.Trace; tr == nil || tr.File != trace || len(tr.Times) != 2 {
		t.Errorf("the scenario's trace again: %+v", tr)
	}
	if _, err := s.With("link.downlink.rate={trace: " + other + "}"); err == nil || !strings.Contains(err.Error(), "names no trace file") {
		t.Errorf("another trace file: %v, want a refusal", err)
	}
}

// TestWithNamesTheKey: a change's error names its key as the change gave
// it, not as a --set of the command line (it came from netjam ctl or the
// API).
func TestWithNamesTheKey(t *testing.T) {
	p, err := Parse("x.yaml", []byte("name: x\nlink: {rate: 10Mbps}\n"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Runs[0].With("link.uplink.rate=2Mpbs")
	if want := `link.uplink.rate: "2Mpbs" is not a rate (examples: 10Mbps, 1.5Gbps, 500kbps)`; err == nil || err.Error() != want {
		t.Errorf("With: %v, want %s", err, want)
	}
}

// TestWithRefusesAChangeOfNothing: a change of a shared key that both
// directions replace with their own changes nothing, and is refused
// (saying what to set), an invalid value too; one direction's own value
// leaves the change to the other.
func TestWithRefusesAChangeOfNothing(t *testing.T) {
	s := mustParse(t, "link: {uplink: {loss: 1%}, downlink: {loss: 2%}}\n")
	for _, v := range []string{"5%", "150%"} {
		_, err := s.With("link.loss=" + v)
		want := "link.loss changes nothing for the uplink and the downlink: link.uplink.loss (from the file) and link.downlink.loss (from the file) replace the shared link.loss as a whole; set link.uplink.loss and link.downlink.loss instead"
		if err == nil || err.Error() != want {
			t.Errorf("With(link.loss=%s): %v, want %s", v, err, want)
		}
	}
	s = mustParse(t, "link: {uplink: {loss: 1%}}\n")
	next, err := s.With("link.loss=5%")
	if err != nil || next.Downlink.Loss.P != 0.05 || next.Uplink.Loss.P != 0.01 {
		t.Errorf("With(link.loss=5%%) with the uplink's own: %v, downlink %v, uplink %v", err, next.Downlink.Loss.P, next.Uplink.Loss.P)
	}
}

// TestSuggestExported: the nearest option; between two as near, the one the word
// left a letter out of.
func TestSuggestExported(t *testing.T) {
	for _, c := range []struct {
		word    string
		options []string
		want    string
	}{
		{"sed", []string{"set", "seed"}, "seed"},
		{"rn", []string{"run", "shell"}, "run"},
		{"x", []string{"p"}, ""},
		{"lossy", []string{"loss", "delay"}, "loss"},
	} {
		if got := Suggest(c.word, c.options); got != c.want {
			t.Errorf("Suggest(%q, %q) = %q, want %q", c.word, c.options, got, c.want)
		}
	}
}
