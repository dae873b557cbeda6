package impair

import "time"

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
