package impair

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func qdNewPIE(cfg QueueConfig, c *Counters, seed uint64) *pieQueue {
	if cfg.LimitPackets == 0 {
		cfg.LimitPackets = 10000
	}
	return newPIE(cfg, c, rand.New(rand.NewPCG(seed, 1))).(*pieQueue)
}

// TestPIEBurstAllowance: a burst into an idle PIE queue is let through
// undropped for MaxBurst (150 ms), however long the queue; after that the
// random drops start.
func TestPIEBurstAllowance(t *testing.T) {
	var c Counters
	q := qdNewPIE(QueueConfig{}, &c, 1)
	now := qdAt(0)
	for range 100 {
		q.Enqueue(now, qdUDP(1, 1500, now))
	}
	var firstDrop time.Duration = -1
	for ms := 1; ms <= 1000; ms++ {
		now = qdAt(time.Duration(ms) * time.Millisecond)
		q.Dequeue(now)
		q.Enqueue(now, qdUDP(1, 1500, now))
		if firstDrop < 0 && c.Drops[DropAQM].Load() > 0 {
			firstDrop = time.Duration(ms) * time.Millisecond
		}
	}
	// Updates run at 15, 30, ... ms; the tenth, at 150 ms, spends the
	// allowance.
	if firstDrop < 150*time.Millisecond {
		t.Errorf("first drop at %v, inside the 150ms burst allowance", firstDrop)
	}
	if firstDrop < 0 || firstDrop > 300*time.Millisecond {
		t.Errorf("first drop at %v, want soon after the allowance ran out (p = %v)", firstDrop, q.p)
	}
	if c.Drops[DropQueue].Load() != 0 {
		t.Errorf("%d overflow drops", c.Drops[DropQueue].Load())
	}
}

// TestPIEControl: arrivals 25% faster than the link build a standing queue
// above target; p rises until about a fifth of the arrivals are dropped
// and the delay is held near the target. When the arrivals stop the queue
// drains and p falls back to 0.
func TestPIEControl(t *testing.T) {
	var c Counters
	q := qdNewPIE(QueueConfig{}, &c, 7)
	var maxP float64
	var delaySum time.Duration
	var delayN int
	for ms := range 20000 {
		now := qdAt(time.Duration(ms) * time.Millisecond)
		n := 1
		if ms%4 == 0 {
			n = 2 // 1.25 packets per ms
		}
		for range n {
			q.Enqueue(now, qdUDP(1, 1500, now))
		}
		p := q.Dequeue(now)
		if ms >= 10000 && p != nil {
			delaySum += now.Sub(p.Enqueued)
			delayN++
		}
		maxP = max(maxP, q.p)
	}
	in := uint64(25000)
	dropRate := float64(c.Drops[DropAQM].Load()) / float64(in)
	if math.Abs(dropRate-0.2) > 0.02 {
		t.Errorf("drop rate %.3f, want about 0.2, the excess of arrivals", dropRate)
	}
	if mean := delaySum / time.Duration(delayN); mean < 10*time.Millisecond || mean > 20*time.Millisecond {
		t.Errorf("mean queuing delay %v in the steady state, want near the 15ms target", mean)
	}
	if maxP < 0.15 {
		t.Errorf("p peaked at %v, want it to have risen to about 0.2", maxP)
	}

	// Arrivals stop: the queue drains within tens of ms, then p decays to
	// 0 (from 0.2 in about 110 updates, under 2 s) and never rises.
	start := 20000 * time.Millisecond
	prev := q.p
	for ms := range 3000 {
		now := qdAt(start + time.Duration(ms)*time.Millisecond)
		q.Dequeue(now)
		if q.q.n == 0 && ms%15 == 0 {
			if q.p > prev {
				t.Fatalf("p rose from %v to %v on an idle queue", prev, q.p)
			}
			prev = q.p
		}
	}
	if q.p != 0 {
		t.Errorf("p = %v after 2 s idle, want 0", q.p)
	}
	qdCheckBacklog(t, q, &c, 0, 0)
}

// pieSteady runs a PIE queue with a standing queue whose every packet
// waits exactly the target, so that p stays where the test set it: one
// arrival per ms, and the packet that arrived 15 ms ago, if not dropped,
// leaves. The controller's inputs are then constant (delay = old delay =
// target), and its update leaves p alone.
type pieSteady struct {
	q        *pieQueue
	ecn      bool // arrivals are ECT(0)
	at       time.Duration
	arrivals int
}

func newPIESteady(q *pieQueue, ecn bool) *pieSteady {
	s := &pieSteady{q: q, ecn: ecn}
	// Prefill as if arriving once per ms before time 0.
	for i := q.target / time.Millisecond; i > 0; i-- {
		q.q.push(s.packet(qdAt(-i * time.Millisecond)))
	}
	q.qdelay, q.qdelayOld, q.burst = q.target, q.target, 0
	q.nextUpdate = qdAt(q.tUpdate)
	return s
}

func (s *pieSteady) packet(t time.Time) *Packet {
	p := qdUDP(1, 1500, t)
	if s.ecn {
		qdECT(p)
	}
	return p
}

// run goes on for d.
func (s *pieSteady) run(d time.Duration) {
	for end := s.at + d; s.at < end; s.at += time.Millisecond {
		now := qdAt(s.at)
		s.q.Enqueue(now, s.packet(now))
		s.arrivals++
		if h := s.q.q.peek(); h != nil && now.Sub(h.Enqueued) == s.q.target {
			s.q.Dequeue(now)
		}
	}
}

// TestPIEBurstAllowanceHighP: even with p already at 50%, nothing is
// dropped until the burst allowance is spent by ten updates.
func TestPIEBurstAllowanceHighP(t *testing.T) {
	var c Counters
	q := qdNewPIE(QueueConfig{}, &c, 1)
	s := newPIESteady(q, false)
	q.p, q.burst = 0.5, q.maxBurst
	s.run(150 * time.Millisecond) // arrivals at 0..149ms; the 10th update is at 150ms
	if got := c.Drops[DropAQM].Load(); got != 0 {
		t.Errorf("%d drops within the burst allowance", got)
	}
	s.run(20 * time.Millisecond)
	if got := c.Drops[DropAQM].Load(); got == 0 {
		t.Errorf("no drop in the 20 ms after the allowance ran out, with p = %v", q.p)
	}
}

// TestPIEDropRate: with p held at a fixed value, PIE drops arrivals at
// rate p: the count of drops is binomial, checked within 4 standard
// deviations.
func TestPIEDropRate(t *testing.T) {
	for _, p := range []float64{0.02, 0.1, 0.3} {
		var c Counters
		q := qdNewPIE(QueueConfig{}, &c, 42)
		s := newPIESteady(q, false)
		q.p = p
		s.run(50 * time.Second)
		n := s.arrivals
		if q.p != p {
			t.Fatalf("test setup: p moved from %v to %v", p, q.p)
		}
		mean := float64(n) * p
		sd := math.Sqrt(float64(n) * p * (1 - p))
		if got := float64(c.Drops[DropAQM].Load()); math.Abs(got-mean) > 4*sd {
			t.Errorf("p = %v: %v drops in %d arrivals, want %.0f ± %.0f", p, got, n, mean, 4*sd)
		}
	}
}

// TestPIEECN: ECN-capable packets are marked while p <= 10% and dropped
// above (RFC 8033 §5.1).
func TestPIEECN(t *testing.T) {
	for _, tc := range []struct {
		p          float64
		wantMarked bool
	}{
		{0.05, true},
		{0.1, true},
		{0.15, false},
	} {
		var c Counters
		q := qdNewPIE(QueueConfig{ECN: true}, &c, 3)
		s := newPIESteady(q, true)
		q.p = tc.p
		s.run(20 * time.Second)
		n := s.arrivals
		marked, dropped := c.Marked.Load(), c.Drops[DropAQM].Load()
		hits := marked + dropped
		if want := float64(n) * tc.p; math.Abs(float64(hits)-want) > 4*math.Sqrt(want) {
			t.Errorf("p = %v: %d marked + %d dropped, want about %.0f", tc.p, marked, dropped, want)
		}
		if tc.wantMarked && dropped != 0 || !tc.wantMarked && marked != 0 {
			t.Errorf("p = %v: %d marked, %d dropped; want only %s", tc.p, marked, dropped,
				map[bool]string{true: "marks", false: "drops"}[tc.wantMarked])
		}
	}
}

// TestPIEUpdate checks calculate_drop_prob's arithmetic (RFC 8033 §4.2
// and Appendix B) case by case, each expectation written from the RFC's
// formula: delta = alpha*(qdelay - target) + beta*(qdelay - qdelay_old),
// scaled down by the table while p is small, capped at 0.02 once p >= 0.1,
// then decay by 2% when both delays are under half the target, and clamp.
func TestPIEUpdate(t *testing.T) {
	const up = 0.125*(0.030-0.015) + 1.25*(0.030-0.015) // 30ms after 15ms
	ms := time.Millisecond
	for _, tc := range []struct {
		name     string
		p        float64
		cur, old time.Duration
		want     float64
	}{
		{"p=0: /2048", 0, 30 * ms, 15 * ms, up / 2048},
		{"p<1e-5: /512", 5e-6, 30 * ms, 15 * ms, 5e-6 + up/512},
		{"p<1e-4: /128", 5e-5, 30 * ms, 15 * ms, 5e-5 + up/128},
		{"p<1e-3: /32", 5e-4, 30 * ms, 15 * ms, 5e-4 + up/32},
		{"p<1e-2: /8", 5e-3, 30 * ms, 15 * ms, 5e-3 + up/8},
		{"p<0.1: /2", 0.05, 30 * ms, 15 * ms, 0.05 + up/2},
		{"p>=0.1: capped", 0.5, 30 * ms, 15 * ms, 0.52},
		{"p>=0.1: under the cap", 0.5, 20 * ms, 15 * ms, 0.5 + 0.125*0.005 + 1.25*0.005},
		{"at target", 0.3, 15 * ms, 15 * ms, 0.3},
		{"decay", 0.5, 5 * ms, 5 * ms, (0.5 + 0.125*(0.005-0.015)) * 0.98},
		{"no decay: old delay high", 0.5, 5 * ms, 10 * ms, 0.5 + 0.125*(0.005-0.015) + 1.25*(0.005-0.010)},
		{"clamp at 1", 0.99, time.Second, 0, 1},
		{"clamp at 0", 0.01, 0, time.Second, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c Counters
			q := qdNewPIE(QueueConfig{}, &c, 1)
			q.p, q.qdelay, q.qdelayOld, q.burst = tc.p, tc.cur, tc.old, 40*ms
			q.update()
			if math.Abs(q.p-tc.want) > 1e-12 {
				t.Errorf("p = %.15g, want %.15g", q.p, tc.want)
			}
			if q.qdelayOld != tc.cur || q.burst != 25*ms {
				t.Errorf("old delay %v, burst %v; want %v, 25ms", q.qdelayOld, q.burst, tc.cur)
			}
		})
	}
}

// TestPIENoDropWhenQuiet checks RFC 8033 §4.1's exceptions: no random drop
// while the delay at the last update was under half the target and p under
// 20%, nor with two packets or less queued.
func TestPIENoDropWhenQuiet(t *testing.T) {
	var c Counters
	q := qdNewPIE(QueueConfig{}, &c, 5)
	now := qdAt(0)
	q.nextUpdate = now.Add(time.Hour) // freeze p
	q.burst = 0

	// The last update saw 7ms; the latest dequeue saw more, which does not
	// count until the next update.
	q.p, q.qdelay, q.qdelayOld = 0.19, time.Second, 7*time.Millisecond
	for range 100 {
		q.Enqueue(now, qdUDP(1, 1500, now))
	}
	if got := c.Drops[DropAQM].Load(); got != 0 {
		t.Fatalf("%d drops with qdelay_old under target/2 and p < 0.2", got)
	}
	q.qdelayOld = 8 * time.Millisecond
	for range 100 {
		q.Enqueue(now, qdUDP(1, 1500, now))
	}
	if got := c.Drops[DropAQM].Load(); got == 0 {
		t.Fatalf("no drop in 100 arrivals with qdelay_old over target/2 and p = 0.19")
	}

	q.Flush()
	q.p = 1
	q.Enqueue(now, qdUDP(1, 1514, now))
	q.Enqueue(now, qdUDP(1, 1514, now))
	q.Enqueue(now, qdUDP(1, 1514, now)) // 3028 bytes queued before it: no drop
	if q.Len() != 3 {
		t.Fatalf("%d packets queued with p = 1 and at most 2 MTU queued, want 3", q.Len())
	}
	q.Enqueue(now, qdUDP(1, 100, now)) // 4542 bytes: p = 1 drops
	if q.Len() != 3 {
		t.Errorf("%d packets queued after an arrival with p = 1 and 3 MTU queued, want 3", q.Len())
	}
}

// TestPIELazyUpdate checks that applying the periodic updates lazily gives
// exactly what a timer firing every T_UPDATE gives: one queue is updated
// by extra calls at every period boundary, the other only by its traffic,
// which arrives at irregular times. Their state stays identical.
func TestPIELazyUpdate(t *testing.T) {
	var ca, cb Counters
	timed, lazy := qdNewPIE(QueueConfig{}, &ca, 9), qdNewPIE(QueueConfig{}, &cb, 9)
	lazy.catchUp(qdAt(0)) // both count periods from time 0
	rng := rand.New(rand.NewPCG(1, 1))
	var at time.Duration
	tick := qdAt(0)
	for range 20000 {
		at += time.Duration(rng.IntN(2000)) * time.Microsecond
		now := qdAt(at)
		for !tick.After(now) {
			timed.catchUp(tick) // the timer
			tick = tick.Add(pieDefaultTUpdate)
		}
		pa, pb := qdUDP(1, 1500, now), qdUDP(1, 1500, now)
		if rng.IntN(100) < 55 {
			timed.Enqueue(now, pa)
			lazy.Enqueue(now, pb)
		} else {
			timed.Dequeue(now)
			lazy.Dequeue(now)
		}
		if timed.p != lazy.p || timed.burst != lazy.burst || timed.q.n != lazy.q.n {
			t.Fatalf("at %v: timed p=%v burst=%v n=%d, lazy p=%v burst=%v n=%d",
				at, timed.p, timed.burst, timed.q.n, lazy.p, lazy.burst, lazy.q.n)
		}
	}
	if ca.Drops[DropAQM].Load() == 0 {
		t.Errorf("no drops: the test did not exercise the controller")
	}
}

// TestPIELongIdle: after an idle hour, the catch-up is capped and leaves p
// at 0 with the burst allowance restored on the next arrival.
func TestPIELongIdle(t *testing.T) {
	var c Counters
	q := qdNewPIE(QueueConfig{}, &c, 11)
	q.Enqueue(qdAt(0), qdUDP(1, 1500, qdAt(0)))
	q.p, q.qdelay, q.qdelayOld, q.burst = 0.8, 40*time.Millisecond, 40*time.Millisecond, 0
	q.Dequeue(qdAt(time.Millisecond)) // empties the queue: delay 0
	later := qdAt(time.Hour)
	q.Enqueue(later, qdUDP(1, 1500, later))
	if q.p != 0 || q.burst != q.maxBurst {
		t.Errorf("after an idle hour: p = %v, burst allowance %v; want 0, %v", q.p, q.burst, q.maxBurst)
	}
	if !q.nextUpdate.After(later) || q.nextUpdate.Sub(later) > q.tUpdate {
		t.Errorf("next update at %v, want within T_UPDATE after %v", q.nextUpdate, later)
	}
}

func BenchmarkPIE(b *testing.B) {
	var c Counters
	qdBenchQueue(b, newPIE(QueueConfig{LimitPackets: 1000}, &c, rand.New(rand.NewPCG(1, 2))))
}
