package control

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/netjam/netjam/scenario"
	"github.com/netjam/netjam/summary"
)

// Limits of what a run keeps from its start for a page opened late, beside
// the series' (series.go).
const (
	// maxTimelineEntries bounds the entries of GET /v1/timeline, a ramp's
	// steps being one: past it, the oldest of the later half are dropped
	// (the run's first changes and its latest are kept), and counted.
	maxTimelineEntries = 4096
	// maxSnapshots bounds the answers of GET /v1/series and GET
	// /v1/timeline being made at once: each copies what it answers.
	maxSnapshots = 4
	// snapshotWait is how long a request waits for its turn among them,
	// and how long its answer may take to write.
	snapshotWait = 10 * time.Second
)

// rampGap is the longest time between two steps of a ramp (a timeline's
// ramp changes its keys in equal steps of at most scenario.RampStep),
// with room for the float seconds they are recorded in.
var rampGap = scenario.RampStep.Seconds() * 1.05

// runLog is what a page opened late needs of the run in progress (or
// ended) from its start: the status it started with, its series, its
// changes, its end and its results. The hub feeds it each event it
// publishes, under its own lock, so that the log holds exactly the events
// up to seq: the event stream after seq has the rest, none twice.
type runLog struct {
	mu     sync.Mutex
	seq    uint64 // the last event taken in
	runSeq uint64 // the run event's of the run it holds; 0: none yet
	run    *summary.LiveStatus
	series *seriesStore
	tl     changeLog
	endS   float64 // the run's end, when ended
	ended  bool
	report string // the results' report, once written
}

func newRunLog() *runLog { return &runLog{series: newSeriesStore()} }

// observe takes in the event seq, of type typ, with the value published.
func (l *runLog) observe(seq uint64, typ string, v any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq = seq
	switch typ {
	case "run":
		// A new run (the next variant of a plan): the last one's go.
		st, _ := v.(summary.LiveStatus)
		l.runSeq, l.run, l.series, l.tl = seq, &st, newSeriesStore(), changeLog{}
		l.endS, l.ended, l.report = 0, false, ""
		l.series.interval = st.SampleIntervalS
	case "sample":
		if e, ok := v.(summary.LiveEvent); ok {
			l.series.add(e.TimeS, e.Rows)
		}
	case "change":
		if e, ok := v.(summary.LiveEvent); ok {
			l.tl.add(e.Changes)
		}
	case "end":
		if e, ok := v.(summary.LiveEvent); ok {
			l.ended, l.endS = true, e.TimeS
		}
	case "finished":
		if m, ok := v.(map[string]string); ok {
			l.report = m["report"]
		}
	}
}

// seriesSnapshot is GET /v1/series's answer. The store is copied under
// the lock (a copy of its arrays, bounded by its budget) and turned into
// the answer outside it, so that publishing waits for the copy only.
func (l *runLog) seriesSnapshot() SeriesSnapshot {
	l.mu.Lock()
	s, seq, runSeq := l.series.copy(), l.seq, l.runSeq
	l.mu.Unlock()
	out := s.snapshot()
	out.Seq, out.RunSeq, out.SampleIntervalS = seq, runSeq, s.interval
	return out
}

// TimelineSnapshot is GET /v1/timeline's answer: the run's events from
// its start but the samples (GET /v1/series has those).
type TimelineSnapshot struct {
	// Seq is the event of the stream the timeline is up to; RunSeq, its
	// run's run event (as SeriesSnapshot's).
	Seq    uint64 `json:"seq"`
	RunSeq uint64 `json:"run_seq"`
	// Run is the run's status as it started (its run event); null
	// before any run.
	Run *summary.LiveStatus `json:"run"`
	// Changes are the changes applied, in order, a ramp's steps as one.
	Changes []TimelineEntry `json:"changes"`
	// ChangesTaken counts the change events taken in, a ramp's steps
	// each; Omitted, the entries dropped past maxTimelineEntries, those
	// from OmittedFromS to OmittedToS.
	ChangesTaken uint64  `json:"changes_taken"`
	Omitted      int     `json:"omitted"`
	OmittedFromS float64 `json:"omitted_from_s,omitempty"`
	OmittedToS   float64 `json:"omitted_to_s,omitempty"`
	MaxEntries   int     `json:"max_entries"`
	// EndS is the run's end, once it ended; Report, the report's path
	// once the results are written.
	EndS   *float64 `json:"end_s,omitempty"`
	Report string   `json:"report,omitempty"`
}

// timelineSnapshot is GET /v1/timeline's answer. The entries are copied
// under the lock; a ramp's changes are never changed in place (extend),
// so the copy shares them.
func (l *runLog) timelineSnapshot() TimelineSnapshot {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := TimelineSnapshot{Seq: l.seq, RunSeq: l.runSeq, Run: l.run,
		Changes: append([]TimelineEntry{}, l.tl.entries...), ChangesTaken: l.tl.taken,
		Omitted: l.tl.omitted, OmittedFromS: l.tl.omittedFrom, OmittedToS: l.tl.omittedTo,
		MaxEntries: maxTimelineEntries, Report: l.report}
	if l.ended {
		end := l.endS
		out.EndS = &end
	}
	return out
}

// TimelineEntry is a change of the run as GET /v1/timeline has it: one
// change applied (a timeline's point, one made through the API: each key
// as events.jsonl has it), or a ramp's steps as one: three or more
// changes of the same keys, each within a ramp's step of the one before,
// from TimeS to ToS, each key's Old its first step's and New its last's.
type TimelineEntry struct {
	TimeS   float64                 `json:"time_s"`
	ToS     float64                 `json:"to_s"`
	Steps   int                     `json:"steps"`
	Changes []summary.TimelineEvent `json:"changes"`
}

// changeLog keeps a run's changes from its start, a ramp's steps as one
// entry, at most maxTimelineEntries of them.
type changeLog struct {
	entries                []TimelineEntry
	taken                  uint64
	omitted                int
	omittedFrom, omittedTo float64
}

// add takes in one change event's changes (one point of the timeline,
// one change made through the API).
func (l *changeLog) add(evs []summary.TimelineEvent) {
	if len(evs) == 0 {
		return
	}
	l.taken++
	t := evs[0].TimeS
	n := len(l.entries)
	if n >= 1 && rampable(evs) {
		last := &l.entries[n-1]
		if last.Steps >= 3 && sameKeys(last.Changes, evs) && t-last.ToS <= rampGap {
			last.extend(t, evs)
			return
		}
		if n >= 2 && l.startsRamp(t, evs) {
			first := l.entries[n-2]
			r := TimelineEntry{TimeS: first.TimeS, Steps: 2, Changes: first.Changes}
			r.extend(t, evs)
			l.entries = append(l.entries[:n-2], r)
			return
		}
	}
	if n >= maxTimelineEntries {
		l.omit()
	}
	l.entries = append(l.entries, TimelineEntry{TimeS: t, ToS: t, Steps: 1, Changes: evs})
}

// startsRamp reports whether the last two entries, single changes of
// evs's keys each within a ramp's step of the one before, and evs at t
// are the first three steps of a ramp.
func (l *changeLog) startsRamp(t float64, evs []summary.TimelineEvent) bool {
	n := len(l.entries)
	a, b := l.entries[n-2], l.entries[n-1]
	return a.Steps == 1 && b.Steps == 1 && rampable(a.Changes) && rampable(b.Changes) &&
		sameKeys(a.Changes, evs) && sameKeys(b.Changes, evs) &&
		b.TimeS-a.TimeS <= rampGap && t-b.TimeS <= rampGap
}

// extend makes evs at t e's last step. Its changes are copied, never
// changed in place: a snapshot may hold them.
func (e *TimelineEntry) extend(t float64, evs []summary.TimelineEvent) {
	c := append([]summary.TimelineEvent(nil), e.Changes...)
	for i := range c {
		c[i].New = evs[i].New
	}
	e.Changes, e.ToS = c, t
	e.Steps++
}

// omit drops the oldest entry of the later half, to make room.
func (l *changeLog) omit() {
	i := len(l.entries) / 2
	e := l.entries[i]
	if l.omitted == 0 {
		l.omittedFrom = e.TimeS
	}
	l.omittedTo = e.ToS
	l.omitted++
	l.entries = append(l.entries[:i], l.entries[i+1:]...)
}

// rampable reports whether evs may be a ramp's step: changes of keys
// that applied (not refused, not a connection's reset).
func rampable(evs []summary.TimelineEvent) bool {
	for _, e := range evs {
		if e.Error != "" || e.Key == "reset" {
			return false
		}
	}
	return true
}

// sameKeys reports whether a and b change the same keys, in order.
func sameKeys(a, b []summary.TimelineEvent) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key {
			return false
		}
	}
	return true
}

// snapshotSlots bounds the snapshots being made at once (maxSnapshots).
type snapshotSlots chan struct{}

// acquire waits for a slot, at most snapshotWait; false when it got none
// (the answer written).
func (s snapshotSlots) acquire(w http.ResponseWriter, r *http.Request) bool {
	ctx, cancel := context.WithTimeout(r.Context(), snapshotWait)
	defer cancel()
	select {
	case s <- struct{}{}:
		return true
	case <-ctx.Done():
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusTooManyRequests, fmt.Errorf("more than %d answers of the run's series or timeline being made at once: retry later", maxSnapshots))
		return false
	}
}

func (s snapshotSlots) release() { <-s }

// series answers GET /v1/series: the run's time series from its start,
// whether it runs or ended; empty before any run.
func (s *Server) series(w http.ResponseWriter, r *http.Request) {
	if !s.slots.acquire(w, r) {
		return
	}
	defer s.slots.release()
	snapshotDeadline(w)
	writeJSON(w, http.StatusOK, s.hub.log.seriesSnapshot())
}

// timeline answers GET /v1/timeline: the run's start, changes, end and
// results from its start; empty before any run.
func (s *Server) timeline(w http.ResponseWriter, r *http.Request) {
	if !s.slots.acquire(w, r) {
		return
	}
	defer s.slots.release()
	snapshotDeadline(w)
	writeJSON(w, http.StatusOK, s.hub.log.timelineSnapshot())
}

// snapshotDeadline bounds the writing of a snapshot's answer (a few MB at
// most): a client that does not read gives its slot back then.
func snapshotDeadline(w http.ResponseWriter) {
	http.NewResponseController(w).SetWriteDeadline(time.Now().Add(snapshotWait))
}
