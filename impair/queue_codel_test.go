package impair

import (
	"math"
	"slices"
	"testing"
	"time"
)

// codelHarness drives the CoDel state machine directly: it is the
// codelSource, and hands out packets whose sojourn time at the current
// dequeue is whatever the test sets, over a backlog the test sets too.
// That pins every input of RFC 8289's pseudocode, so drop times can be
// checked to the nanosecond.
type codelHarness struct {
	t       *testing.T
	v       codelVars
	prm     codelParams
	c       Counters
	now     time.Time
	sojourn time.Duration // of every packet popped at now
	bytes   int64         // backlog() after a pop
	ect     bool          // packets are ECT(0)
}

func newCodelHarness(t *testing.T) *codelHarness {
	return &codelHarness{
		t:     t,
		prm:   newCoDelParams(QueueConfig{}),
		bytes: 100 * 1500,
	}
}

func (h *codelHarness) pop() *Packet {
	p := qdUDP(1, 1500, h.now.Add(-h.sojourn))
	if h.ect {
		qdECT(p)
	}
	return p
}

func (h *codelHarness) backlog() int64 { return h.bytes }

// step dequeues at now and returns how many packets were dropped and
// marked.
func (h *codelHarness) step(now time.Time) (drops, marks int) {
	h.t.Helper()
	d0, m0 := h.c.Drops[DropAQM].Load(), h.c.Marked.Load()
	h.now = now
	if p := h.v.dequeue(now, &h.prm, h, &h.c); p == nil {
		h.t.Fatalf("dequeue at %v returned nil from an endless source", now.Sub(qdAt(0)))
	}
	return int(h.c.Drops[DropAQM].Load() - d0), int(h.c.Marked.Load() - m0)
}

// run dequeues every millisecond from 'from' until 'to' (exclusive), and
// also at the extra instants given, and returns the instants (offsets from
// Epoch) at which a packet was dropped or marked, one entry per packet.
func (h *codelHarness) run(from, to time.Duration, extra ...time.Duration) (drops, marks []time.Duration) {
	var times []time.Duration
	for d := from; d < to; d += time.Millisecond {
		times = append(times, d)
	}
	times = append(times, extra...)
	slices.Sort(times)
	times = slices.Compact(times)
	for _, d := range times {
		nd, nm := h.step(qdAt(d))
		for range nd {
			drops = append(drops, d)
		}
		for range nm {
			marks = append(marks, d)
		}
	}
	return drops, marks
}

// codelSchedule lists the first n drop times of a dropping state entered
// at first with count 1: RFC 8289's control law, next = prev +
// interval/sqrt(count), computed independently of the code under test.
func codelSchedule(first time.Duration, n int) []time.Duration {
	out := []time.Duration{first}
	for count := 1; len(out) < n; count++ {
		out = append(out, out[len(out)-1]+time.Duration(float64(100*time.Millisecond)/math.Sqrt(float64(count))))
	}
	return out
}

func TestCoDelNoDropBelowTarget(t *testing.T) {
	h := newCodelHarness(t)
	h.sojourn = 5*time.Millisecond - 1
	if drops, _ := h.run(0, 10*time.Second); len(drops) != 0 {
		t.Errorf("%d drops with sojourn just under target, want none (first at %v)", len(drops), drops[0])
	}
}

// TestCoDelDropSchedule checks the first drop, exactly one interval after
// the sojourn went above target, and the spacing of the following ones.
func TestCoDelDropSchedule(t *testing.T) {
	h := newCodelHarness(t)
	h.sojourn = 10 * time.Millisecond
	// Above target from the first dequeue at 0: first_above_time = 100ms.
	want := codelSchedule(100*time.Millisecond, 8)
	// The same schedule written out, to the nanosecond: 100ms/sqrt(n)
	// truncated, accumulated from the previous drop_next.
	spelled := []time.Duration{
		100 * time.Millisecond,
		200 * time.Millisecond,
		270710678, // + 70710678 (1/sqrt 2)
		328445704, // + 57735026 (1/sqrt 3)
		378445704, // + 50000000 (1/sqrt 4)
		423167063, // + 44721359 (1/sqrt 5)
	}
	if !slices.Equal(want[:len(spelled)], spelled) {
		t.Fatalf("schedule helper: %v, want %v", want[:len(spelled)], spelled)
	}
	// Dequeue every ms, plus at each drop time and 1ns before it.
	var extra []time.Duration
	for _, w := range want {
		extra = append(extra, w-1, w)
	}
	drops, marks := h.run(0, want[len(want)-1]+1, extra...)
	if len(marks) != 0 {
		t.Errorf("marks without ECN: %v", marks)
	}
	if !slices.Equal(drops, want) {
		t.Errorf("drops at\n%v\nwant\n%v", drops, want)
	}
	if h.v.count != uint32(len(want)) {
		t.Errorf("count %d after %d drops", h.v.count, len(want))
	}
}

// TestCoDelDropScheduleTicks dequeues only every millisecond, so drops
// happen at the first dequeue after drop_next; drop_next itself must keep
// following the control law from the previous drop_next, not from the
// time of the actual drop.
func TestCoDelDropScheduleTicks(t *testing.T) {
	h := newCodelHarness(t)
	h.sojourn = 10 * time.Millisecond
	var want []time.Duration
	for _, d := range codelSchedule(100*time.Millisecond, 10) {
		want = append(want, (d + time.Millisecond - 1).Truncate(time.Millisecond))
	}
	drops, _ := h.run(0, want[len(want)-1]+1)
	if !slices.Equal(drops, want) {
		t.Errorf("drops at\n%v\nwant\n%v", drops, want)
	}
}

// TestCoDelSojournAtTarget: RFC 8289 §5 compares "sojourn_time < TARGET",
// so a sojourn of exactly target counts as above and is eventually
// controlled.
func TestCoDelSojournAtTarget(t *testing.T) {
	h := newCodelHarness(t)
	h.sojourn = 5 * time.Millisecond
	drops, _ := h.run(0, 101*time.Millisecond)
	if !slices.Equal(drops, []time.Duration{100 * time.Millisecond}) {
		t.Errorf("drops at %v, want [100ms]", drops)
	}
}

// TestCoDelIntervalRestarts: a sojourn above target for just under an
// interval, then below once, then above again waits a full new interval.
func TestCoDelIntervalRestarts(t *testing.T) {
	h := newCodelHarness(t)
	h.sojourn = 50 * time.Millisecond
	if drops, _ := h.run(0, 100*time.Millisecond); len(drops) != 0 {
		t.Fatalf("drops before an interval above target: %v", drops)
	}
	h.sojourn = time.Millisecond
	h.step(qdAt(100 * time.Millisecond))
	h.sojourn = 50 * time.Millisecond
	drops, _ := h.run(101*time.Millisecond, 300*time.Millisecond)
	if len(drops) == 0 || drops[0] != 201*time.Millisecond {
		t.Errorf("drops at %v, want the first at 201ms", drops)
	}
}

// TestCoDelMTU: with at most one MTU of backlog behind the packet, CoDel
// never drops, however long the sojourn.
func TestCoDelMTU(t *testing.T) {
	h := newCodelHarness(t)
	h.sojourn = time.Second
	h.bytes = codelMTU
	if drops, _ := h.run(0, time.Second); len(drops) != 0 {
		t.Errorf("%d drops with %d bytes of backlog", len(drops), h.bytes)
	}
	h.bytes = codelMTU + 1
	drops, _ := h.run(time.Second, 2*time.Second)
	if len(drops) == 0 || drops[0] != 1100*time.Millisecond {
		t.Errorf("drops at %v, want the first at 1.1s", drops)
	}
}

// TestCoDelLeaveAndReenter checks that the dropping state ends when the
// sojourn falls below target, and RFC 8289's re-entry rule: entering again
// soon after resumes with count = count - lastcount rather than 1.
func TestCoDelLeaveAndReenter(t *testing.T) {
	h := newCodelHarness(t)
	h.sojourn = 10 * time.Millisecond
	want := codelSchedule(100*time.Millisecond, 5) // 100, 200, 270.7, 328.4, 378.4
	drops, _ := h.run(0, 400*time.Millisecond, want...)
	if !slices.Equal(drops, want) {
		t.Fatalf("drops at %v, want %v", drops, want)
	}
	if !h.v.dropping || h.v.count != 5 || h.v.lastCount != 1 {
		t.Fatalf("dropping %v count %d lastcount %d, want true 5 1", h.v.dropping, h.v.count, h.v.lastCount)
	}

	// Below target: leave the dropping state at once, no drop.
	h.sojourn = 4 * time.Millisecond
	if d, _ := h.step(qdAt(400 * time.Millisecond)); d != 0 || h.v.dropping {
		t.Fatalf("below target: %d drops, dropping %v; want 0, false", d, h.v.dropping)
	}
	dropNext := h.v.dropNext

	// Above again from 410ms: one interval later (510ms), within 16
	// intervals of drop_next, enter with count = 5 - 1 = 4, so the next
	// drop is interval/sqrt(4) = 50ms later.
	h.sojourn = 10 * time.Millisecond
	drops, _ = h.run(410*time.Millisecond, 620*time.Millisecond)
	wantRe := []time.Duration{510 * time.Millisecond, 560 * time.Millisecond}
	if len(drops) < 2 || !slices.Equal(drops[:2], wantRe) {
		t.Errorf("re-entry drops at %v, want %v first", drops, wantRe)
	}
	if got := qdAt(510 * time.Millisecond).Sub(dropNext); got >= 16*100*time.Millisecond {
		t.Fatalf("test setup: re-entry %v after drop_next, not within 16 intervals", got)
	}

	// Long below target (more than 16 intervals past drop_next): count
	// restarts at 1.
	h.sojourn = time.Millisecond
	h.run(620*time.Millisecond, 3*time.Second)
	h.sojourn = 10 * time.Millisecond
	drops, _ = h.run(3*time.Second, 3300*time.Millisecond)
	// 3.1s, then 3.1s + 100ms/sqrt(1), then 3.2s + 100ms/sqrt(2) rounded
	// up to the next dequeue.
	wantRe = []time.Duration{3100 * time.Millisecond, 3200 * time.Millisecond, 3271 * time.Millisecond}
	if !slices.Equal(drops, wantRe) {
		t.Errorf("drops after a long pause at %v, want %v", drops, wantRe)
	}
}

// TestCoDelECN: with ECN, ECN-capable packets are marked on the same
// schedule and forwarded; others are still dropped.
func TestCoDelECN(t *testing.T) {
	h := newCodelHarness(t)
	h.prm.ecn, h.ect = true, true
	h.sojourn = 10 * time.Millisecond
	want := codelSchedule(100*time.Millisecond, 6)
	var gotCE []time.Duration
	times := append([]time.Duration(nil), want...)
	for d := time.Duration(0); d < 450*time.Millisecond; d += time.Millisecond {
		times = append(times, d)
	}
	slices.Sort(times)
	for _, d := range slices.Compact(times) {
		h.now = qdAt(d)
		p := h.v.dequeue(h.now, &h.prm, h, &h.c)
		if p.Data[1]&3 == ecnCE {
			gotCE = append(gotCE, d)
		}
	}
	if n := h.c.Drops[DropAQM].Load(); n != 0 {
		t.Errorf("%d drops of ECN-capable packets", n)
	}
	if !slices.Equal(gotCE, want) {
		t.Errorf("CE marks at %v, want %v", gotCE, want)
	}
	if n := h.c.Marked.Load(); n != uint64(len(want)) {
		t.Errorf("Marked = %d, want %d", n, len(want))
	}

	h2 := newCodelHarness(t)
	h2.prm.ecn = true // packets Not-ECT
	h2.sojourn = 10 * time.Millisecond
	drops, marks := h2.run(0, 450*time.Millisecond, want...)
	if len(marks) != 0 || !slices.Equal(drops, want) {
		t.Errorf("Not-ECT with ECN on: drops %v marks %v, want drops %v", drops, marks, want)
	}
}

// TestCoDelQueue runs the queue itself: a link serving a packet per ms
// fed two per ms. It checks the first AQM drop comes one interval after
// the sojourn first reached target, and the packet accounting.
func TestCoDelQueue(t *testing.T) {
	var c Counters
	q := newCoDelQueue(QueueConfig{LimitPackets: 10000}, &c)
	var out int
	var firstDrop time.Duration = -1
	var firstAbove time.Duration = -1
	for ms := range 2000 {
		now := qdAt(time.Duration(ms) * time.Millisecond)
		for range 2 {
			q.Enqueue(now, qdUDP(1, 1000, now))
		}
		p := q.Dequeue(now)
		if p == nil {
			t.Fatalf("empty at %dms", ms)
		}
		out++
		if firstAbove < 0 && now.Sub(p.Enqueued) >= 5*time.Millisecond {
			firstAbove = time.Duration(ms) * time.Millisecond
		}
		if firstDrop < 0 && c.Drops[DropAQM].Load() > 0 {
			firstDrop = time.Duration(ms) * time.Millisecond
		}
	}
	if firstAbove < 0 || firstDrop != firstAbove+100*time.Millisecond {
		t.Errorf("first drop at %v, want one interval after the sojourn reached target at %v",
			firstDrop, firstAbove)
	}
	drops := int(c.Drops[DropAQM].Load() + c.Drops[DropQueue].Load())
	if got := out + drops + q.Len(); got != 4000 {
		t.Errorf("4000 in != %d out + %d dropped + %d queued", out, drops, q.Len())
	}
	qdCheckBacklog(t, q, &c, q.Len(), int64(q.Len())*1000)
}

func BenchmarkCoDel(b *testing.B) {
	var c Counters
	qdBenchQueue(b, newCoDelQueue(QueueConfig{LimitPackets: 1000}, &c))
}
