package impair

import (
	"bytes"
	"math"
	"testing"
	"time"
)

func TestDuplicateAll(t *testing.T) {
	s := newDuplicateStage(Chance{P: 1}, newRand(1, "up", "duplicate"))
	if s.Name() != "duplicate" {
		t.Errorf("Name() = %q", s.Name())
	}
	pool := NewPool(128)
	sink := &recordSink{}
	start := time.Unix(50, 0)
	const n = 100
	for i := range n {
		p := pool.Get(20 + i)
		for k := range p.Data {
			p.Data[k] = byte(i + k)
		}
		p.Arrival, p.Enqueued = start.Add(-time.Duration(i)), start.Add(time.Duration(i))
		s.Push(start.Add(time.Duration(i)), p, sink)
	}
	if len(sink.pkts) != 2*n {
		t.Fatalf("%d packets out of %d with P = 1, want %d", len(sink.pkts), n, 2*n)
	}
	for i := 0; i < 2*n; i += 2 {
		orig, dup := sink.pkts[i], sink.pkts[i+1]
		if orig == dup || !bytes.Equal(orig.Data, dup.Data) || &orig.Data[0] == &dup.Data[0] {
			t.Fatalf("packet %d: the copy is not an equal, separate packet", i/2)
		}
		if orig.Data[0] != byte(i/2) {
			t.Fatalf("packet %d out of order: the copy must follow its original", i/2)
		}
		if !dup.Arrival.Equal(orig.Arrival) || !dup.Enqueued.Equal(orig.Enqueued) {
			t.Fatalf("packet %d: copy timestamps %v %v, original %v %v", i/2, dup.Arrival, dup.Enqueued, orig.Arrival, orig.Enqueued)
		}
		if !sink.times[i].Equal(sink.times[i+1]) || !sink.times[i].Equal(start.Add(time.Duration(i/2))) {
			t.Fatalf("packet %d forwarded at %v and %v", i/2, sink.times[i], sink.times[i+1])
		}
	}
	c := s.Counters()
	if c.InPackets.Load() != n || c.OutPackets.Load() != 2*n || c.Duplicated.Load() != n || c.OutBytes.Load() != 2*c.InBytes.Load() {
		t.Errorf("in %d (%d B), out %d (%d B), duplicated %d", c.InPackets.Load(), c.InBytes.Load(), c.OutPackets.Load(), c.OutBytes.Load(), c.Duplicated.Load())
	}
	sink.reset()
}

func TestDuplicateCopiesBeforeForwarding(t *testing.T) {
	// A downstream that drops (releases) at once must not take the copy's
	// contents with it.
	s := newDuplicateStage(Chance{P: 1}, newRand(1, "up", "duplicate"))
	pool := NewPool(64)
	sink := &recordSink{release: true}
	p := pool.Copy([]byte("a packet and its twin"))
	s.Push(time.Unix(0, 0), p, sink)
	if len(sink.data) != 2 || string(sink.data[0]) != "a packet and its twin" || string(sink.data[1]) != "a packet and its twin" {
		t.Errorf("received %q", sink.data)
	}
}

func TestDuplicateRate(t *testing.T) {
	// 100,000 packets at 20%, sd = sqrt(p(1-p)/n) = 0.0013; with
	// correlation ρ the chance chain inflates the variance by (1+ρ)/(1-ρ).
	for _, c := range []Chance{{P: 0.2}, {P: 0.2, Correlation: 0.6}, {P: 0}} {
		s := newDuplicateStage(c, newRand(2, "up", "duplicate"))
		sink := &recordSink{pkts: make([]*Packet, 0, 2), times: make([]time.Time, 0, 2)}
		p := &Packet{Data: make([]byte, 40)}
		const n = 100_000
		for range n {
			s.Push(time.Time{}, p, sink)
			sink.pkts, sink.times = sink.pkts[:0], sink.times[:0]
		}
		cnt := s.Counters()
		got := float64(cnt.Duplicated.Load()) / n
		if cnt.OutPackets.Load() != n+cnt.Duplicated.Load() {
			t.Errorf("out %d, in %d, duplicated %d", cnt.OutPackets.Load(), n, cnt.Duplicated.Load())
		}
		if c.P == 0 {
			if got != 0 {
				t.Errorf("P = 0 duplicated %v", got)
			}
			continue
		}
		checkNear(t, "duplicate rate", got, c.P, math.Sqrt(c.P*(1-c.P)/n*(1+c.Correlation)/(1-c.Correlation)))
	}
}

func TestDuplicateAllocs(t *testing.T) {
	// The copy comes from the packet's pool: once the pool is warm, a
	// duplicated packet costs no allocation.
	s := newDuplicateStage(Chance{P: 1}, newRand(3, "up", "duplicate"))
	pool := NewPool(1500)
	sink := &recordSink{pkts: make([]*Packet, 0, 2), times: make([]time.Time, 0, 2)}
	now := time.Unix(0, 0)
	run := func() {
		s.Push(now, pool.Get(1500), sink)
		sink.reset()
	}
	for range 10 {
		run()
	}
	checkPooledNoAllocs(t, 1000, "duplicated packet", run)
}
