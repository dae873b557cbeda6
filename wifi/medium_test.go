package wifi

import (
	"testing"
	"time"
)

// 802.11a timing used by the exact tests below (802.11-2016 clause 17):
// slot 9, SIFS 16, DIFS 34, EIFS 16+34+44 = 94, ACKTimeout 16+9+25 = 50;
// a 1500-byte packet is a 1536-byte MPDU, 248 us at 54 Mbit/s; ACK and CTS
// at 24 Mbit/s 28 us, RTS 28 us. A basic exchange lasts 248+16+28 = 292 us.
const (
	aSlot   = 9 * us
	aDIFS   = 34 * us
	aEIFS   = 94 * us
	aACKTO  = 50 * us
	aData   = 248 * us
	aExch   = 292 * us
	aRTSExc = (28 + 16 + 28 + 16 + 248 + 16 + 28) * us
)

func TestDerivedTimes(t *testing.T) {
	for _, c := range []struct {
		std                    string
		difs, eifs, ackTimeout time.Duration
	}{
		{"802.11b", 50 * us, 364 * us, (10 + 20 + 192) * us},
		{"802.11a", aDIFS, aEIFS, aACKTO},
		{"802.11g", 28 * us, (10 + 28 + 304) * us, (10 + 9 + 25) * us},
		{"802.11n", 34 * us, 94 * us, 50 * us},
	} {
		p, err := (&Config{Standard: c.std, Stations: stations(1)}).resolve()
		if err != nil {
			t.Fatal(err)
		}
		if d, e, a := time.Duration(p.difs), time.Duration(p.eifs), time.Duration(p.ackTimeout); d != c.difs || e != c.eifs || a != c.ackTimeout {
			t.Errorf("%s: DIFS %v EIFS %v ACKTimeout %v, want %v %v %v", c.std, d, e, a, c.difs, c.eifs, c.ackTimeout)
		}
	}
}

func TestControlRate(t *testing.T) {
	for _, c := range []struct {
		std        string
		data, want uint64
	}{
		{"802.11b", 11e6, 2e6}, {"802.11b", 1e6, 1e6}, {"802.11b", 5.5e6, 2e6},
		{"802.11a", 54e6, 24e6}, {"802.11a", 18e6, 12e6}, {"802.11a", 9e6, 6e6},
		{"802.11n", 65e6, 24e6}, {"802.11n", 6.5e6, 6e6}, {"802.11n", 13e6, 12e6},
	} {
		if got := phys[c.std].ctrlRate(c.data); got != c.want {
			t.Errorf("%s at %s: control rate %s, want %s", c.std, mbps(c.data), mbps(got), mbps(c.want))
		}
	}
}

// TestSingleStation follows one station through the basic access rules:
// immediate access after DIFS, a backoff when the medium is busy, the
// post-backoff that follows every exchange, and immediate access again once
// the post-backoff is over.
func TestSingleStation(t *testing.T) {
	m, col := newTestMedium(t, Config{Standard: "802.11a", Stations: stations(1)})
	sc := &script{draws: map[int][]int{0: {5, 3, 9}}}
	m.backoffHook = sc.hook
	// Frame 1 finds the medium idle: DIFS + DATA + SIFS + ACK.
	m.Arrive(at(0), pkt(1500, 1), 0, false)
	// Frame 2 queues behind it; after frame 1 the station draws 5:
	// 326 + DIFS + 5 slots = 405, delivered 292 us later.
	m.Arrive(at(100*us), pkt(1500, 2), 0, false)
	// After frame 2 the post-backoff draws 3: counting from 697 + DIFS =
	// 731 it ends at 758. Frame 3 arrives during it and waits for it.
	m.Arrive(at(720*us), pkt(1500, 3), 0, false)
	// After frame 3 (1050) the post-backoff draws 9 and ends at 1165;
	// frame 4 comes later and is sent the instant it arrives.
	m.Arrive(at(2000*us), pkt(1500, 4), 0, false)
	run(m, 3*time.Millisecond)
	d1 := aDIFS + aExch
	d2 := d1 + aDIFS + 5*aSlot + aExch
	d3 := d2 + aDIFS + 3*aSlot + aExch
	d4 := 2000*us + aExch
	if d1 != 326*us || d2 != 697*us || d3 != 1050*us {
		t.Fatalf("arithmetic: %v %v %v", d1, d2, d3)
	}
	wantDeliveries(t, col.got, []delivery{{d1, 1, 0, false}, {d2, 2, 0, false}, {d3, 3, 0, false}, {d4, 4, 0, false}})
	for _, d := range sc.log {
		if d.cw != 15 {
			t.Errorf("draw %+v: CW should stay at CWmin without failures", d)
		}
	}
	st := m.Stats()
	s := st.Stations[0]
	if s.Attempts != 4 || s.Successes != 4 || s.Delivered != 4 || s.Retries != 0 || s.Queue != 0 {
		t.Errorf("station stats %+v", s)
	}
	if st.Busy != 4*aExch || s.Airtime != 4*aExch || st.Exchanges != 4 {
		t.Errorf("busy %v airtime %v exchanges %d, want %v", st.Busy, s.Airtime, st.Exchanges, 4*aExch)
	}
	if s.Delay.Max != float64(d2-100*us) || s.Delay.Min != float64(aExch) {
		t.Errorf("delay %+v", s.Delay)
	}
}

// TestFreezeAndResume: two stations draw 2 and 5 slots while the medium is
// busy. The first transmits after 2 idle slots; the second freezes with 3
// left and resumes after the next DIFS.
func TestFreezeAndResume(t *testing.T) {
	m, col := newTestMedium(t, Config{Standard: "802.11a", Stations: stations(3)})
	sc := &script{draws: map[int][]int{0: {2}, 1: {5}, 2: {20}}}
	m.backoffHook = sc.hook
	m.Arrive(at(0), pkt(1500, 1), 2, false)     // 34..326
	m.Arrive(at(50*us), pkt(1500, 2), 0, false) // busy: draws 2
	m.Arrive(at(60*us), pkt(1500, 3), 1, false) // busy: draws 5
	run(m, 2*time.Millisecond)
	e0 := aDIFS + aExch            // 326
	s0 := e0 + aDIFS + 2*aSlot     // 378
	e1 := s0 + aExch               // 670
	s1 := e1 + aDIFS + (5-2)*aSlot // 731
	wantDeliveries(t, col.got, []delivery{{e0, 1, 2, false}, {e1, 2, 0, false}, {s1 + aExch, 3, 1, false}})
}

// TestCollisionEIFSAndRecovery: two stations whose counters expire in the
// same slot collide. They wait ACKTimeout, then DIFS, and retry from CW 31;
// a third station, which heard the collision, waits EIFS.
func TestCollisionEIFSAndRecovery(t *testing.T) {
	m, col := newTestMedium(t, Config{Standard: "802.11a", Stations: stations(3)})
	sc := &script{draws: map[int][]int{0: {3, 2, 10}, 1: {3, 6, 0}, 2: {7, 0}}}
	m.backoffHook = sc.hook
	m.Arrive(at(0), pkt(1500, 1), 2, false) // 34..326; then station 2 post-backoff draws 7
	m.Arrive(at(50*us), pkt(1500, 2), 0, false)
	m.Arrive(at(60*us), pkt(1500, 3), 1, false)
	// Both drew 3: they transmit together at 326 + 34 + 27 = 387; the
	// data ends at 635. Station 2's post-backoff (from 360) has counted 3
	// of 7 slots and freezes with 4.
	c := aDIFS + aExch + aDIFS + 3*aSlot
	collEnd := c + aData
	// Station 2 gets a frame during the collision: its post-backoff is
	// still pending (4 slots), so it keeps it.
	m.Arrive(at(500*us), pkt(1500, 4), 2, false)
	// Colliders: ACKTimeout + DIFS, then 2 and 6 slots from CW 31:
	// station 0 at 635+50+34+18 = 737. Station 2: EIFS, base 729, 4 slots
	// would end at 765; at 737 it has counted 1 and freezes with 3.
	s0 := collEnd + aACKTO + aDIFS + 2*aSlot
	e0 := s0 + aExch // 1029
	// Then: station 1 has 6-2 = 4 slots left, station 2 has 3: station 2
	// goes at 1029 + 34 + 27 = 1090, station 1 freezes with 1.
	e2 := e0 + aDIFS + 3*aSlot + aExch
	e1 := e2 + aDIFS + 1*aSlot + aExch
	run(m, 3*time.Millisecond)
	if s0 != 737*us || e2 != 1382*us {
		t.Fatalf("arithmetic: %v %v", s0, e2)
	}
	wantDeliveries(t, col.got, []delivery{{aDIFS + aExch, 1, 2, false}, {e0, 2, 0, false}, {e2, 4, 2, false}, {e1, 3, 1, false}})
	wantCW := map[[2]int]bool{{0, 15}: true, {1, 15}: true, {2, 15}: true, {0, 31}: true, {1, 31}: true}
	for _, d := range sc.log[:5] {
		if !wantCW[[2]int{d.station, d.cw}] {
			t.Errorf("draw %+v", d)
		}
	}
	st := m.Stats()
	if st.Collisions != 1 || st.Stations[0].Collisions != 1 || st.Stations[1].Collisions != 1 || st.Stations[0].Retries != 1 || st.Stations[2].Collisions != 0 {
		t.Errorf("stats %+v", st)
	}
	if st.Stations[0].Airtime != aData+aExch {
		t.Errorf("station 0 airtime %v, want a collided data frame and an exchange", st.Stations[0].Airtime)
	}
}

// TestRetryLimitDrop: every data frame is lost; after RetryLimit
// transmissions, with CW doubling each time, the frame is dropped and CW
// returns to CWmin.
func TestRetryLimitDrop(t *testing.T) {
	m, col := newTestMedium(t, Config{Standard: "802.11a", RetryLimit: 4, Stations: []StationConfig{{FrameErrorRate: 1}}})
	sc := &script{}
	m.backoffHook = sc.hook // always 0
	m.Arrive(at(0), pkt(1500, 1), 0, false)
	run(m, 10*time.Millisecond)
	if len(col.got) != 0 {
		t.Fatalf("delivered %+v", col.got)
	}
	var cws []int
	for _, d := range sc.log {
		cws = append(cws, d.cw)
	}
	if want := []int{31, 63, 127, 15}; !equal(cws, want) {
		t.Errorf("contention windows %v, want %v", cws, want)
	}
	s := m.Stats().Stations[0]
	if s.Attempts != 4 || s.Errors != 4 || s.Retries != 3 || s.Drops["retry"] != 1 || s.Queue != 0 {
		t.Errorf("stats %+v", s)
	}
	// Each attempt: DIFS, the data, ACKTimeout.
	if got, want := m.Stats().Busy, 4*aData; got != want {
		t.Errorf("busy %v, want %v", got, want)
	}
	if _, ok := m.Next(); ok {
		t.Error("Next reports an event with nothing queued")
	}
	// The attempts start at 34, 34+248+50+34 = 366, 698, 1030.
	m2, _ := newTestMedium(t, Config{Standard: "802.11a", RetryLimit: 4, Stations: []StationConfig{{FrameErrorRate: 1}}})
	m2.backoffHook = (&script{}).hook
	m2.Arrive(at(0), pkt(1500, 1), 0, false)
	for i, want := range []time.Duration{34, 366, 698, 1030} {
		next, ok := m2.Next()
		if !ok || next != at(want*us+4*us) { // decided aCCATime after the start
			t.Fatalf("attempt %d: next event %v, want start %v", i, next.Sub(at(0)), want*us)
		}
		m2.Advance(next)
		end, _ := m2.Next()
		m2.Advance(end)
	}
}

// TestRTSCTS: frames above the threshold go after RTS/CTS; below, not. Two
// stations collide on their RTS: the collision costs only the RTS.
func TestRTSCTS(t *testing.T) {
	m, col := newTestMedium(t, Config{Standard: "802.11a", RTSThreshold: 1000, Stations: stations(2)})
	sc := &script{draws: map[int][]int{0: {0}, 1: {1}}}
	m.backoffHook = sc.hook
	m.Arrive(at(0), pkt(1500, 1), 0, false)
	m.Arrive(at(0), pkt(1500, 2), 1, false)
	// Both access at once after DIFS: RTS collision 34..62; ACKTimeout (as
	// CTSTimeout) and DIFS, then station 0 draws 0, station 1 draws 1.
	s0 := aDIFS + 28*us + aACKTO + aDIFS
	e0 := s0 + aRTSExc
	e1 := e0 + aDIFS + aSlot + aRTSExc
	run(m, 2*time.Millisecond)
	wantDeliveries(t, col.got, []delivery{{e0, 1, 0, false}, {e1, 2, 1, false}})
	if st := m.Stats(); st.Busy != 28*us+2*aRTSExc || st.Stations[0].Airtime != 28*us+aRTSExc {
		t.Errorf("busy %v airtime %v", st.Busy, st.Stations[0].Airtime)
	}
	// A 100-byte packet (136-byte MPDU) goes without RTS.
	col.got = nil
	start := 3 * time.Millisecond
	m.Arrive(at(start), pkt(100, 3), 0, false)
	run(m, 4*time.Millisecond)
	small := 20*us + 4*us*((16+8*136+6+215)/216) + 16*us + 28*us
	wantDeliveries(t, col.got, []delivery{{start + small, 3, 0, false}})
}

// TestAMPDU: three queued frames go as one A-MPDU acknowledged by a
// BlockAck (802.11n).
func TestAMPDU(t *testing.T) {
	m, col := newTestMedium(t, Config{Standard: "802.11n", AMPDU: true, Stations: stations(1)})
	for i := range 3 {
		m.Arrive(at(0), pkt(1500, uint32(i)), 0, false)
	}
	run(m, time.Millisecond)
	// Subframes: 4 + 1538 padded to 1544, twice, then 4 + 1538: 4630
	// bytes, 143 symbols at 65 Mbit/s: 36 + 572 us. BlockAck: 32 bytes at
	// 24 Mbit/s, 32 us.
	end := aDIFS + 608*us + 16*us + 32*us
	wantDeliveries(t, col.got, []delivery{{end, 0, 0, false}, {end, 1, 0, false}, {end, 2, 0, false}})
	if s := m.Stats().Stations[0]; s.Attempts != 1 || s.Delivered != 3 {
		t.Errorf("stats %+v", s)
	}
}

// TestAMPDULimits: aggregation stops at the byte limit, the frame limit,
// and the 5.484 ms an HT-mixed PPDU may last.
func TestAMPDULimits(t *testing.T) {
	for _, c := range []struct {
		name   string
		cfg    Config
		queued int
		want   int
	}{
		{"frames", Config{AMPDUMaxFrames: 4}, 10, 4},
		{"bytes", Config{AMPDUMaxBytes: 4000}, 10, 2},                     // 1544 + 1542 = 3086; a third would make 4630
		{"duration", Config{}, 64, 28},                                    // 5.484 ms at 65 Mbit/s: (1362 symbols x 260 - 22) / 8 = 44262 bytes; 27 x 1544 + 1542 = 43230
		{"single", Config{}, 1, 1},                                        // a single frame is a plain MPDU
		{"slow", Config{Stations: []StationConfig{{Rate: 6.5e6}}}, 64, 2}, // 5.484 ms at 6.5 Mbit/s: 4423 bytes
	} {
		cfg := c.cfg
		cfg.Standard, cfg.AMPDU = "802.11n", true
		if cfg.Stations == nil {
			cfg.Stations = stations(1)
		}
		m, _ := newTestMedium(t, cfg)
		for i := range c.queued {
			m.Arrive(at(0), pkt(1500, uint32(i)), 0, false)
		}
		s := &m.sta[0]
		m.prepare(s)
		if s.txn != c.want {
			t.Errorf("%s: aggregated %d, want %d", c.name, s.txn, c.want)
		}
		m.Flush()
	}
}

// TestQueueLimit: arrivals beyond the limit are dropped and counted; the
// frame in transmission counts against the limit until acknowledged.
func TestQueueLimit(t *testing.T) {
	m, col := newTestMedium(t, Config{Standard: "802.11a", QueueLimit: 2, Stations: stations(1)})
	for i := range 5 {
		m.Arrive(at(0), pkt(1500, uint32(i)), 0, false)
	}
	m.Arrive(at(0), pkt(1500, 9), 0, true)
	run(m, 5*time.Millisecond)
	st := m.Stats()
	if len(col.got) != 3 || st.Stations[0].Drops["queue"] != 3 || m.Drops(DropQueue) != 3 {
		t.Errorf("delivered %d, drops %v", len(col.got), st.Stations[0].Drops)
	}
}

// TestDownlinkRoundRobin: the AP serves its per-station queues in turn, one
// exchange each, and contends with the stations.
func TestDownlinkRoundRobin(t *testing.T) {
	m, col := newTestMedium(t, Config{Standard: "802.11a", Stations: stations(2)})
	m.Arrive(at(0), pkt(1500, 1), 0, true)
	m.Arrive(at(0), pkt(1500, 2), 0, true)
	m.Arrive(at(0), pkt(1500, 3), 1, true)
	m.Arrive(at(0), pkt(1500, 4), 1, false)
	run(m, 10*time.Millisecond)
	var down []uint32
	for _, d := range col.got {
		if d.downlink {
			down = append(down, d.id)
			if want := map[uint32]int{1: 0, 2: 0, 3: 1}[d.id]; d.station != want {
				t.Errorf("packet %d delivered to station %d", d.id, d.station)
			}
		}
	}
	if !equal(down, []uint32{1, 3, 2}) {
		t.Errorf("downlink order %v, want [1 3 2]", down)
	}
	if st := m.Stats(); st.AP.Delivered != 3 || st.Stations[1].Delivered != 1 {
		t.Errorf("stats %+v", st)
	}
}

func equal[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestAMPDUFrameErrors: with a frame error rate each MPDU of an A-MPDU
// lives or dies alone; the lost ones are resent in later A-MPDUs until the
// retry limit, so every packet is delivered or dropped, never lost track of.
func TestAMPDUFrameErrors(t *testing.T) {
	m, col := newTestMedium(t, Config{Standard: "802.11n", AMPDU: true, Seed: 5, Stations: []StationConfig{{FrameErrorRate: 0.3}}})
	const n = 300
	for i := range n {
		m.Arrive(at(0), pkt(1500, uint32(i)), 0, true)
	}
	run(m, time.Second)
	st := m.Stats()
	ap := st.AP
	if int(ap.Delivered)+int(ap.Drops["retry"]) != n || len(col.got) != int(ap.Delivered) || ap.Queue != 0 {
		t.Fatalf("delivered %d + dropped %v of %d; queue %d", ap.Delivered, ap.Drops, n, ap.Queue)
	}
	// About 30% of MPDU transmissions fail: retries ~ 0.3/0.7 per packet.
	if r := float64(ap.Retries) / n; r < 0.3 || r > 0.6 {
		t.Errorf("retries per packet %.2f, want about 0.43", r)
	}
	if ap.Attempts > n/10 {
		t.Errorf("%d exchanges for %d packets: not aggregated", ap.Attempts, n)
	}
	seen := map[uint32]bool{}
	for _, d := range col.got {
		if seen[d.id] || !d.downlink || d.station != 0 {
			t.Fatalf("bad delivery %+v", d)
		}
		seen[d.id] = true
	}
}

// TestDeterminism: the same seed and arrivals give the same deliveries and
// counters; another seed does not.
func TestDeterminism(t *testing.T) {
	runOnce := func(seed uint64) ([]delivery, Stats) {
		cfg := Config{Standard: "802.11g", Seed: seed, Stations: []StationConfig{
			{FrameErrorRate: 0.1}, {SNR: 27}, {Saturate: 1000}, {Saturate: 200},
		}}
		m, col := newTestMedium(t, cfg)
		for i := range 400 {
			t0 := at(time.Duration(i) * 250 * us)
			m.Arrive(t0, pkt(1200, uint32(i)), i%2, i%3 == 0)
		}
		run(m, time.Second)
		return col.got, m.Stats()
	}
	a, sa := runOnce(1)
	b, sb := runOnce(1)
	c, _ := runOnce(2)
	if !equal(a, b) || sa.Exchanges != sb.Exchanges || sa.Collisions != sb.Collisions || sa.Busy != sb.Busy {
		t.Error("same seed, different results")
	}
	if equal(a, c) {
		t.Error("different seeds, same deliveries")
	}
	if len(a) < 350 || sa.Collisions == 0 {
		t.Errorf("%d deliveries, %d collisions: the scenario should be busy", len(a), sa.Collisions)
	}
}

// TestBackgroundOnly: with only saturated stations Next reports nothing,
// and Advance catches up in one call; a real packet then needs every event.
func TestBackgroundOnly(t *testing.T) {
	m, col := newTestMedium(t, Config{Standard: "802.11a", Stations: []StationConfig{{Saturate: 1500}, {}}})
	if _, ok := m.Next(); ok {
		t.Fatal("Next reports an event with only background traffic")
	}
	run(m, 100*time.Millisecond)
	st := m.Stats()
	if st.Elapsed != 100*time.Millisecond || st.Stations[0].Delivered < 250 || st.Utilization < 0.7 {
		t.Fatalf("background: %+v", st)
	}
	m.Arrive(at(100*time.Millisecond), pkt(1500, 1), 1, false)
	for len(col.got) == 0 {
		next, ok := m.Next()
		if !ok {
			t.Fatal("no event with a packet queued")
		}
		m.Advance(next)
	}
	if _, ok := m.Next(); ok {
		t.Error("Next still reports events after the packet left")
	}
	// The background station's service time: at least DIFS + an exchange.
	if d := m.Stats().Stations[0].Delay; d.Min < float64(aDIFS+aExch) {
		t.Errorf("service time %+v", d)
	}
}

// TestFlush: queued packets are released and counted; the medium keeps
// working afterwards.
func TestFlush(t *testing.T) {
	m, col := newTestMedium(t, Config{Standard: "802.11a", Stations: stations(2)})
	for i := range 5 {
		m.Arrive(at(0), pkt(1500, uint32(i)), i%2, i == 4)
	}
	run(m, 40*us) // the first exchange has started
	m.Flush()
	if st := m.Stats(); m.Drops(DropFlushed) != 5 || st.Stations[0].Queue != 0 || st.AP.Queue != 0 {
		t.Fatalf("flushed %d, stats %+v", m.Drops(DropFlushed), st)
	}
	// The medium has been idle for more than DIFS: immediate access.
	m.Arrive(at(time.Millisecond), pkt(1500, 9), 1, false)
	run(m, 2*time.Millisecond)
	wantDeliveries(t, col.got, []delivery{{time.Millisecond + aExch, 9, 1, false}})
}

func TestArrivePanicsOnBadStation(t *testing.T) {
	m, _ := newTestMedium(t, Config{Standard: "802.11a", Stations: stations(2)})
	defer func() {
		if r := recover(); r != "wifi: Arrive for station 2 of 2" {
			t.Errorf("recovered %v", r)
		}
	}()
	m.Arrive(at(0), pkt(100, 0), 2, false)
}
