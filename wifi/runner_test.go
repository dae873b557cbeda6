package wifi

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/netjam/netjam/clock"
	"github.com/netjam/netjam/impair"
)

// waitFor polls cond; it fails the test if cond does not hold within a
// generous bound. It synchronizes with the Runner's goroutine; it asserts
// nothing about speed.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// chanSink delivers into a channel, for Runner tests.
type chanSink chan delivery

func (c chanSink) deliver(downlink bool) func(time.Time, *impair.Packet, int) {
	return func(now time.Time, p *impair.Packet, station int) {
		c <- delivery{now.Sub(clock.Epoch), binary.BigEndian.Uint32(p.Data), station, downlink}
		p.Release()
	}
}

func TestRunnerOnManualClock(t *testing.T) {
	clk := clock.NewManual()
	out := make(chanSink, 16)
	r, err := NewRunner(Config{Standard: "802.11a", Stations: stations(2)}, clk, out.deliver(false), out.deliver(true))
	if err != nil {
		t.Fatal(err)
	}
	sc := &script{draws: map[int][]int{2: {5}}}
	r.m.backoffHook = sc.hook // before Start: the goroutine sees it
	r.Start(context.Background())
	defer r.Close()
	r.Send(pkt(1500, 1), 1, true)
	r.Send(pkt(1500, 2), 0, true)
	waitFor(t, "arrivals", func() bool { return r.Stats().AP.Queue == 2 })
	// Step the clock from timer to timer, as the real clock would pass,
	// waiting after each step until the Runner has re-armed its timer (or
	// delivered everything).
	var got []delivery
	for len(got) < 2 {
		next, ok := clk.Next()
		if !ok {
			t.Fatalf("no timer armed with %d of 2 delivered", len(got))
		}
		clk.Set(next)
		waitFor(t, "the runner to handle its timer", func() bool {
			for {
				select {
				case d := <-out:
					got = append(got, d)
					continue
				default:
				}
				break
			}
			n, ok := clk.Next()
			return len(got) == 2 || ok && n.After(next)
		})
	}
	// As in TestSingleStation: DIFS + exchange, then DIFS + 5 slots +
	// exchange; the AP's queues in turn, from station 0's.
	d1 := aDIFS + aExch
	wantDeliveries(t, got, []delivery{{d1, 2, 0, true}, {d1 + aDIFS + 5*aSlot + aExch, 1, 1, true}})
	if l := r.Stats().Lateness; l.Max != 0 || l.Count != 2 {
		t.Fatalf("lateness on a manual clock stepped exactly: %+v", l)
	}
}

func TestRunnerCloseFlushesAndCounts(t *testing.T) {
	clk := clock.NewManual()
	r, err := NewRunner(Config{Standard: "802.11a", InputLimit: 4, Stations: stations(1)}, clk,
		func(_ time.Time, p *impair.Packet, _ int) { p.Release() }, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Not started: the channel fills up and the rest are input drops.
	accepted := 0
	for i := range 6 {
		if r.Send(pkt(100, uint32(i)), 0, false) {
			accepted++
		}
	}
	if accepted != 4 {
		t.Fatalf("accepted %d, want 4", accepted)
	}
	r.Start(context.Background())
	waitFor(t, "arrivals", func() bool { return r.Stats().Stations[0].Queue == 4 })
	r.Close()
	r.Close() // idempotent
	if r.Send(pkt(100, 9), 0, false) {
		t.Fatal("Send after Close accepted a packet")
	}
	st := r.Stats().Stations[0]
	if st.Drops["input"] != 2 || st.Drops["flushed"] != 5 || st.Delivered != 0 || st.Queue != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestRunnerStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	r, err := NewRunner(Config{Standard: "802.11g", Stations: []StationConfig{{Saturate: 1500}}}, clock.Real{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Start(ctx)
	cancel()
	r.Close() // returns once the goroutine has ended; goleak checks the rest
}

// TestRunnerBackground: with only saturated stations the Runner still
// wakes now and then, so the statistics follow the clock.
func TestRunnerBackground(t *testing.T) {
	clk := clock.NewManual()
	r, err := NewRunner(Config{Standard: "802.11g", Stations: []StationConfig{{Saturate: 1500}, {Saturate: 1500}}}, clk, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Start(context.Background())
	defer r.Close()
	waitFor(t, "the refresh timer", func() bool { n, ok := clk.Next(); return ok && n.Equal(clock.Epoch.Add(refresh)) })
	clk.Set(clock.Epoch.Add(refresh))
	waitFor(t, "background exchanges", func() bool { return r.Stats().Elapsed == refresh && r.Stats().Exchanges > 10 })
}

// TestRunnerRealClock sends through a real-time Runner and checks only
// what cannot flake: every packet arrives, none before its logical time,
// none sooner than a frame exchange (DATA, SIFS, ACK) after it was sent.
// Not DIFS more: a frame that finds the medium idle for DIFS already goes
// at once (10.3.4.2), which the saturated station allows whenever it is
// counting down its backoff. (A bound with DIFS, 326 us, failed once in a
// CI run: 299.5 us.)
func TestRunnerRealClock(t *testing.T) {
	out := make(chan time.Time, 100)
	r, err := NewRunner(Config{Standard: "802.11g", Stations: []StationConfig{{}, {Saturate: 1500}}}, clock.Real{},
		func(now time.Time, p *impair.Packet, _ int) {
			if time.Now().Before(now) {
				t.Errorf("delivered before its delivery time")
			}
			out <- now
			p.Release()
		}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Start(context.Background())
	defer r.Close()
	p, l := r.m.p, r.m.p.links[0]
	exch := time.Duration(p.dataTime(p.mpduLen(1500), l.rate) + p.sifs + l.tAck)
	if exch != 298*us { // 254 + 10 + 34: 802.11g, DATA at 54 Mbit/s, ACK at 24
		t.Fatalf("a frame exchange of 1500 bytes lasts %v", exch)
	}
	const n = 50
	start := time.Now()
	for i := range n {
		r.Send(pkt(1500, uint32(i)), 0, false)
	}
	for range n {
		select {
		case d := <-out:
			if d.Sub(start) < exch {
				t.Errorf("delivered %v after the first send, faster than one exchange", d.Sub(start))
			}
		case <-time.After(10 * time.Second):
			t.Fatal("packets lost")
		}
	}
	if st := r.Stats(); st.Stations[0].Delivered != n || st.Lateness.Count != n {
		t.Errorf("stats %+v", st.Stations[0])
	}
}
