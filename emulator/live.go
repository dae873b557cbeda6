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
// and summary.json), at the time it applied. Its methods are safe for
// concurrent use; once the run has ended they say so.
type Live struct {
	clk   clock.Clock
	start time.Time
	path  *Path
	fls   []flows.Flow
	tl    *timeline
	stop  context.CancelFunc

	mu    sync.Mutex // orders changes; guards s and ended
	s     *scenario.Scenario
	ended bool
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
	var changes []scenario.KeyChange
	for _, kv := range sets {
		key, val, _ := strings.Cut(kv, "=")
		key = strings.TrimSpace(key)
		if key != "link" && !strings.HasPrefix(key, "link.") {
			return fmt.Errorf("%s: only the link's keys (link.loss, link.uplink.rate, ...) change while a run runs", key)
		}
		changes = append(changes, scenario.KeyChange{Key: key, New: strings.TrimSpace(val)})
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
	up, err := directionConfig("uplink", next.Seed, next.Uplink)
	if err != nil {
		return err
	}
	down, err := directionConfig("downlink", next.Seed, next.Downlink)
	if err != nil {
		return err
	}
	// Both at one instant; the second to apply reports.
	at := lv.clk.Now()
	type result struct {
		at  time.Time
		err error
	}
	done := make(chan result, 2)
	report := func(t time.Time, err error) { done <- result{t, err} }
	if err := lv.path.Up.SetAt(impair.Change{At: at, Config: up, Done: report}); err != nil {
		return err
	}
	if err := lv.path.Down.SetAt(impair.Change{At: at, Config: down, Done: report}); err != nil {
		<-done
		if u, e := directionConfig("uplink", lv.s.Seed, lv.s.Uplink); e == nil {
			lv.path.Up.Set(u)
		}
		return err
	}
	var errs []error
	var applied time.Time
	for range 2 {
		r := <-done
		if r.err != nil {
			errs = append(errs, r.err)
		}
		applied = r.at
	}
	if err := errors.Join(errs...); err != nil {
		// Back to the settings in force: the direction that took the
		// change takes them again.
		if u, e := directionConfig("uplink", lv.s.Seed, lv.s.Uplink); e == nil {
			lv.path.Up.Set(u)
		}
		if d, e := directionConfig("downlink", lv.s.Seed, lv.s.Downlink); e == nil {
			lv.path.Down.Set(d)
		}
		return err
	}
	lv.tl.record(applied, changes, nil)
	lv.s = next
	return nil
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
