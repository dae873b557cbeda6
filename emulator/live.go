package emulator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/netjam/netjam/clock"
	"github.com/netjam/netjam/flows"
	"github.com/netjam/netjam/impair"
	"github.com/netjam/netjam/scenario"
)

// Live is a run in progress, for a control endpoint (netjam run
// --control): what it has measured so far, and changes to its path that
// apply at once. A change is recorded with the run's timeline (events.jsonl
// and summary.json), at the time it applied, and added to the timeline of
// the resolved scenario.yaml the run writes, so that running that file
// again repeats it. Its methods are safe for
// concurrent use; once the run has ended they say so.
type Live struct {
	clk   clock.Clock
	start time.Time
	path  *Path
	fls   []flows.Flow
	tl    *timeline
	stop  context.CancelFunc

	mu    sync.Mutex // orders changes; guards s, orig and ended
	s     *scenario.Scenario
	ended bool
	// orig is the plan's scenario, which the run's results write out: each
	// change is added to its timeline, so that running the resolved
	// scenario.yaml again repeats it at the same moment.
	orig *scenario.Scenario
}

// ErrRunEnded is Live's error once its run has ended.
var ErrRunEnded = errors.New("the run has ended")

// LiveStatus is a run's state now.
type LiveStatus struct {
	Scenario string        `json:"scenario"`
	Variant  string        `json:"variant,omitempty"`
	ElapsedS float64       `json:"elapsed_s"`
	Flows    []LiveFlow    `json:"flows"`
	Links    []LinkSummary `json:"links"`
}

// LiveFlow is a flow's progress so far.
type LiveFlow struct {
	Name          string  `json:"name"`
	Type          string  `json:"type"`
	BytesReceived uint64  `json:"bytes_received"`
	Packets       uint64  `json:"packets_received,omitempty"`
	CwndSegments  uint32  `json:"cwnd,omitempty"`
	SRTTMs        float64 `json:"srtt_ms,omitempty"`
}

// Status returns the run's state now; ErrRunEnded after it.
func (lv *Live) Status() (LiveStatus, error) {
	lv.mu.Lock()
	s, ended := lv.s, lv.ended
	lv.mu.Unlock()
	if ended {
		return LiveStatus{}, ErrRunEnded
	}
	now := lv.clk.Now()
	st := LiveStatus{Scenario: s.Name, Variant: s.Variant, ElapsedS: now.Sub(lv.start).Seconds(), Links: lv.Links()}
	for _, f := range lv.fls {
		smp := f.Sample(now)
		st.Flows = append(st.Flows, LiveFlow{Name: f.Name(), Type: smp.Type, BytesReceived: smp.Bytes, Packets: smp.Packets,
			CwndSegments: smp.Cwnd, SRTTMs: float64(smp.SRTT) / 1e6})
	}
	return st, nil
}

// Links returns the path's two directions as summary.json has them: the
// settings in force (after the changes made through Live) and the counters.
func (lv *Live) Links() []LinkSummary {
	lv.mu.Lock()
	s := lv.s
	lv.mu.Unlock()
	return []LinkSummary{linkSummary(s.Uplink, lv.path.Up.Stats()), linkSummary(s.Downlink, lv.path.Down.Stats())}
}

// Set changes the path now, as --set overrides of the link's keys
// ("link.uplink.loss=5%"), each value checked as a file's is; both
// directions change at the same instant of the run's clock, between two
// packets, keeping what they hold. It returns once they have (or one
// refused: then neither changed, and the error says why). In a run with a
// timeline, the timeline's later entries set their own values.
func (lv *Live) Set(sets ...string) error {
	changes, err := linkChanges(sets)
	if err != nil {
		return err
	}
	lv.mu.Lock()
	defer lv.mu.Unlock()
	if lv.ended {
		return ErrRunEnded
	}
	next, err := lv.s.With(sets...)
	if err != nil {
		return err
	}
	for i := range changes {
		changes[i].Old = lv.s.Value(changes[i].Key)
	}
	at, err := lv.path.change(lv.clk, lv.s, next)
	if err != nil {
		return err
	}
	lv.tl.record(at, changes, nil)
	lv.s = next
	return lv.orig.AddTimeline(at.Sub(lv.start), sets...)
}

// linkChanges are the changes sets (--set's form) make, once their keys
// are checked: only the link's keys change while a path runs.
func linkChanges(sets []string) ([]scenario.KeyChange, error) {
	var changes []scenario.KeyChange
	for _, kv := range sets {
		key, val, _ := strings.Cut(kv, "=")
		key = strings.TrimSpace(key)
		if key != "link" && !strings.HasPrefix(key, "link.") {
			return nil, fmt.Errorf("%s: only the link's keys (link.loss, link.uplink.rate, ...) change while a path runs", key)
		}
		changes = append(changes, scenario.KeyChange{Key: key, New: strings.TrimSpace(val)})
	}
	return changes, nil
}

// change moves p's directions from cur's link to next's at one instant of
// clk, each between two of its packets and keeping what it holds, and
// returns that instant. When a direction refuses, both are back at cur's
// settings and the error says which refused and why.
func (p *Path) change(clk clock.Clock, cur, next *scenario.Scenario) (time.Time, error) {
	up, err := directionConfig("uplink", next.Seed, next.Uplink)
	if err != nil {
		return time.Time{}, err
	}
	down, err := directionConfig("downlink", next.Seed, next.Downlink)
	if err != nil {
		return time.Time{}, err
	}
	at := clk.Now()
	type result struct {
		at  time.Time
		err error
	}
	done := make(chan result, 2)
	report := func(dir string) func(time.Time, error) {
		return func(t time.Time, err error) {
			if err != nil {
				err = fmt.Errorf("%s: %w", dir, err)
			}
			done <- result{t, err}
		}
	}
	var errs []error
	sent := 0
	for _, d := range []struct {
		r   *impair.Runner
		cfg impair.Config
		dir string
	}{{p.Up, up, "uplink"}, {p.Down, down, "downlink"}} {
		if err := d.r.SetAt(impair.Change{At: at, Config: d.cfg, Done: report(d.dir)}); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", d.dir, err))
			break
		}
		sent++
	}
	for range sent {
		r := <-done
		if r.err != nil {
			errs = append(errs, r.err)
		}
		at = r.at
	}
	if err := errors.Join(errs...); err != nil {
		// Back to the settings in force: a direction that took the
		// change takes them again (they are what it had, so it can).
		if u, e := directionConfig("uplink", cur.Seed, cur.Uplink); e == nil {
			p.Up.Set(u)
		}
		if d, e := directionConfig("downlink", cur.Seed, cur.Downlink); e == nil {
			p.Down.Set(d)
		}
		return time.Time{}, err
	}
	return at, nil
}

// Stop ends the run as its duration would: senders stop, what is in
// flight drains.
func (lv *Live) Stop() { lv.stop() }

// end marks the run ended.
func (lv *Live) end() {
	lv.mu.Lock()
	lv.ended = true
	lv.mu.Unlock()
}
