package flows

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/netjam/netjam/clock"
)

// newTestSink returns a sink for 64-byte datagrams of flow 7 that started at
// clock.Epoch, with every sequence number below issued valid.
func newTestSink(issued uint64) *sink {
	s := &sink{flowID: 7, size: 64, base: clock.Epoch, allIn: make(chan struct{}, 1)}
	s.issued.Store(issued)
	return s
}

// datagram returns datagram seq of flow 7, sent at clock.Epoch+sent.
func datagram(seq uint64, sent time.Duration) []byte {
	b := make([]byte, 64)
	putHeader(b, 7, seq, sent)
	return b
}

// counts is what a sink counted, for comparisons.
type counts struct{ packets, dups, reordered, malformed uint64 }

func (s *sink) counts() counts {
	return counts{s.packets.Load(), s.dups.Load(), s.reordered.Load(), s.malformed.Load()}
}

func TestSinkMalformed(t *testing.T) {
	now := clock.Epoch.Add(time.Second)
	good := datagram(3, 10*ms)
	mangle := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	bad := map[string][]byte{
		"short":          good[:HeaderSize],
		"long":           append(append([]byte(nil), good...), 0),
		"magic":          mangle(func(b []byte) []byte { b[0] ^= 1; return b }),
		"flow id":        mangle(func(b []byte) []byte { b[7] ^= 1; return b }),
		"seq not sent":   datagram(10, 10*ms),
		"sent in future": datagram(3, 2*time.Second),
		"sent negative":  datagram(3, -1),
	}
	s := newTestSink(10)
	for name, b := range bad {
		before := s.malformed.Load()
		s.receive(b, now)
		if s.malformed.Load() != before+1 {
			t.Errorf("%s: not counted as malformed", name)
		}
	}
	s.receive(good, now)
	if got, want := s.counts(), (counts{packets: 1, malformed: uint64(len(bad))}); got != want {
		t.Errorf("counts %+v, want %+v", got, want)
	}
	if d := s.delay.Snapshot(); d.Count != 1 || d.Max != float64(990*ms) {
		t.Errorf("delay %+v, want one of 990ms", d)
	}
}

// TestSinkWindow checks the duplicate window at its edges, including what
// happens beyond it.
func TestSinkWindow(t *testing.T) {
	const w = DupWindow
	s := newTestSink(1 << 40)
	now := clock.Epoch.Add(time.Hour)
	steps := []struct {
		seq  uint64
		want counts
	}{
		{100, counts{packets: 1}},
		{100, counts{packets: 1, dups: 1}},
		{100 + w - 1, counts{packets: 2, dups: 1}},             // 100 still in the window
		{100, counts{packets: 2, dups: 2}},                     // so still known
		{101, counts{packets: 3, dups: 2, reordered: 1}},       // in the window, never seen
		{101, counts{packets: 3, dups: 3, reordered: 1}},       //
		{100 + w, counts{packets: 4, dups: 3, reordered: 1}},   // 100 leaves the window
		{100, counts{packets: 5, dups: 3, reordered: 2}},       // beyond it: counted as received
		{100, counts{packets: 6, dups: 3, reordered: 3}},       // again: a duplicate goes unseen
		{102, counts{packets: 7, dups: 3, reordered: 4}},       // in the window, never seen
		{102, counts{packets: 7, dups: 4, reordered: 4}},       //
		{100 + 3*w, counts{packets: 8, dups: 4, reordered: 4}}, // a jump past the window: all forgotten
		{100 + 2*w + 1, counts{packets: 9, dups: 4, reordered: 5}},
		{100 + 2*w + 1, counts{packets: 9, dups: 5, reordered: 5}},
	}
	for i, st := range steps {
		s.receive(datagram(st.seq, 0), now)
		if got := s.counts(); got != st.want {
			t.Fatalf("step %d (seq %d): counts %+v, want %+v", i, st.seq, got, st.want)
		}
	}
}

// TestSinkMatchesReference feeds random arrivals (reordered within a few
// hundred, duplicated, across several turns of the window) to the sink and
// to a map that remembers everything, and compares the counts.
func TestSinkMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	s := newTestSink(1 << 40)
	now := clock.Epoch.Add(time.Hour)
	seen := map[uint64]bool{}
	var want counts
	highest, any := uint64(0), false
	for i := range 3 * DupWindow {
		seq := uint64(i)
		switch r := rng.IntN(100); {
		case r < 10 && i > 500: // late
			seq -= uint64(rng.IntN(500))
		case r < 15 && i > 0: // a copy of a recent one
			seq -= uint64(rng.IntN(min(i, 300)))
		case r < 20: // lost
			continue
		}
		switch {
		case seen[seq]:
			want.dups++
		default:
			seen[seq] = true
			want.packets++
			if any && seq < highest {
				want.reordered++
			}
			if !any || seq > highest {
				highest, any = seq, true
			}
		}
		s.receive(datagram(seq, 0), now)
	}
	if got := s.counts(); got != want {
		t.Errorf("counts %+v, want %+v", got, want)
	}
}

// BenchmarkUDPSink is the receiver's cost per datagram: header checks,
// duplicate window, delay histogram, jitter, counters.
func BenchmarkUDPSink(b *testing.B) {
	s := newTestSink(1 << 62)
	dg := datagram(0, 0)
	now := clock.Epoch.Add(time.Second)
	b.ReportAllocs()
	seq := uint64(0)
	for b.Loop() {
		putHeader(dg, 7, seq, time.Duration(seq%1000)*time.Microsecond)
		s.receive(dg, now)
		seq++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mdatagrams/s")
	if s.packets.Load() != uint64(b.N) {
		b.Fatalf("%d of %d received", s.packets.Load(), b.N)
	}
}
