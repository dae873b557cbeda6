package stack

import (
	"context"
	"io"
	"net/netip"
	"testing"
	"time"

	"github.com/netjam/netjam/clock"
	"github.com/netjam/netjam/hostcfg"
	"github.com/netjam/netjam/impair"
)

// A receiver acknowledges every second full-sized segment, whether the
// segments reach it one at a time (a rate spaces them out) or several at
// one instant (no rate: the sender's window arrives as a burst), as
// Linux's does (RFC 5681 4.2, __tcp_ack_snd_check). gVisor's acknowledged
// whatever one wake of its processor had taken: every segment where they
// came one at a time (1.00 ACKs a segment here), one for a whole burst
// where they came together (0.013), and on the wall clock whatever the
// machine's load let queue between wakes. The sender's ACK clock, and
// with it what a lossy return path costs, depended on the clock and the
// load: over 5% loss each way, 10 ms round trips and 1 Gbit/s, reno
// carried 6.3 Mbit/s on the virtual clock against 4.3 on the wall clock,
// where the receiver sent 1.00 and 0.53 ACKs a segment
// (third_party/gvisor/patches/0024).
func TestReceiverAcksEverySecondSegment(t *testing.T) {
	for _, tc := range []struct {
		name string
		rate uint64
	}{{"one-at-a-time", 100e6}, {"bursts", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			v := clock.NewVirtual()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go v.Run(ctx)
			path := impair.Config{Delay: impair.DelayConfig{Time: 10 * time.Millisecond}, Rate: impair.RateConfig{Bitrate: tc.rate}}
			dp := newDropPair(t, v, false, path, func(int, int) bool { return false })
			acks := 0
			dp.mu.Lock()
			dp.downSeen = func(_ time.Time, s tcpSeg) {
				if s.data == 0 && s.flags == 0x10 { // a pure ACK
					acks++
				}
			}
			dp.mu.Unlock()
			const segs = 2000
			sendAndRead(ctx, t, v, dp.a, dp.b, segs*dp.mss)
			dp.mu.Lock()
			n, a := dp.n, acks
			dp.mu.Unlock()
			ratio := float64(a) / float64(n)
			t.Logf("%d data segments, %d ACKs: %.3f an ACK a segment", n, a, ratio)
			if n < segs {
				t.Fatalf("%d data segments sent for %d: the test did not test", n, segs)
			}
			// Half the segments, and the first ACKs of quickack mode.
			if ratio < 0.49 || ratio > 0.52 {
				t.Errorf("%.3f ACKs a segment, want 0.5 (one for every second)", ratio)
			}
		})
	}
}

// A lone segment is acknowledged delayedAckTimeout (40 ms, Linux's
// TCP_DELACK_MIN) after it arrives (unread), unless the application
// reads it first (read: the reader sends the ACK, as Linux's
// tcp_cleanup_rbuf for a segment shorter than a full one), or the data
// starts again after a pause longer than the retransmission timeout
// (after-a-long-pause): then the receiver is in quickack mode, as at the
// start of the connection, for the sender's window grows only with ACKs.
func TestReceiverDelaysTheAckOfALoneSegment(t *testing.T) {
	for _, tc := range []struct {
		name       string
		pause, ack time.Duration
		read       bool
	}{
		{"unread", 100 * time.Millisecond, 40 * time.Millisecond, false},
		{"read", 100 * time.Millisecond, 0, true},
		{"after-a-long-pause", 2 * time.Second, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := clock.NewVirtual()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go v.Run(ctx)
			const oneWay = 10 * time.Millisecond
			dp := newDropPair(t, v, false, impair.Config{Delay: impair.DelayConfig{Time: oneWay}}, func(int, int) bool { return false })
			var sent, acked time.Time
			var end uint32
			dp.mu.Lock()
			dp.upSeen = func(now time.Time, s tcpSeg) {
				if s.data == 100 {
					sent, end = now, s.seq+100
				}
			}
			dp.downSeen = func(now time.Time, s tcpSeg) {
				if !sent.IsZero() && acked.IsZero() && s.ack == end {
					acked = now
				}
			}
			dp.mu.Unlock()

			ctx, stop := clock.WithTimeout(ctx, v, 10*time.Second)
			defer stop()
			l, err := dp.b.ListenTCP(5001, hostcfg.TCPOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			const first = 64 << 10
			read := make(chan error, 2)
			go func() {
				c, err := l.Accept(ctx)
				if err != nil {
					read <- err
					return
				}
				defer c.Close()
				go func() { <-ctx.Done(); c.Close() }()
				_, err = io.ReadFull(c, make([]byte, first))
				read <- err
				if tc.read {
					_, err = io.ReadFull(c, make([]byte, 100))
				}
				read <- err
				<-ctx.Done() // a FIN would acknowledge the segment
			}()
			c, err := dp.a.DialTCP(ctx, netip.AddrPortFrom(v4.b.Addr(), 5001), hostcfg.TCPOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			// Enough data to use up quickack mode's ACKs.
			if _, err := c.Write(payload(first, 1)); err != nil {
				t.Fatal(err)
			}
			if err := <-read; err != nil {
				t.Fatal(err)
			}
			tm := v.NewTimer(tc.pause)
			<-tm.C()
			if _, err := c.Write(payload(100, 2)); err != nil {
				t.Fatal(err)
			}
			if tc.read {
				if err := <-read; err != nil {
					t.Fatal(err)
				}
			}
			tm = v.NewTimer(time.Second)
			<-tm.C()
			dp.mu.Lock()
			held := acked.Sub(sent) - oneWay
			dp.mu.Unlock()
			if acked.IsZero() {
				t.Fatal("the lone segment was not acknowledged in a second")
			}
			t.Logf("the receiver held its ACK %v", held)
			if d := held - tc.ack; d < -time.Millisecond || d > time.Millisecond {
				t.Errorf("the receiver acknowledged the lone segment %v after it arrived, want %v", held, tc.ack)
			}
		})
	}
}
