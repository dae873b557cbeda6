package impair

import (
	"testing"
	"time"
)

// recordSink is a Sink for stage tests: it keeps every packet it receives,
// in order, with the time it was pushed at. With release set it copies
// each packet's bytes and releases the packet at once, as a downstream
// stage that drops would.
type recordSink struct {
	release bool
	pkts    []*Packet
	data    [][]byte
	times   []time.Time
}

func (s *recordSink) Push(now time.Time, p *Packet) {
	s.times = append(s.times, now)
	if s.release {
		s.data = append(s.data, append([]byte(nil), p.Data...))
		p.Release()
		return
	}
	s.pkts = append(s.pkts, p)
}

// reset forgets what was received, keeping the capacity, and releases the
// packets it kept.
func (s *recordSink) reset() {
	for _, p := range s.pkts {
		p.Release()
	}
	clear(s.pkts)
	s.pkts, s.data, s.times = s.pkts[:0], s.data[:0], s.times[:0]
}

// deliverySink is a Sink for stage tests that records what leaves a
// stage, as the chain's collector does, and releases the packets.
type deliverySink struct{ got []delivery }

func (s *deliverySink) Push(now time.Time, p *Packet) {
	s.got = append(s.got, delivery{at: now, id: pktID(p), len: len(p.Data)})
	p.Release()
}

// arrival is a packet of size bytes and id pushed into a stage under
// test at, from t0.
type arrival struct {
	at   time.Duration
	size int
	id   uint32
}

// runStage drives s as a chain does, on exact times from t0: each packet
// of in (in time order) is pushed at its time, once s has forwarded what
// falls due by then (a departure before an arrival at one instant), and
// s is then woken until it holds nothing. It returns what s forwarded,
// in order.
func runStage(s Stage, pool *Pool, in []arrival) []delivery {
	out := &deliverySink{}
	for _, a := range in {
		when := t0.Add(a.at)
		wakeUntil(s, when, out)
		s.Push(when, testPacket(pool, a.size, a.id), out)
	}
	for {
		t, ok := s.Next()
		if !ok {
			return out.got
		}
		s.Wake(t, out)
	}
}

// wakeUntil wakes s at each of its events up to t.
func wakeUntil(s Stage, t time.Time, out Sink) {
	for {
		next, ok := s.Next()
		if !ok || next.After(t) {
			return
		}
		s.Wake(next, out)
	}
}

// checkDeliveries fails t unless got left at the times want gives (from
// t0), with the ids want gives.
func checkDeliveries(t *testing.T, got []delivery, want []delivery) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d packets out, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i].id != want[i].id || !got[i].at.Equal(want[i].at) {
			t.Errorf("packet %d: id %d at %v, want id %d at %v", i, got[i].id, got[i].at.Sub(t0), want[i].id, want[i].at.Sub(t0))
		}
	}
}

// left is a delivery of id at d from t0, for checkDeliveries.
func left(d time.Duration, id uint32) delivery { return delivery{at: t0.Add(d), id: id} }
