package emulator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/netjam/netjam/clock"
	"github.com/netjam/netjam/flows"
	"github.com/netjam/netjam/impair"
	"github.com/netjam/netjam/scenario"
	"github.com/netjam/netjam/summary"
	"github.com/netjam/netjam/wifi"
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
	cell  *wifi.Runner // nil without a Wi-Fi cell
	tun   func() *summary.TUNSummary
	// partition is the nodes' partition; nil without nodes.
	partition *partition
	// own adds to a run's link summaries what netjam itself dropped or
	// waited for at the receivers' inboxes (lab.addDeliveryCounts); nil
	// in a Live made without a lab.
	own func([]summary.LinkSummary)

	mu sync.Mutex // orders changes; guards s, seen, orig, ended, changed and pending
	s  *scenario.Scenario
	// seen is how many of the timeline's records s has taken in (see
	// catchUpLocked).
	seen  int
	ended bool
	// orig is the plan's scenario, which the run's results write out: each
	// change is added to its timeline, so that running the resolved
	// scenario.yaml again repeats it at the same moment.
	orig *scenario.Scenario
	// base is the run's scenario as it started, what Reset goes back to;
	// changed, the keys changed since, in the order first changed.
	base    *scenario.Scenario
	changed []string
	// pending are the changes scheduled ahead (Schedule), each with its
	// timer on the run's clock; at most MaxPending.
	pending []*scheduled
	// made counts the changes made through Live, at most room: what
	// maxLiveChanges leaves beside the points of the scenario's own
	// timeline, which the resolved scenario replays too.
	made, room int

	watchMu sync.Mutex // guards watch
	watch   func(summary.LiveEvent)

	// lastLoss is each UDP flow's datagrams received and found lost at
	// the last sample (flowLoss), on the sampler's goroutine only.
	lastLoss map[string][2]uint64
}

// newLive returns the Live of a run that started at start on clk.
func newLive(clk clock.Clock, start time.Time, path *Path, fls []flows.Flow, tl *timeline, stop context.CancelFunc, s *scenario.Scenario) *Live {
	lv := &Live{clk: clk, start: start, path: path, fls: fls, tl: tl, stop: stop, s: s, orig: s, base: s,
		room: max(0, maxLiveChanges-len(s.Timeline))}
	tl.watch(lv.changedEvents)
	return lv
}

// scheduled is a change Schedule holds until its time.
type scheduled struct {
	at    time.Duration
	sets  []string
	timer clock.Timer
}

// MaxPending bounds the changes scheduled ahead through Schedule.
const MaxPending = 1000

// Watch makes f receive the run's events from now on (nil: none). f is
// called on the run's own goroutines (the sampler's, a direction's): it
// must return at once, never block.
func (lv *Live) Watch(f func(summary.LiveEvent)) {
	lv.watchMu.Lock()
	lv.watch = f
	lv.watchMu.Unlock()
}

func (lv *Live) emit(e summary.LiveEvent) {
	lv.watchMu.Lock()
	f := lv.watch
	lv.watchMu.Unlock()
	if f != nil {
		e.Variant = lv.base.Variant
		f(e)
	}
}

// sampled hands the sampler's rows of one interval to the watcher; with
// a Live, they include the settings in force (sampler.configured).
func (lv *Live) sampled(now time.Time, rows []summary.SeriesRow) {
	lv.mu.Lock()
	ended := lv.ended
	lv.mu.Unlock()
	if ended {
		return
	}
	rows = append(rows, lv.flowLoss()...)
	lv.emit(summary.LiveEvent{Type: "sample", TimeS: now.Sub(lv.start).Seconds(), Rows: rows})
}

// flowLoss returns each UDP flow's loss over the interval since the last
// call, for the live view only (timeseries.csv has no such row):
// loss_ratio, of the datagrams whose fate the flow learned in the
// interval (arrived, or found lost), those found lost; from 0 to 1. (Those
// found lost over those sent in the interval reached 20 after an outage:
// the outage's datagrams are found lost together, once the path is back.)
// It is called on the sampler's goroutine only.
func (lv *Live) flowLoss() []summary.SeriesRow {
	var rows []summary.SeriesRow
	for _, f := range lv.fls {
		sm := f.Summary()
		u := sm.UDPSummary
		if u == nil {
			continue
		}
		if lv.lastLoss == nil {
			lv.lastLoss = map[string][2]uint64{}
		}
		prev := lv.lastLoss[sm.Name]
		lv.lastLoss[sm.Name] = [2]uint64{u.PacketsReceived, u.Lost}
		if r, ok := lossRatio(prev, [2]uint64{u.PacketsReceived, u.Lost}); ok {
			rows = append(rows, summary.SeriesRow{Kind: "loss_ratio", Name: sm.Name, Value: r})
		}
	}
	return rows
}

// lossRatio is flowLoss's ratio between two readings of a flow's
// datagrams received and found lost: the lost among those whose fate was
// learned between them; ok is false when none was (or a count went back).
func lossRatio(prev, now [2]uint64) (float64, bool) {
	if now[0] < prev[0] || now[1] < prev[1] {
		return 0, false
	}
	recv, lost := now[0]-prev[0], now[1]-prev[1]
	if recv+lost == 0 {
		return 0, false
	}
	return float64(lost) / float64(recv+lost), true
}

// changedEvents hands changes as the timeline records them to the
// watcher.
func (lv *Live) changedEvents(evs []summary.TimelineEvent) {
	if len(evs) > 0 {
		lv.emit(summary.LiveEvent{Type: "change", TimeS: evs[0].TimeS, Changes: evs})
	}
}

// maxLiveChanges bounds the changes made through Live in one run (Set,
// SetFor, a Schedule when it applies, Reset, ResetFlow) together with
// the points of the run's own timeline: each is held in memory and added
// to the resolved scenario's timeline, which must load again
// (scenario.MaxTimelineChanges).
var maxLiveChanges = scenario.MaxTimelineChanges

// Status returns the run's state now; summary.ErrRunEnded after it.
func (lv *Live) Status() (summary.LiveStatus, error) {
	lv.mu.Lock()
	s, ended := lv.s, lv.ended
	var pending []summary.PendingChange
	for _, p := range lv.pending {
		pending = append(pending, summary.PendingChange{AtS: p.at.Seconds(), Set: p.sets})
	}
	lv.mu.Unlock()
	if ended {
		return summary.LiveStatus{}, summary.ErrRunEnded
	}
	now := lv.clk.Now()
	st := summary.LiveStatus{Scenario: s.Name, Variant: s.Variant, ElapsedS: now.Sub(lv.start).Seconds(),
		DurationS: s.Duration.Seconds(), SampleIntervalS: s.SampleInterval.Seconds(), Links: lv.Links(), Pending: pending}
	for _, f := range lv.fls {
		smp := f.Sample(now)
		st.Flows = append(st.Flows, summary.LiveFlow{Name: f.Name(), Type: smp.Type, BytesReceived: smp.Bytes, Packets: smp.Packets,
			CwndSegments: smp.Cwnd, SRTTMs: float64(smp.SRTT) / 1e6})
	}
	return st, nil
}

// Flows returns what each flow measured so far, as summary.json has it
// (while the run runs: a UDP flow's datagrams on their way are in flight,
// not lost).
func (lv *Live) Flows() []flows.FlowSummary {
	out := make([]flows.FlowSummary, len(lv.fls))
	for i, f := range lv.fls {
		out[i] = f.Summary()
	}
	return out
}

// WiFi returns the Wi-Fi cell's counters so far; nil without a cell.
func (lv *Live) WiFi() *wifi.Stats {
	if lv.cell == nil {
		return nil
	}
	st := lv.cell.Stats()
	return &st
}

// TUN returns TUN mode's counters so far, as summary.json's tun has them
// at the end (the device's drops read from the kernel at each call); nil
// without TUN mode.
func (lv *Live) TUN() *summary.TUNSummary {
	if lv.tun == nil {
		return nil
	}
	return lv.tun()
}

// Links returns the path's directions (each link's two) as summary.json
// has them: the settings in force (after the changes made through Live) and the counters.
func (lv *Live) Links() []summary.LinkSummary {
	lv.mu.Lock()
	s := lv.s
	lv.mu.Unlock()
	ls := lv.path.summaries(s)
	if lv.own != nil {
		lv.own(ls)
	}
	return ls
}

// Set changes the path now, as --set overrides of the link's keys
// ("link.uplink.loss=5%"), each value checked as a file's is; both
// directions change at the same instant of the run's clock, between two
// packets, keeping what they hold. It returns once they have (or one
// refused: then neither changed, and the error says why), with what
// changed. In a run with a timeline, the timeline's later entries set
// their own values.
func (lv *Live) Set(sets ...string) (summary.Applied, error) {
	changes, err := linkChanges(sets)
	if err != nil {
		return summary.Applied{}, err
	}
	lv.mu.Lock()
	defer lv.mu.Unlock()
	return lv.setLocked(changes, sets)
}

// setLocked is Set's change, with lv.mu held.
func (lv *Live) setLocked(changes []scenario.KeyChange, sets []string) (summary.Applied, error) {
	if err := lv.canChangeLocked(); err != nil {
		return summary.Applied{}, err
	}
	lv.catchUpLocked()
	next, err := lv.s.With(sets...)
	if err != nil {
		return summary.Applied{}, err
	}
	for i := range changes {
		changes[i].Old = lv.s.Value(changes[i].Key)
	}
	at, err := lv.path.change(lv.clk, lv.s, next)
	if err != nil {
		return summary.Applied{}, err
	}
	lv.tl.record(at, changes, nil)
	lv.made++
	applied := summary.Applied{TimeS: at.Sub(lv.start).Seconds(), Changes: lv.path.settingChanges(lv.s, next)}
	lv.s = next
	for _, c := range changes {
		if !slices.Contains(lv.changed, c.Key) {
			lv.changed = append(lv.changed, c.Key)
		}
	}
	return applied, lv.orig.AddTimeline(at.Sub(lv.start), sets...)
}

// canChangeLocked says why no change can be made now, or nil.
func (lv *Live) canChangeLocked() error {
	switch {
	case lv.ended:
		return summary.ErrRunEnded
	case lv.made >= lv.room:
		return fmt.Errorf("%w: %d made in this run beside its timeline's %d, the most its resolved scenario's timeline may replay (%d)",
			summary.ErrTooManyChanges, lv.made, len(lv.orig.Timeline), maxLiveChanges)
	}
	return nil
}

// SetFor changes the path now as Set does, and puts the keys back to the
// values in force before (a key not set, not set again) after d, as a
// timeline entry's `for` does: an outage of d is
// SetFor(d, "link.uplink.loss=100%", "link.downlink.loss=100%"). Both
// changes are recorded. The way back is pending (Status) until it
// applies; a run that ends first ends with the change in force.
func (lv *Live) SetFor(d time.Duration, sets ...string) (summary.Applied, error) {
	changes, err := linkChanges(sets)
	if err != nil {
		return summary.Applied{}, err
	}
	if d <= 0 {
		return summary.Applied{}, fmt.Errorf("for %s: not a positive duration", d)
	}
	lv.mu.Lock()
	defer lv.mu.Unlock()
	lv.catchUpLocked()
	back := make([]string, len(changes))
	for i, c := range changes {
		v := lv.s.Value(c.Key)
		if v == "" {
			v = "null"
		}
		back[i] = c.Key + "=" + v
	}
	// The way back is pending unless the run ends first (compared so that
	// a huge d cannot overflow); with no room for it, nothing changes.
	now := lv.clk.Now().Sub(lv.start)
	goesBack := d < lv.base.Duration-now
	if goesBack && len(lv.pending) >= MaxPending {
		return summary.Applied{}, fmt.Errorf("more than %d changes pending: no room for the way back after %s", MaxPending, d)
	}
	applied, err := lv.setLocked(changes, sets)
	if err != nil {
		return applied, err
	}
	if at := lv.clk.Now().Sub(lv.start) + d; goesBack && at < lv.base.Duration {
		lv.scheduleLocked(at, back)
		applied.BackAtS = at.Seconds()
	}
	return applied, nil
}

// Schedule changes the path at run time at (from the run's start), as
// Set would then: the values are checked now, against the settings in
// force now (a later change of the same key may make them refused then:
// the refusal is recorded with the timeline, as a timeline's is). The
// change is recorded at the time it applies, as Set's are.
func (lv *Live) Schedule(at time.Duration, sets ...string) error {
	if _, err := linkChanges(sets); err != nil {
		return err
	}
	lv.mu.Lock()
	defer lv.mu.Unlock()
	if lv.ended {
		return summary.ErrRunEnded
	}
	lv.catchUpLocked()
	if _, err := lv.s.With(sets...); err != nil {
		return err
	}
	now := lv.clk.Now().Sub(lv.start)
	switch {
	case at < now:
		return fmt.Errorf("at %s: the run is past it (at %s)", at, now.Round(time.Millisecond))
	case at >= lv.base.Duration:
		return fmt.Errorf("at %s: the run ends at %s", at, lv.base.Duration)
	case len(lv.pending) >= MaxPending:
		return fmt.Errorf("more than %d changes pending", MaxPending)
	}
	lv.scheduleLocked(at, sets)
	return nil
}

// scheduleLocked adds sets at run time at (not past) to the pending
// changes, with lv.mu held.
func (lv *Live) scheduleLocked(at time.Duration, sets []string) {
	p := &scheduled{at: at, sets: sets}
	i := sort.Search(len(lv.pending), func(i int) bool { return lv.pending[i].at > at })
	lv.pending = slices.Insert(lv.pending, i, p)
	p.timer = lv.clk.AfterFunc(max(at-lv.clk.Now().Sub(lv.start), 0), func() { lv.applyScheduled(p) })
	lv.emit(summary.LiveEvent{Type: "scheduled", TimeS: at.Seconds(), Set: sets})
}

// applyScheduled applies p, on its timer's goroutine.
func (lv *Live) applyScheduled(p *scheduled) {
	lv.mu.Lock()
	defer lv.mu.Unlock()
	i := slices.Index(lv.pending, p)
	if i < 0 {
		return // the run ended
	}
	lv.pending = slices.Delete(lv.pending, i, i+1)
	changes, _ := linkChanges(p.sets)
	if _, err := lv.setLocked(changes, p.sets); err != nil && !errors.Is(err, summary.ErrRunEnded) {
		lv.tl.record(lv.clk.Now(), changes, err)
	}
}

// Reset puts every key changed through Live (Set, Schedule) back to the
// run's scenario's value, as one change recorded as Set's are, and
// returns what changed. It does nothing when no key was changed (no
// Changes, the time now).
func (lv *Live) Reset() (summary.Applied, error) {
	lv.mu.Lock()
	defer lv.mu.Unlock()
	if lv.ended {
		return summary.Applied{}, summary.ErrRunEnded
	}
	lv.catchUpLocked()
	var sets []string
	for _, k := range lv.changed {
		if v := lv.base.Value(k); v != lv.s.Value(k) {
			if v == "" {
				v = "null" // the key not set
			}
			sets = append(sets, k+"="+v)
		}
	}
	if len(sets) == 0 {
		return summary.Applied{TimeS: lv.clk.Now().Sub(lv.start).Seconds()}, nil
	}
	changes, err := linkChanges(sets)
	if err != nil {
		return summary.Applied{}, err
	}
	return lv.setLocked(changes, sets)
}

// Partition makes p the partition among the run's nodes from now on (no
// groups: heals), checked as a timeline entry's (scenario.CheckPartition),
// and records the change in the timeline and the resolved scenario.
func (lv *Live) Partition(p *scenario.Partition) (summary.Partitioned, error) {
	lv.mu.Lock()
	defer lv.mu.Unlock()
	if err := lv.canChangeLocked(); err != nil {
		return summary.Partitioned{}, err
	}
	if lv.partition == nil {
		return summary.Partitioned{}, errors.New("a partition splits nodes, and this run has none (nodes: in the scenario, or netjam shell --node)")
	}
	if p == nil {
		p = &scenario.Partition{}
	}
	if len(p.Groups) > 0 {
		var err error
		if p, err = lv.s.CheckPartition(p); err != nil {
			return summary.Partitioned{}, err
		}
	}
	at := lv.clk.Now()
	old := lv.partition.current()
	lv.partition.set(p)
	ch := scenario.KeyChange{Key: "partition", Old: old.String(), New: p.String()}
	lv.tl.record(at, []scenario.KeyChange{ch}, nil)
	lv.made++
	if err := lv.orig.AddTimelinePartition(at.Sub(lv.start), p); err != nil {
		return summary.Partitioned{}, err
	}
	return summary.Partitioned{TimeS: at.Sub(lv.start).Seconds(), Old: ch.Old, New: ch.New}, nil
}

// ResetFlow ends the connection of TCP flow name now with a RST both
// ways, as a timeline's reset entry does; it is recorded with the
// timeline and added to the resolved scenario's, as Set's changes are.
func (lv *Live) ResetFlow(name string) error {
	lv.mu.Lock()
	defer lv.mu.Unlock()
	if err := lv.canChangeLocked(); err != nil {
		return err
	}
	var names []string
	for _, f := range lv.fls {
		names = append(names, f.Name())
		if f.Name() != name {
			continue
		}
		r, ok := f.(resetter)
		if !ok {
			return fmt.Errorf("flow %s: only a tcp flow's connection can be reset", name)
		}
		if !r.Reset() {
			return fmt.Errorf("flow %s: not running (not started yet, or ended)", name)
		}
		at := lv.clk.Now()
		lv.tl.record(at, []scenario.KeyChange{{Key: "reset", New: name}}, nil)
		lv.made++
		return lv.orig.AddTimelineReset(at.Sub(lv.start), name)
	}
	return fmt.Errorf("no flow %q (the run's flows: %s)", name, strings.Join(names, ", "))
}

// catchUpLocked takes into s what the timeline changed since it last
// looked: the scenario's own timeline points apply on the directions'
// goroutines, not through Live, and a change made now must apply on top
// of them (a loss set at 5 s keeps the rate a timeline step set at 3 s),
// and record the values it replaces as they are. Live's own changes,
// recorded there too, take again the values they set. With lv.mu held.
func (lv *Live) catchUpLocked() {
	evs := lv.tl.since(lv.seen)
	lv.seen += len(evs)
	var sets []string
	for _, e := range evs {
		if e.Error != "" || !strings.HasPrefix(e.Key, "link") {
			continue // refused, or not a key (a reset)
		}
		v := e.New
		if v == "" {
			v = "null" // the key not set
		}
		sets = append(sets, e.Key+"="+v)
	}
	if len(sets) == 0 {
		return
	}
	if next, err := lv.s.With(sets...); err == nil {
		lv.s = next
		return
	}
	for _, kv := range sets { // one by one: keep what applies
		if next, err := lv.s.With(kv); err == nil {
			lv.s = next
		}
	}
}

// linkChanges are the changes sets (--set's form) make, once their keys
// are checked as a timeline entry's are (scenario.LiveKeyProblem): what a
// run records of them must load again as its timeline.
func linkChanges(sets []string) ([]scenario.KeyChange, error) {
	var changes []scenario.KeyChange
	for _, kv := range sets {
		key, val, _ := strings.Cut(kv, "=")
		key = strings.TrimSpace(key)
		if msg := scenario.LiveKeyProblem(key); msg != "" {
			return nil, fmt.Errorf("%s: %s", key, msg)
		}
		val = strings.TrimSpace(val)
		if val == "null" || val == "~" {
			val = "" // the key not set, as the timeline records it
		}
		changes = append(changes, scenario.KeyChange{Key: key, New: val})
	}
	return changes, nil
}

// change moves p's directions from cur's links to next's at one instant
// of clk, each between two of its packets and keeping what it holds, and
// returns that instant. When a direction refuses, all are back at cur's settings and
// the error says which refused and why.
func (p *Path) change(clk clock.Clock, cur, next *scenario.Scenario) (time.Time, error) {
	moves, err := p.moves(cur, next)
	if err != nil {
		return time.Time{}, err
	}
	at := clk.Now()
	type result struct {
		at  time.Time
		err error
	}
	done := make(chan result, len(moves))
	var errs []error
	sent := 0
	for _, m := range moves {
		report := func(t time.Time, err error) {
			if err != nil {
				err = fmt.Errorf("%s: %w", m.name, err)
			}
			done <- result{t, err}
		}
		if err := m.r.SetAt(impair.Change{At: at, Config: m.next, Done: report}); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", m.name, err))
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
		for _, m := range moves {
			m.r.Set(m.cur)
		}
		return time.Time{}, err
	}
	return at, nil
}

// move is one direction's change: its runner, name and settings before
// and after.
type move struct {
	r         *impair.Runner
	name      string
	cur, next impair.Config
}

// moves returns the changes of p's directions from cur's links to next's:
// every direction, also one whose settings stay (as with one link, where
// each change set both: a direction's random streams follow its changes,
// see impair.Chain.Set, and a seed's run stays the one it was).
func (p *Path) moves(cur, next *scenario.Scenario) ([]move, error) {
	var out []move
	for i, lr := range p.Links {
		c, n := linkAt(cur, i), linkAt(next, i)
		for _, d := range []struct {
			r         *impair.Runner
			up        bool
			cur, next impair.Config
		}{{lr.Up, true, c.Uplink, n.Uplink}, {lr.Down, false, c.Downlink, n.Downlink}} {
			name := d.r.Chain().Name()
			was, err := directionConfig(name, cur.Seed, d.cur)
			if err != nil {
				return nil, err
			}
			to, err := directionConfig(name, next.Seed, d.next)
			if err != nil {
				return nil, err
			}
			out = append(out, move{d.r, name, was, to})
		}
	}
	return out, nil
}

// linkAt returns link i of s: its links list's, or the link shorthand's.
func linkAt(s *scenario.Scenario, i int) scenario.Link {
	if i < len(s.Links) {
		return s.Links[i]
	}
	return scenario.Link{Name: scenario.DefaultLink, Uplink: s.Uplink, Downlink: s.Downlink}
}

// summaries returns every direction of p as summary.json has it, with
// the settings of s: each link's uplink, then its downlink.
func (p *Path) summaries(s *scenario.Scenario) []summary.LinkSummary {
	var out []summary.LinkSummary
	for i, lr := range p.Links {
		l := linkAt(s, i)
		out = append(out, linkSummary(l.Uplink, lr.Up.Stats()), linkSummary(l.Downlink, lr.Down.Stats()))
	}
	return out
}

// settingChanges are the settings of each of p's directions that differ
// between cur's links and next's, each link's uplink then its downlink.
func (p *Path) settingChanges(cur, next *scenario.Scenario) []summary.SettingChange {
	var out []summary.SettingChange
	for i, lr := range p.Links {
		before, after := linkAt(cur, i), linkAt(next, i)
		out = append(out, settingChanges(lr.Up.Chain().Name(), before.Uplink, after.Uplink)...)
		out = append(out, settingChanges(lr.Down.Chain().Name(), before.Downlink, after.Downlink)...)
	}
	return out
}

// Stop ends the run as its duration would: senders stop, what is in
// flight drains.
func (lv *Live) Stop() { lv.stop() }

// end marks the run ended, drops the changes still pending, and tells
// the watcher.
func (lv *Live) end() {
	lv.mu.Lock()
	lv.ended = true
	for _, p := range lv.pending {
		p.timer.Stop()
	}
	lv.pending = nil
	lv.mu.Unlock()
	lv.emit(summary.LiveEvent{Type: "end", TimeS: lv.clk.Now().Sub(lv.start).Seconds()})
}
