package wifi

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/netjam/netjam/impair"
	"github.com/netjam/netjam/stats"
)

// Medium is one Wi-Fi cell as a discrete-event simulation of the 802.11
// distributed coordination function (DCF, IEEE 802.11-2016 10.3): frames
// enter with Arrive at their arrival time, the caller moves time with
// Advance, and frames leave through the up and down functions at the end of
// the exchange that delivered them. Nothing sleeps per slot and nothing is
// scheduled per frame: between exchanges the medium computes, for every
// contender, the instant its backoff will expire, and jumps to the earliest.
//
// A Medium is not safe for concurrent use; Runner gives it a goroutine.
// Stats may be called from any goroutine.
//
// # The model
//
// Stations 0..N-1 send uplink frames to the AP; the AP sends downlink
// frames to them, from one queue per station served in turn (one exchange
// each), and contends for the medium like any station. All stations hear
// each other (no hidden nodes, no capture) and propagation takes no time.
//
// After the medium has been idle for DIFS (EIFS after a frame a station
// could not decode, 10.3.2.3.7), a contender counts down its backoff, one
// per idle slot, and transmits when it reaches zero (10.3.4.3). When
// another transmission starts first, the counter freezes with the slots
// left and resumes after the next DIFS or EIFS. A contender whose frame
// arrives while the medium is idle, with no backoff pending, transmits as
// soon as the medium has been idle for DIFS, at once if it already has
// (10.3.4.2); one that finds the medium busy draws a backoff.
// After every exchange the transmitter draws a new backoff, also with an
// empty queue (post-backoff). Backoffs are uniform in [0, CW]; CW starts at
// CWMin, becomes 2(CW+1)-1 (at most CWMax) after each failed exchange, and
// returns to CWMin after a success or a discarded frame (10.3.3, 10.3.4.4).
//
// Contenders whose backoffs expire within aCCATime of each other (the same
// slot, or slots a few microseconds apart after different IFSs) do not hear
// each other in time and collide. A collision or a lost data frame costs
// the transmitter ACKTimeout (SIFS + slot + aRxPHYStartDelay) before it
// counts DIFS again; stations that received a frame they could not decode
// wait EIFS; those that decoded a frame whose ACK never came honour its
// NAV. With RTS/CTS only the RTS collides; a successful RTS reserves the
// medium for the whole exchange.
//
// # Time
//
// The medium's time starts at the first call of Arrive or Advance, with
// the medium just turned idle. A frame is delivered at the end of the
// exchange that carried it, after the ACK or BlockAck: the receiver has
// it SIFS + ACK earlier, but the exchange is over only then. Packets are
// never modified (not even their Arrival).
type Medium struct {
	p    *params
	sta  []station  // stations 0..N-1, then the AP at index N
	c    []counters // parallel to sta
	up   func(now time.Time, p *impair.Packet, station int)
	down func(now time.Time, p *impair.Packet, station int)

	started bool
	epoch   time.Time // time of the first Arrive or Advance; internal times count ns from it
	now     int64     // time of the latest event processed

	// While busy, an exchange runs from start to end; while idle, next is
	// the instant the first contender's backoff expires (hasNext: anyone
	// has a frame). The exchange is decided at next+cca, once everyone who
	// transmits with the first contender is known.
	busy       bool
	start, end int64
	next       int64
	hasNext    bool

	// The exchange in progress: its transmitters (more than one is a
	// collision), whether its ACK or BlockAck came, and per MPDU of a
	// single transmitter whether it was lost.
	txs   []int
	acked bool
	lost  []bool
	keep  []bool

	pending int // real packets queued: while zero, Next reports nothing

	// bianchi replaces parts of the standard by the assumptions of
	// Bianchi's model, level by level; tests set it to check the
	// simulation against the model and to measure what each assumption
	// is worth.
	bianchi assumptions
	// backoffHook, when set, replaces the random backoff draws (tests).
	backoffHook func(station, cw int) int

	elapsed, busyNs       atomic.Int64
	exchanges, collisions atomic.Uint64
	wall                  time.Time       // when set (by Runner), the clock reading lateness is measured against
	late                  stats.Histogram // ns
}

// assumptions are levels of Bianchi's model the simulation can adopt.
type assumptions uint8

const (
	// standardDCF is DCF as the standard defines it.
	standardDCF assumptions = iota
	// bianchiTiming: after any exchange every contender counts DIFS from
	// the end of the last frame on the air (no ACKTimeout, no EIFS, no
	// NAV after a lost frame): Bianchi's Tc = H + E[P*] + DIFS.
	bianchiTiming
	// bianchiSlots adds Bianchi's slot rule: a busy period counts as one
	// slot of every frozen backoff counter (his chain decrements the
	// counter in every "slot", idle or busy), where the standard counts
	// idle slots only.
	bianchiSlots
)

// station is one contender: a station, or the AP.
type station struct {
	idx     int
	ap      bool
	q       []ring // a station: one queue, to the AP; the AP: one per station
	backlog int    // frames in q
	cur     int    // AP: the queue whose head frame is in progress; -1: none
	rr      int    // AP: where the round robin looks next
	sat     int32  // Saturate bytes; 0: not saturated

	// Backoff state. The medium is idle for this contender from idleFrom
	// (the end of the last busy period, its NAV or its ACK timeout); slot
	// counting starts ifs (DIFS or EIFS) later. While the medium is idle,
	// bo is the count at that start and the count at any later time
	// follows from it; when a transmission starts, every other contender's
	// bo is brought up to date (frozen).
	bo       int
	cw       int
	idleFrom int64
	ifs      int64
	ready    int64 // when the queue last became non-empty

	rng *rand.Rand

	// The exchange in progress: queue, MPDU count, PSDU bytes, RTS used,
	// end of its first frame on the air.
	txq, txn, txLen int
	txRTS           bool
	txEnd           int64
}

// NewMedium builds the cell cfg describes. up receives each uplink packet
// (sent by station i) when the AP has it, down each downlink packet for
// station i when the station has it, with the delivery time: the end of
// the exchange, after the ACK. They own the packet and must Release it;
// they run on the goroutine that calls Arrive or Advance and must not call
// back into the Medium.
func NewMedium(cfg Config, up, down func(now time.Time, p *impair.Packet, station int)) (*Medium, error) {
	p, err := cfg.resolve()
	if err != nil {
		return nil, fmt.Errorf("wifi: %w", err)
	}
	n := len(p.stations)
	m := &Medium{
		p:    p,
		sta:  make([]station, n+1),
		c:    make([]counters, n+1),
		up:   up,
		down: down,
		lost: make([]bool, max(p.ampduFrames, 1)),
		keep: make([]bool, max(p.ampduFrames, 1)),
		txs:  make([]int, 0, n+1),
	}
	for i := range m.sta {
		s := &m.sta[i]
		s.idx, s.cur = i, -1
		s.ap = i == n
		s.cw = p.cwMin
		s.rng = rand.New(rand.NewPCG(p.seed, streamID(i)))
		if s.ap {
			s.q = make([]ring, n)
		} else {
			s.q = make([]ring, 1)
			s.sat = int32(p.stations[i].Saturate)
		}
		for j := range s.q {
			s.q[j].limit = p.queueLimit
		}
	}
	return m, nil
}

// streamID names contender i's random stream: its draws depend only on the
// seed and on what happens to it.
func streamID(i int) uint64 {
	h := fnv.New64a()
	h.Write([]byte("wifi/contender/" + strconv.Itoa(i)))
	return h.Sum64()
}

// Stations returns the number of stations (the AP not counted).
func (m *Medium) Stations() int { return len(m.sta) - 1 }

// Now returns the time of the latest event the medium processed.
func (m *Medium) Now() time.Time { return m.epoch.Add(time.Duration(m.now)) }

// init starts the medium's time at t. The medium has just become idle:
// frames arriving now wait DIFS; saturated stations start with a backoff.
func (m *Medium) init(t time.Time) {
	m.started, m.epoch = true, t
	for i := range m.sta {
		s := &m.sta[i]
		s.ifs = m.p.difs
		if s.sat > 0 {
			m.topUp(s)
			s.bo = m.draw(s)
		}
	}
	m.plan()
}

func (m *Medium) ns(t time.Time) int64 {
	if d := int64(t.Sub(m.epoch)); d > m.now {
		return d
	}
	return m.now
}

// Arrive processes every event due up to t, then queues p at t: uplink from
// station (0..N-1) to the AP, or downlink from the AP to station. A t
// earlier than the medium's time is taken as the medium's time. When the
// queue is full, p is dropped and counted. The Medium owns p from now on.
func (m *Medium) Arrive(t time.Time, p *impair.Packet, station int, downlink bool) {
	if station < 0 || station >= len(m.sta)-1 {
		panic("wifi: Arrive for station " + strconv.Itoa(station) + " of " + strconv.Itoa(len(m.sta)-1))
	}
	m.Advance(t)
	s, qi := &m.sta[station], 0
	if downlink {
		s, qi = &m.sta[len(m.sta)-1], station
	}
	c := &m.c[s.idx]
	q := &s.q[qi]
	if q.full() {
		c.drops[DropQueue].Add(1)
		p.Release()
		return
	}
	now := m.now
	q.push(entry{p: p, enq: now, size: int32(len(p.Data))})
	s.backlog++
	m.pending++
	c.queue.Add(1)
	if s.backlog > 1 {
		return // already contending
	}
	s.ready = now
	if (m.busy || now < s.idleFrom) && s.bo == 0 {
		s.bo = m.draw(s) // the medium is busy: no immediate access (10.3.4.2)
	}
	if !m.busy {
		if t := s.txAt(m.p.slot); !m.hasNext || t < m.next {
			m.next, m.hasNext = t, true
		}
	}
}

// Advance processes, in time order, every event due at or before t.
func (m *Medium) Advance(t time.Time) {
	if !m.started {
		m.init(t)
	}
	to := m.ns(t)
	for {
		var ev int64
		switch {
		case m.busy:
			ev = m.end
		case m.hasNext:
			ev = m.next + m.p.cca
		}
		if !(m.busy || m.hasNext) || ev > to {
			break
		}
		m.now = ev
		if m.busy {
			m.finish()
		} else {
			m.begin()
		}
	}
	m.now = to
	m.elapsed.Store(to)
}

// Next returns when the medium next needs Advance: its next event (a
// transmission start or the end of an exchange) while any packet is
// queued. With only the synthetic frames of saturated stations it reports
// nothing (ok false): they deliver nothing, and the next Arrive or Advance
// catches up with them in one go.
func (m *Medium) Next() (t time.Time, ok bool) {
	if m.pending == 0 || !m.started {
		return time.Time{}, false
	}
	if m.busy {
		return m.epoch.Add(time.Duration(m.end)), true
	}
	return m.epoch.Add(time.Duration(m.next + m.p.cca)), m.hasNext
}

// txAt returns when s's backoff expires, for a contender with a frame while
// the medium is idle: the end of its countdown, or the time its frame came
// when the countdown ended before (immediate access).
func (s *station) txAt(slot int64) int64 {
	t := s.idleFrom + s.ifs + int64(s.bo)*slot
	return max(t, s.ready)
}

// plan finds the next transmission start while the medium is idle.
func (m *Medium) plan() {
	m.hasNext = false
	for i := range m.sta {
		s := &m.sta[i]
		if s.backlog == 0 {
			continue
		}
		if t := s.txAt(m.p.slot); !m.hasNext || t < m.next {
			m.next, m.hasNext = t, true
		}
	}
}

// begin starts the exchange whose first transmission is at m.next; now is
// next+cca. Everyone whose backoff expired before carrier sense could warn
// it transmits too; everyone else freezes.
func (m *Medium) begin() {
	start, decided := m.next, m.now
	m.txs = m.txs[:0]
	for i := range m.sta {
		s := &m.sta[i]
		if s.backlog > 0 && s.txAt(m.p.slot) < decided {
			m.txs = append(m.txs, i)
			continue
		}
		m.freeze(s, decided)
	}
	if len(m.txs) == 0 {
		// next is the earliest expiry of a contender with a frame, and
		// nothing moves an expiry later while the medium is idle.
		panic("wifi: internal error: no contender at the planned transmission start")
	}
	m.busy, m.hasNext, m.start = true, false, start
	if len(m.txs) == 1 {
		m.single(start)
	} else {
		m.collide(start)
	}
}

// freeze brings s's backoff count up to t, when the medium turns busy: it
// counts the slots that ended idle before t. A contender whose countdown
// had ended holds a frame only if it was waiting for its IFS to transmit
// it at once; it found the medium busy and draws a backoff.
func (m *Medium) freeze(s *station, t int64) {
	if base := s.idleFrom + s.ifs; t > base {
		if k := (t - 1 - base) / m.p.slot; k >= int64(s.bo) {
			s.bo = 0
		} else {
			s.bo -= int(k)
		}
	}
	switch {
	case s.bo == 0 && s.backlog > 0:
		s.bo = m.draw(s)
	case s.bo > 0 && m.bianchi >= bianchiSlots:
		s.bo--
	}
}

// prepare chooses what s sends: the head of its queue (the AP's queues in
// turn), aggregated with the frames behind it when A-MPDU is on.
func (m *Medium) prepare(s *station) *link {
	s.txq = 0
	if s.ap {
		if s.cur < 0 || s.q[s.cur].n == 0 {
			n := len(s.q)
			for k := range n {
				if j := (s.rr + k) % n; s.q[j].n > 0 {
					s.cur, s.rr = j, (j+1)%n
					break
				}
			}
		}
		s.txq = s.cur
	}
	l := m.link(s)
	q := &s.q[s.txq]
	s.txn, s.txLen = 1, m.p.mpduLen(int(q.at(0).size))
	if m.p.ampdu && q.n > 1 {
		// A-MPDU (9.7): each MPDU behind a 4-byte delimiter, padded to
		// 4 bytes except the last.
		total := delimLen + s.txLen
		for s.txn < min(m.p.ampduFrames, q.n) {
			t := (total+3)&^3 + delimLen + m.p.mpduLen(int(q.at(s.txn).size))
			if t > m.p.ampduBytes || m.p.dataTime(t, l.rate) > m.p.ppduMax {
				break
			}
			total = t
			s.txn++
		}
		if s.txn > 1 {
			s.txLen = total
		}
	}
	s.txRTS = s.txLen > m.p.rtsThreshold
	return l
}

// link returns the link s's current exchange uses: a station's own, or,
// for the AP, its receiver's.
func (m *Medium) link(s *station) *link {
	if s.ap {
		return &m.p.links[s.txq]
	}
	return &m.p.links[s.idx]
}

// single runs an exchange with one transmitter from start: its outcome
// depends only on frame errors.
func (m *Medium) single(start int64) {
	p := m.p
	s := &m.sta[m.txs[0]]
	l := m.prepare(s)
	t := start
	if s.txRTS {
		t += l.tRTS + p.sifs + l.tCTS + p.sifs
	}
	dataEnd := t + p.dataTime(s.txLen, l.rate)
	q := &s.q[s.txq]
	m.acked = false
	for j := range s.txn {
		m.lost[j] = m.lose(s, l, p.mpduLen(int(q.at(j).size)))
		m.acked = m.acked || !m.lost[j]
	}
	resp := l.tAck
	if s.txn > 1 {
		resp = l.tBA
	}
	if m.acked {
		m.end = dataEnd + p.sifs + resp
		m.resumeAll(m.end, p.difs)
		m.c[s.idx].airtime.Add(m.end - start)
		return
	}
	m.end = dataEnd
	m.c[s.idx].airtime.Add(dataEnd - start)
	if m.bianchi >= bianchiTiming {
		m.resumeAll(dataEnd, p.difs)
		return
	}
	// Third parties decoded the frame and wait out its NAV (the ACK that
	// never came); the receiver could not decode it and waits EIFS; the
	// sender waits for its ACK timeout.
	m.resumeAll(dataEnd+p.sifs+resp, p.difs)
	r := &m.sta[len(m.sta)-1]
	if s.ap {
		r = &m.sta[s.txq]
	}
	r.idleFrom, r.ifs = dataEnd, p.eifs
	s.idleFrom = dataEnd + p.ackTimeout
}

// collide runs an exchange of several transmitters from start: every frame
// is lost; each transmitter's first frame (RTS, or the data) is all it
// sends.
func (m *Medium) collide(start int64) {
	p := m.p
	m.acked = false
	m.end = start
	for _, i := range m.txs {
		s := &m.sta[i]
		l := m.prepare(s)
		d := p.dataTime(s.txLen, l.rate)
		if s.txRTS {
			d = l.tRTS
		}
		s.txEnd = start + d
		m.end = max(m.end, s.txEnd)
		m.c[i].airtime.Add(d)
	}
	if m.bianchi >= bianchiTiming {
		m.resumeAll(m.end, p.difs)
		return
	}
	m.resumeAll(m.end, p.eifs)
	for _, i := range m.txs {
		s := &m.sta[i]
		s.idleFrom, s.ifs = max(s.txEnd+p.ackTimeout, m.end), p.difs
	}
}

func (m *Medium) resumeAll(idle, ifs int64) {
	for i := range m.sta {
		m.sta[i].idleFrom, m.sta[i].ifs = idle, ifs
	}
}

// lose draws whether an n-byte MPDU sent by s over l is lost.
func (m *Medium) lose(s *station, l *link, n int) bool {
	switch {
	case l.snr:
		return s.rng.Float64() < -math.Expm1(float64(8*n)*l.lnOK)
	case l.fer > 0:
		return s.rng.Float64() < l.fer
	}
	return false
}

// draw returns a backoff for s's current contention window.
func (m *Medium) draw(s *station) int {
	if m.backoffHook != nil {
		return m.backoffHook(s.idx, s.cw)
	}
	return s.rng.IntN(s.cw + 1)
}

// finish ends the exchange in progress at m.end: it delivers what was
// acknowledged, counts retries and drops, updates each transmitter's
// contention window and draws its next backoff.
func (m *Medium) finish() {
	p := m.p
	now := m.end
	m.busy = false
	m.busyNs.Add(m.end - m.start)
	m.exchanges.Add(1)
	collided := len(m.txs) > 1
	if collided {
		m.collisions.Add(1)
	}
	for _, i := range m.txs {
		s := &m.sta[i]
		c := &m.c[i]
		q := &s.q[s.txq]
		c.attempts.Add(1)
		switch {
		case m.acked:
			c.successes.Add(1)
		case collided:
			c.collisions.Add(1)
		default:
			c.errors.Add(1)
		}
		dropped := false
		for j := range s.txn {
			e := q.at(j)
			if e.tries > 0 {
				c.retries.Add(1)
			}
			if m.acked && !m.lost[j] {
				m.keep[j] = false
				m.deliver(s, e, now)
				continue
			}
			e.tries++
			m.keep[j] = int(e.tries) < p.retryLimit
			if !m.keep[j] {
				dropped = true
				m.drop(s, e, DropRetry)
			}
		}
		removed := q.retain(s.txn, m.keep)
		s.backlog -= removed
		c.queue.Add(int64(-removed))
		if m.acked || dropped {
			s.cw, s.cur = p.cwMin, -1
		} else {
			s.cw = min(2*s.cw+1, p.cwMax)
		}
		s.bo = m.draw(s)
		s.ready = now
		m.topUp(s)
	}
	m.plan()
}

// deliver hands e's packet to its receiver at now.
func (m *Medium) deliver(s *station, e *entry, now int64) {
	c := &m.c[s.idx]
	if c.delivered.Load() == 0 {
		c.firstAt.Store(now)
		c.firstBytes.Store(uint64(e.size))
	}
	c.lastAt.Store(now)
	c.delivered.Add(1)
	c.deliveredBytes.Add(uint64(e.size))
	c.delay.Record(now - e.enq)
	if e.p == nil {
		return
	}
	m.pending--
	t := m.epoch.Add(time.Duration(now))
	if !m.wall.IsZero() {
		m.late.RecordDuration(m.wall.Sub(t))
	}
	if s.ap {
		m.down(t, e.p, s.txq)
	} else {
		m.up(t, e.p, s.idx)
	}
}

// drop counts e as dropped for reason r and releases its packet.
func (m *Medium) drop(s *station, e *entry, r DropReason) {
	m.c[s.idx].drops[r].Add(1)
	if e.p != nil {
		m.pending--
		e.p.Release()
	}
}

// topUp keeps a saturated station's queue stocked with synthetic frames:
// one, or a full A-MPDU.
func (m *Medium) topUp(s *station) {
	if s.sat == 0 {
		return
	}
	q := &s.q[0]
	need := 1
	if m.p.ampdu {
		need = m.p.ampduFrames
	}
	for q.n < min(need, q.limit) {
		q.push(entry{enq: m.now, size: s.sat})
		s.backlog++
		m.c[s.idx].queue.Add(1)
	}
}

// Flush drops every queued packet, counting each as DropFlushed, and
// abandons the exchange in progress. Saturated stations keep contending.
func (m *Medium) Flush() {
	for i := range m.sta {
		s := &m.sta[i]
		for j := range s.q {
			q := &s.q[j]
			for q.n > 0 {
				e := q.pop()
				s.backlog--
				m.c[i].queue.Add(-1)
				if e.p != nil {
					m.drop(s, &e, DropFlushed)
				}
			}
		}
		s.cur = -1
		m.topUp(s)
	}
	if m.busy {
		m.busy = false
		m.plan()
	} else if m.started {
		m.plan()
	}
}

// Stats returns the medium's counters. Safe at any time, from any
// goroutine; it allocates and is meant for reporting.
func (m *Medium) Stats() Stats {
	el := time.Duration(m.elapsed.Load())
	s := Stats{
		Standard:   m.p.ph.standard,
		Elapsed:    el,
		Busy:       time.Duration(m.busyNs.Load()),
		Exchanges:  m.exchanges.Load(),
		Collisions: m.collisions.Load(),
		Stations:   make([]StationStats, len(m.sta)-1),
		Lateness:   m.late.Snapshot(),
	}
	if el > 0 {
		s.Utilization = float64(s.Busy) / float64(el)
	}
	for i := range s.Stations {
		s.Stations[i] = m.c[i].snapshot(m.p.names[i], el)
	}
	s.AP = m.c[len(m.sta)-1].snapshot("ap", el)
	return s
}

// Drops returns how many frames were dropped for reason r so far, by every
// station and the AP. Safe at any time; it allocates nothing.
func (m *Medium) Drops(r DropReason) uint64 {
	var n uint64
	for i := range m.c {
		n += m.c[i].drops[r].Load()
	}
	return n
}
