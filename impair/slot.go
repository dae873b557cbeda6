package impair

import (
	"math/rand/v2"
	"time"
)

// slotGate is netem's "slot": it releases packets in bursts, as links with
// medium access in slots or aggregation do (Wi-Fi TXOPs, DOCSIS grants).
//
// Slots open at times spaced by a uniform random gap in [Min, Max]. An open
// slot releases queued packets until its packet or byte budget is spent;
// the next slot then opens a new gap later. As in netem, a slot that opened
// while nothing waited is not saved up: a packet arriving at an idle gate
// waits one full gap.
type slotGate struct {
	c      Counters
	cfg    SlotConfig
	rng    *rand.Rand
	limit  int
	maxMem int64 // bound of mem
	mem    int64 // the held packets' buffers, in bytes

	q        fifo
	open     time.Time // when the current slot opens (or opened)
	pktsLeft int       // budget of the current slot; unused when cfg.Packets == 0
	byteLeft int64     // unused when cfg.Bytes == 0
}

func newSlotGate(cfg Config) *slotGate {
	return &slotGate{
		cfg:    cfg.Slot,
		rng:    newRand(cfg.Seed, cfg.Name, "slot"),
		limit:  inflightLimit(cfg),
		maxMem: inflightBytes(cfg),
	}
}

func inflightLimit(cfg Config) int {
	if cfg.InflightLimit > 0 {
		return cfg.InflightLimit
	}
	return DefaultInflightLimit
}

func inflightBytes(cfg Config) int64 {
	if cfg.InflightBytes > 0 {
		return cfg.InflightBytes
	}
	return DefaultInflightBytes
}

func (s *slotGate) Name() string        { return "slot" }
func (s *slotGate) Counters() *Counters { return &s.c }

// nextSlot opens the next slot a random gap after t, with a full budget.
func (s *slotGate) nextSlot(t time.Time) {
	gap := s.cfg.Min
	if span := s.cfg.Max - s.cfg.Min; span > 0 {
		gap += time.Duration(s.rng.Int64N(int64(span) + 1))
	}
	s.open = t.Add(gap)
	s.pktsLeft = s.cfg.Packets
	s.byteLeft = s.cfg.Bytes
}

func (s *slotGate) Push(now time.Time, p *Packet, out Sink) {
	s.c.in(p)
	if s.q.n >= s.limit || s.mem+p.mem() > s.maxMem {
		s.c.drop(p, DropInflight)
		return
	}
	s.mem += p.mem()
	if s.q.n == 0 && now.After(s.open) {
		s.nextSlot(now)
	}
	s.q.push(p)
	s.c.QueueLen.Store(int64(s.q.n))
}

func (s *slotGate) Next() (time.Time, bool) { return s.open, s.q.n > 0 }

func (s *slotGate) Wake(now time.Time, out Sink) {
	t := s.open
	for s.q.n > 0 {
		p := s.q.pop()
		s.mem -= p.mem()
		if s.cfg.Packets > 0 {
			s.pktsLeft--
		}
		if s.cfg.Bytes > 0 {
			s.byteLeft -= int64(len(p.Data))
		}
		s.c.out(p)
		out.Push(t, p) // p belongs downstream from here on
		if (s.cfg.Packets > 0 && s.pktsLeft <= 0) || (s.cfg.Bytes > 0 && s.byteLeft <= 0) {
			s.nextSlot(t)
			break
		}
	}
	s.c.QueueLen.Store(int64(s.q.n))
}

func (s *slotGate) Flush() {
	for s.q.n > 0 {
		s.c.drop(s.q.pop(), DropFlushed)
	}
	s.mem = 0
	s.c.QueueLen.Store(0)
}
