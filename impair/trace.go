package impair

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// TraceBytes is what one delivery opportunity of a trace carries unless
// told otherwise: mahimahi's, the largest packet its TUN devices pass
// (1500 bytes and the 4-byte packet information header).
const TraceBytes = 1504

// maxTraceOpportunities bounds a trace's length (a day of a 100 Mbit/s
// link at one opportunity per line is about 700 million lines; traces in
// use are minutes long).
const maxTraceOpportunities = 1 << 24

// Trace is a link whose capacity varies over time, given as a schedule of
// delivery opportunities in mahimahi's trace format (mm-link): at each of
// Times, offsets from the trace's start, the link can deliver Bytes bytes,
// and the schedule repeats every Period, its last time. A packet may take
// several opportunities, and what one packet leaves of an opportunity
// carries the next queued packet; an opportunity that finds the queue
// empty is lost. A recorded cellular link is replayed this way, as are
// outages (a gap in the times) and bursts (equal times).
type Trace struct {
	// Times are the opportunities' offsets: nondecreasing, the last
	// greater than zero.
	Times []time.Duration
	// Bytes is what each opportunity carries; 0 means TraceBytes.
	Bytes int
	// File is where the schedule was read from, for reports and for
	// telling two traces apart; replaying ignores it.
	File string
}

// Same says whether t and u replay one schedule: the same value, or the
// same file with the same Bytes (a scenario decodes its link once per
// change of its timeline, and a change of the loss must not restart the
// trace).
func (t *Trace) Same(u *Trace) bool {
	switch {
	case t == u:
		return true
	case t == nil || u == nil:
		return false
	}
	return t.File != "" && t.File == u.File && t.Bytes == u.Bytes
}

// Period returns how long the schedule lasts before it repeats.
func (t *Trace) Period() time.Duration { return t.Times[len(t.Times)-1] }

// bytes returns what one opportunity carries.
func (t *Trace) bytes() int64 {
	if t.Bytes == 0 {
		return TraceBytes
	}
	return int64(t.Bytes)
}

// MeanBitrate returns the trace's average capacity in bits per second.
func (t *Trace) MeanBitrate() float64 {
	return float64(len(t.Times)) * float64(t.bytes()) * 8 / t.Period().Seconds()
}

// Validate reports a trace the link cannot replay.
func (t *Trace) Validate() error {
	switch {
	case len(t.Times) == 0:
		return errors.New("a trace needs at least one delivery opportunity")
	case len(t.Times) > maxTraceOpportunities:
		return fmt.Errorf("%d delivery opportunities, more than %d", len(t.Times), maxTraceOpportunities)
	case t.Bytes < 0 || t.Bytes > 1<<20:
		return fmt.Errorf("bytes per opportunity %d is not in 0..1048576", t.Bytes)
	case t.Times[0] < 0:
		return errors.New("a trace's times cannot be negative")
	case t.Period() <= 0:
		return errors.New("a trace must last for a nonzero time: its last time is 0")
	}
	for i := 1; i < len(t.Times); i++ {
		if t.Times[i] < t.Times[i-1] {
			return fmt.Errorf("times must not decrease: %v after %v", t.Times[i], t.Times[i-1])
		}
	}
	return nil
}

// ParseTrace reads a trace in mahimahi's format: one delivery opportunity
// per line, its time in whole milliseconds from the trace's start, the
// times nondecreasing and the last greater than zero. Blank lines and
// lines starting with # are skipped (mahimahi refuses them; netjam's
// example traces carry comments). Errors name the line.
func ParseTrace(r io.Reader) (*Trace, error) {
	t := &Trace{}
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		ms, err := strconv.ParseUint(s, 10, 40)
		if errors.Is(err, strconv.ErrRange) {
			return nil, fmt.Errorf("line %d: %s ms is too far from the trace's start (at most %d ms, about 34 years)", line, s, uint64(1)<<40-1)
		}
		if err != nil {
			return nil, fmt.Errorf("line %d: %q is not a time in whole milliseconds", line, s)
		}
		d := time.Duration(ms) * time.Millisecond
		if n := len(t.Times); n > 0 && d < t.Times[n-1] {
			return nil, fmt.Errorf("line %d: %d ms comes after %d ms: times must not decrease", line, ms, t.Times[n-1]/time.Millisecond)
		}
		if len(t.Times) == maxTraceOpportunities {
			return nil, fmt.Errorf("line %d: more than %d delivery opportunities", line, maxTraceOpportunities)
		}
		t.Times = append(t.Times, d)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("line %d: %w", line+1, err)
	}
	if err := t.Validate(); err != nil {
		return nil, err
	}
	return t, nil
}

// traceLink replays a Trace for a bottleneck: it tells when a packet
// that starts at a given time has had all its bytes delivered.
type traceLink struct {
	t      *Trace
	n      int64
	period time.Duration
	per    int64 // bytes per opportunity

	started bool
	base    time.Time // the trace's start: the first packet's arrival
	// start is base in Unix nanoseconds for other goroutines (capacity);
	// 0 before the first packet.
	start  atomic.Int64
	next   int64     // the first opportunity not used yet, counted from base
	left   int64     // bytes left in opportunity next-1
	leftAt time.Time // its time
}

func newTraceLink(t *Trace) *traceLink {
	return &traceLink{t: t, n: int64(len(t.Times)), period: t.Period(), per: t.bytes()}
}

// startAt starts the schedule at now, before any packet: for a trace a
// live change brings in, whose time runs from the change.
func (l *traceLink) startAt(now time.Time) {
	l.started, l.base = true, now
	l.start.Store(now.UnixNano())
	l.next = l.after(now)
}

// at returns the time of opportunity k.
func (l *traceLink) at(k int64) time.Time {
	return l.base.Add(time.Duration(k/l.n)*l.period + l.t.Times[k%l.n])
}

// depart returns when a packet of size bytes (its cost on the wire) that
// starts at now leaves: at the opportunity that carries its last byte.
// A packet that starts when the previous one left, at that opportunity,
// first takes what the previous one left of it; a packet that finds the
// link idle takes the opportunities after now.
func (l *traceLink) depart(now time.Time, size int64) time.Time {
	switch {
	case !l.started:
		l.startAt(now)
	case now.Equal(l.leftAt):
		// Continuing at the opportunity the previous packet left at.
		if size <= l.left {
			l.left -= size
			return now
		}
		size -= l.left
	default:
		if k := l.after(now); k > l.next {
			l.next = k // the opportunities in between found the link idle
		}
	}
	l.left = 0
	if size <= 0 {
		return now
	}
	m := (size + l.per - 1) / l.per
	l.next += m
	l.leftAt = l.at(l.next - 1)
	l.left = m*l.per - size
	return l.leftAt
}

// after returns the first opportunity later than now.
func (l *traceLink) after(now time.Time) int64 { return l.upTo(now.Sub(l.base)) }

// capacity returns the bytes the trace's opportunities offered from its
// start up to t, used or not; false before the first packet started it.
// Safe on any goroutine.
func (l *traceLink) capacity(t time.Time) (int64, bool) {
	start := l.start.Load()
	if start == 0 {
		return 0, false
	}
	rel := t.Sub(time.Unix(0, start))
	return (l.upTo(rel) - l.upTo(0)) * l.per, true
}

// upTo returns how many opportunities there are at or before rel from the
// trace's start (the index of the first one later).
func (l *traceLink) upTo(rel time.Duration) int64 {
	if rel < 0 {
		return 0
	}
	cycles := int64(rel / l.period)
	within := rel - time.Duration(cycles)*l.period
	i := sort.Search(len(l.t.Times), func(i int) bool { return l.t.Times[i] > within })
	return cycles*l.n + int64(i)
}
