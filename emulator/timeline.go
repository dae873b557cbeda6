package emulator

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/netjam/netjam/clock"
	"github.com/netjam/netjam/flows"
	"github.com/netjam/netjam/impair"
	"github.com/netjam/netjam/outdir"
	"github.com/netjam/netjam/scenario"
	"github.com/netjam/netjam/summary"
)

// timeline records the changes as the directions apply them. Each point
// applies on both directions, each on its own goroutine at the same
// logical time; the second to report records it. Nothing is written to
// disk on the directions' goroutines: events.jsonl is written from the
// summary at the end.
type timeline struct {
	start time.Time
	mu    sync.Mutex // guards events
	// events are the points applied, in order of application; at most
	// scenario.MaxTimelineChanges changes' worth.
	events []summary.TimelineEvent
	// onRecord, when not nil, is told each point's events as they are
	// recorded (a control endpoint's event stream); it must not block.
	onRecord func([]summary.TimelineEvent)
	// resets are the timers of the timeline's reset points, stopped by
	// stop when the flows have ended.
	resets []clock.Timer
}

// resetter is a flow whose connection a timeline's reset ends
// (flows.TCPBulk).
type resetter interface {
	Name() string
	Reset() bool
}

// scheduleResets arms a timer for each reset point of s's timeline, on
// clk from start: at its time, the named flows' connections end with a
// RST both ways, and each reset is recorded (with an error when the flow
// had not started, had ended, or cannot reset).
func (tl *timeline) scheduleResets(clk clock.Clock, s *scenario.Scenario, fls []flows.Flow) {
	byName := map[string]resetter{}
	for _, f := range fls {
		if r, ok := f.(resetter); ok {
			byName[r.Name()] = r
		}
	}
	for _, p := range s.Timeline {
		if len(p.Resets) == 0 || p.At >= s.Duration {
			continue
		}
		at := tl.start.Add(p.At)
		tl.resets = append(tl.resets, clk.AfterFunc(at.Sub(clk.Now()), func() {
			for _, name := range p.Resets {
				var err error
				if r := byName[name]; r == nil || !r.Reset() {
					err = fmt.Errorf("flow %s was not running (or cannot be reset)", name)
				}
				tl.record(at, []scenario.KeyChange{{Key: "reset", New: name}}, err)
			}
		}))
	}
}

// stop stops the reset timers that have not fired.
func (tl *timeline) stop() {
	for _, t := range tl.resets {
		t.Stop()
	}
}

// watch makes f receive the events recorded from now on.
func (tl *timeline) watch(f func([]summary.TimelineEvent)) {
	tl.mu.Lock()
	tl.onRecord = f
	tl.mu.Unlock()
}

// scheduleTimeline hands s's timeline to both directions of path, at
// start plus each point's time: impair applies them at those exact
// logical times.
func scheduleTimeline(path *Path, s *scenario.Scenario, start time.Time) (*timeline, error) {
	tl := &timeline{start: start}
	for _, p := range s.Timeline {
		if p.At >= s.Duration {
			// Checked with the file, but the run ends first (it was
			// cut short by --duration, say).
			break
		}
		if len(p.Changes) == 0 {
			continue // resets only (scheduleResets): the link stays
		}
		if err := tl.schedulePoint(path, s, p, start.Add(p.At)); err != nil {
			return nil, err
		}
	}
	return tl, nil
}

// schedulePoint hands timeline point p of s to every direction of path,
// at at: the last of them to apply it records it.
func (tl *timeline) schedulePoint(path *Path, s *scenario.Scenario, p scenario.TimelinePoint, at time.Time) error {
	after := *s
	after.Links, after.Uplink, after.Downlink = p.Links, p.Uplink, p.Downlink
	moves, err := path.moves(s, &after)
	if err != nil {
		return err
	}
	var mu sync.Mutex // guards reported and errs, between the directions
	reported := 0
	var errs []error
	for _, m := range moves {
		done := func(t time.Time, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", m.name, err))
			}
			if reported++; reported == len(moves) {
				tl.record(t, p.Changes, errors.Join(errs...))
			}
		}
		if err := m.r.SetAt(impair.Change{At: at, Config: m.next, Done: done}); err != nil {
			return err
		}
	}
	return nil
}

func (tl *timeline) record(at time.Time, changes []scenario.KeyChange, err error) {
	tl.mu.Lock()
	n := len(tl.events)
	for _, c := range changes {
		e := summary.TimelineEvent{TimeS: at.Sub(tl.start).Seconds(), Key: c.Key, Old: c.Old, New: c.New}
		if err != nil {
			e.Error = err.Error()
		}
		tl.events = append(tl.events, e)
	}
	f, evs := tl.onRecord, tl.events[n:len(tl.events):len(tl.events)]
	tl.mu.Unlock()
	if f != nil {
		f(evs)
	}
}

// applied returns the changes applied so far, in time order.
// since returns the records after the first n, in order.
func (tl *timeline) since(n int) []summary.TimelineEvent {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if n >= len(tl.events) {
		return nil
	}
	return append([]summary.TimelineEvent(nil), tl.events[n:]...)
}

func (tl *timeline) applied() []summary.TimelineEvent {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return append([]summary.TimelineEvent(nil), tl.events...)
}

// writeEvents writes events.jsonl into dir: every run's timeline, one
// change a line. Nothing is written when no run had a timeline.
func writeEvents(dir *outdir.Dir, runs []summary.RunSummary) error {
	var lines []byte
	for _, r := range runs {
		for _, e := range r.Timeline {
			e.Variant = r.Variant
			b, err := json.Marshal(e)
			if err != nil {
				return err
			}
			lines = append(append(lines, b...), '\n')
		}
	}
	if lines == nil {
		return nil
	}
	return dir.WriteFile("events.jsonl", lines)
}
