package flows

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/netjam/netjam/clock"
	"github.com/netjam/netjam/stats"
	"go.uber.org/goleak"
)

const ms = time.Millisecond

// runUDP runs a flow over a fakePath with plan on a manual clock, driving
// the clock from event to event until Run returns, and returns the flow,
// the path and Run's error.
func runUDP(t *testing.T, spec UDPSpec, plan func(i int) fate) (*UDPFlow, *fakePath, error) {
	t.Helper()
	clk := clock.NewManual()
	p := newFakePath(clk, plan)
	f, err := NewUDP(spec, clk, fakeSender{p}, fakeReceiver{p})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- f.Run(context.Background()) }()
	var runErr error
	finished := false
	p.drive(t, func() bool {
		select {
		case runErr = <-done:
			finished = true
		default:
		}
		return finished
	})
	return f, p, runErr
}

// header decodes a datagram's header.
func header(b []byte) (flowID uint32, seq uint64, sent time.Duration) {
	return binary.BigEndian.Uint32(b[4:]), binary.BigEndian.Uint64(b[8:]), time.Duration(binary.BigEndian.Uint64(b[16:]))
}

// checkSchedule checks that datagram k was written at start+offsets[k] and
// carries k and offsets[k].
func checkSchedule(t *testing.T, got []written, start time.Time, offsets []time.Duration) {
	t.Helper()
	if len(got) != len(offsets) {
		t.Fatalf("%d datagrams written, want %d", len(got), len(offsets))
	}
	for k, w := range got {
		id, seq, sent := header(w.data)
		if id != 7 || seq != uint64(k) || sent != offsets[k] || !w.at.Equal(start.Add(offsets[k])) {
			t.Errorf("datagram %d: flow %d seq %d stamped %v written at %v; want flow 7 seq %d stamped and written at %v",
				k, id, seq, sent, w.at.Sub(start), k, offsets[k])
		}
	}
}

func TestUDPPacingInterval(t *testing.T) {
	spec := UDPSpec{Name: "probe", FlowID: 7, Interval: 10 * ms, PacketSize: 64, Count: 20, Start: 5 * ms}
	f, p, err := runUDP(t, spec, func(int) fate { return fate{delay: 3 * ms} })
	if err != nil {
		t.Fatal(err)
	}
	var want []time.Duration
	for k := range 20 {
		want = append(want, time.Duration(k)*10*ms)
	}
	checkSchedule(t, p.sent(), clock.Epoch.Add(5*ms), want)
	s := f.Summary()
	if s.PacketsSent != 20 || s.PacketsReceived != 20 || s.LossRatio != 0 {
		t.Errorf("sent %d received %d loss %v, want 20 20 0", s.PacketsSent, s.PacketsReceived, s.LossRatio)
	}
}

// TestUDPPacingRate checks that a rate whose interval is not a whole number
// of nanoseconds is paced from k, not by adding a rounded interval.
func TestUDPPacingRate(t *testing.T) {
	// 100-byte datagrams at 3 Mbit/s: one every 266666.67 ns. A Duration of
	// 1 ms takes the datagrams due before it: 4.
	spec := UDPSpec{Name: "probe", FlowID: 7, Rate: 3e6, PacketSize: 100, Duration: ms}
	f, p, err := runUDP(t, spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkSchedule(t, p.sent(), clock.Epoch, []time.Duration{0, 266666, 533333, 800000})
	// At a constant delay the datagrams after the first (3 of 800 bits)
	// arrived over the 800 us from the first arrival to the last: the
	// rate exactly.
	if got, want := f.Summary().ThroughputBps, 3e6; got != want {
		t.Errorf("throughput %v, want %v", got, want)
	}
}

// TestUDPLateSenderKeepsSchedule lets the clock jump past several due times
// at once: the late datagrams go at once, and the next ones at their own
// times.
func TestUDPLateSenderKeepsSchedule(t *testing.T) {
	clk := clock.NewManual()
	p := newFakePath(clk, nil)
	f, err := NewUDP(UDPSpec{Name: "probe", FlowID: 7, Interval: 10 * ms, PacketSize: 64, Count: 6}, clk, fakeSender{p}, fakeReceiver{p})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- f.Run(context.Background()) }()
	waitFor(t, "the second datagram's timer", func() bool { n, ok := clk.Next(); return ok && n.Equal(clock.Epoch.Add(10*ms)) })
	clk.Set(clock.Epoch.Add(35 * ms)) // 10, 20 and 30 ms are due now
	waitFor(t, "the fifth datagram's timer", func() bool { n, ok := clk.Next(); return ok && n.Equal(clock.Epoch.Add(40*ms)) })
	clk.Set(clock.Epoch.Add(40 * ms))
	waitFor(t, "the sixth datagram's timer", func() bool { n, ok := clk.Next(); return ok && n.Equal(clock.Epoch.Add(50*ms)) })
	clk.Set(clock.Epoch.Add(50 * ms))
	// Every datagram arrives at once, so Run ends without waiting for the
	// drain timer, which this test never reaches.
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := clk.Since(); got != 50*ms {
		t.Errorf("the clock is at %v after Run, want 50ms", got)
	}
	var got []time.Duration
	for _, w := range p.sent() {
		_, _, sent := header(w.data)
		got = append(got, sent)
	}
	want := []time.Duration{0, 35 * ms, 35 * ms, 35 * ms, 40 * ms, 50 * ms}
	if len(got) != len(want) {
		t.Fatalf("send times %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("send times %v, want %v", got, want)
		}
	}
}

// TestUDPImpairments checks every counter against what the fake path did.
func TestUDPImpairments(t *testing.T) {
	spec := UDPSpec{Name: "probe", FlowID: 7, Interval: 10 * ms, PacketSize: 100, Count: 100}
	plan := func(i int) fate {
		f := fate{delay: 5 * ms}
		switch i {
		case 3, 50, 51, 52, 99: // lost; 99 makes Run wait the drain time
			f.drop = true
		case 10, 20:
			f.dup = true
		case 30: // at 333 ms, after 31 (315) and 32 (325): reordered
			f.delay = 33 * ms
		case 60: // at 700 ms, after 61..69: reordered
			f.delay = 100 * ms
		case 80: // a straggler arriving after the drain: lost
			f.delay = 10 * time.Second
		case 70: // truncated: malformed, the datagram is lost
			f.truncate = 10
		case 41: // a sequence number never sent: malformed, lost
			f.mutate = func(b []byte) { binary.BigEndian.PutUint64(b[8:], 5000) }
		case 40: // delivered, plus a copy with another flow id: malformed
			f.foreign = func(b []byte) []byte { binary.BigEndian.PutUint32(b[4:], 8); return b }
		}
		return f
	}
	f, p, err := runUDP(t, spec, plan)
	if err != nil {
		t.Fatal(err)
	}
	s := f.Summary()
	// Lost: 3, 50, 51, 52, 99 (dropped), 70, 41 (mangled), 80 (late).
	want := UDPSummary{PacketsSent: 100, PacketsReceived: 92, Lost: 8, LossRatio: 0.08, Reordered: 2, Duplicates: 2, Malformed: 3}
	got := *s.UDPSummary
	got.JitterMs, got.DelayMs = 0, stats.Summary{}
	if got != want {
		t.Errorf("summary\n got %+v\nwant %+v", got, want)
	}
	// 90 datagrams took 5 ms, one 33 ms and one 100 ms.
	d := s.DelayMs
	// Min, max and mean are exact; a percentile is within the histogram's
	// relative error of 1/128.
	if d.Count != 92 || d.Min != 5 || d.Max != 100 || math.Abs(d.P50-5) > 5.0/128 || math.Abs(d.Mean-583.0/92) > 1e-9 {
		t.Errorf("delay %+v, want 92 datagrams, min and p50 5, max 100, mean %v", d, 583.0/92)
	}
	// The 91 datagrams of 800 bits after the first arrived over the
	// 980 ms from the first arrival (0 at 5 ms) to the last (98 at
	// 985 ms); nothing arrived after the last datagram went (990 ms).
	if want := 91 * 800 / 0.98; s.ThroughputBps != want || s.BytesAfterStop != 0 {
		t.Errorf("throughput %v, %d bytes after the stop; want %v, 0", s.ThroughputBps, s.BytesAfterStop, want)
	}
	// The last datagram went at 990 ms; the drain is twice the largest
	// delay seen (100 ms) plus 200 ms.
	if got := p.clk.Since(); got != 1390*ms {
		t.Errorf("Run ended at %v, want 1.39s", got)
	}
	smp := f.Sample(p.clk.Now())
	if smp.Packets != 92 || smp.Bytes != 9200 || smp.DelaySum != 583*ms {
		t.Errorf("sample %+v, want 92 packets, 9200 bytes, 583ms of delay", smp)
	}
}

// TestUDPFixedDelay checks that a constant delay gives an exact summary.
func TestUDPFixedDelay(t *testing.T) {
	spec := UDPSpec{Name: "probe", FlowID: 7, Interval: 10 * ms, PacketSize: 125, Count: 50}
	f, _, err := runUDP(t, spec, func(int) fate { return fate{delay: 7 * ms} })
	if err != nil {
		t.Fatal(err)
	}
	s := f.Summary()
	want := stats.Summary{Count: 50, Mean: 7, Min: 7, P50: 7, P95: 7, P99: 7, Max: 7}
	if s.DelayMs != want || s.JitterMs != 0 || s.LossRatio != 0 {
		t.Errorf("delay %+v jitter %v loss %v, want %+v, 0, 0", s.DelayMs, s.JitterMs, s.LossRatio, want)
	}
	// 1000 bits every 10 ms.
	if s.ThroughputBps != 100000 {
		t.Errorf("throughput %v, want 100000", s.ThroughputBps)
	}
}

// TestUDPJitter checks RFC 3550's estimator against a sequence computed by
// hand: delays 10, 12, 10, 15 ms give |D| = 2, 2, 5 ms and
//
//	J1 = 0 + (2 - 0)/16           = 0.125
//	J2 = 0.125 + (2 - 0.125)/16   = 0.2421875
//	J3 = 0.2421875 + (5 - 0.2421875)/16 = 0.53955078125 ms.
func TestUDPJitter(t *testing.T) {
	delays := []time.Duration{10 * ms, 12 * ms, 10 * ms, 15 * ms}
	spec := UDPSpec{Name: "probe", FlowID: 7, Interval: 100 * ms, PacketSize: 64, Count: 4}
	f, _, err := runUDP(t, spec, func(i int) fate { return fate{delay: delays[i]} })
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Summary().JitterMs; got != 0.53955078125 {
		t.Errorf("jitter %v ms, want 0.53955078125", got)
	}
}

func TestUDPCancel(t *testing.T) {
	defer goleak.VerifyNone(t)
	clk := clock.NewManual()
	p := newFakePath(clk, func(int) fate { return fate{delay: 5 * ms} })
	f, err := NewUDP(UDPSpec{Name: "probe", FlowID: 7, Interval: 10 * ms, PacketSize: 64, Duration: time.Hour}, clk, fakeSender{p}, fakeReceiver{p})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	p.drive(t, func() bool { return f.Sample(clk.Now()).Packets >= 10 })
	// Then to 100 ms, when datagram 10 goes, 5 ms before it arrives.
	clk.Set(clock.Epoch.Add(100 * ms))
	waitFor(t, "datagram 10 sent", func() bool { return f.sent.Load() >= 11 })
	cancel()
	err = <-done
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "probe") {
		t.Fatalf("Run returned %v, want context.Canceled naming the flow", err)
	}
	// Datagrams 0..9 arrived 5 ms after they were sent, 10 ms apart: 9
	// of 512 bits over 90 ms. Those sent after the 10th are in flight,
	// not lost: the flow was cut short, not drained.
	s := f.Summary()
	if s.PacketsReceived != 10 || s.ThroughputBps != 51200 {
		t.Errorf("received %d, throughput %v; want 10, 51200", s.PacketsReceived, s.ThroughputBps)
	}
	if s.PacketsSent <= 10 || s.InFlight != s.PacketsSent-10 || s.Lost != 0 || s.LossRatio != 0 {
		t.Errorf("%d sent, %d in flight, %d lost (%v); want every one after the 10th in flight, none lost", s.PacketsSent, s.InFlight, s.Lost, s.LossRatio)
	}
}

func TestUDPCancelBeforeStart(t *testing.T) {
	defer goleak.VerifyNone(t)
	clk := clock.NewManual()
	p := newFakePath(clk, nil)
	f, err := NewUDP(UDPSpec{Name: "probe", Interval: ms, PacketSize: 64, Count: 1, Start: time.Second}, clk, fakeSender{p}, fakeReceiver{p})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	waitFor(t, "the start timer", func() bool { _, ok := clk.Next(); return ok })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run returned %v, want context.Canceled", err)
	}
	if s := f.Summary(); s.PacketsSent != 0 || s.ThroughputBps != 0 {
		t.Errorf("summary %+v, want nothing sent", *s.UDPSummary)
	}
	if err := f.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("second Run returned %v, want an error", err)
	}
}

func TestUDPSpecValidate(t *testing.T) {
	tests := []struct {
		spec UDPSpec
		want string
	}{
		{UDPSpec{Name: "a", Interval: ms, PacketSize: HeaderSize, Count: 1}, ""},
		{UDPSpec{Name: "a", Rate: 1e6, PacketSize: MaxPacketSize, Duration: time.Second}, ""},
		{UDPSpec{Interval: ms, PacketSize: 64, Count: 1}, "flows: udp flow without a name"},
		{UDPSpec{Name: "a", PacketSize: 64, Count: 1}, `flows: udp flow "a": needs a rate or an interval`},
		{UDPSpec{Name: "a", Rate: 1, Interval: ms, PacketSize: 64, Count: 1}, `flows: udp flow "a": has both a rate and an interval; set one`},
		{UDPSpec{Name: "a", Interval: ms, PacketSize: 23, Count: 1}, `flows: udp flow "a": packet size 23 is outside [24, 65507]`},
		{UDPSpec{Name: "a", Interval: ms, PacketSize: 64}, `flows: udp flow "a": needs a count or a duration`},
		{UDPSpec{Name: "a", Interval: -ms, PacketSize: 64, Count: -1, Start: -ms},
			"flows: udp flow \"a\": negative interval -1ms\nflows: udp flow \"a\": negative count -1\nflows: udp flow \"a\": negative start -1ms"},
	}
	for _, tt := range tests {
		err := tt.spec.Validate()
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tt.want {
			t.Errorf("%+v: got %q, want %q", tt.spec, got, tt.want)
		}
	}
}

// heldReceiver holds the receiver goroutine's last read (the one that ends
// with the deadline error) until hold is closed.
type heldReceiver struct {
	fakeReceiver
	hold chan struct{}
}

func (r heldReceiver) ReadFrom(b []byte) (int, net.Addr, error) {
	n, a, err := r.fakeReceiver.ReadFrom(b)
	if err != nil {
		<-r.hold
	}
	return n, a, err
}

// TestUDPRunJoinsReceiver checks that Run does not return before its
// receiver goroutine has: goleak cannot tell a goroutine that was joined
// from one that ends a moment after Run.
func TestUDPRunJoinsReceiver(t *testing.T) {
	clk := clock.NewManual()
	p := newFakePath(clk, nil)
	recv := heldReceiver{fakeReceiver{p}, make(chan struct{})}
	f, err := NewUDP(UDPSpec{Name: "probe", Interval: ms, PacketSize: 64, Count: 1}, clk, fakeSender{p}, recv)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- f.Run(context.Background()) }()
	// The one datagram goes and arrives at once; Run then stops the
	// receiver, whose last read is held. Only a broken Run returns here.
	select {
	case err := <-done:
		t.Fatalf("Run returned (%v) while its receiver was still reading", err)
	case <-time.After(50 * ms):
	}
	close(recv.hold)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
