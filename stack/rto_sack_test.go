package stack

import (
	"context"
	"encoding/binary"
	"io"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/netjam/netjam/clock"
	"github.com/netjam/netjam/hostcfg"
	"github.com/netjam/netjam/impair"
	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip/header"
)

// After a retransmission timeout the sender sends again what the receiver
// has not acknowledged, and not what it SACKed: Linux keeps its SACK marks
// across a timeout (tcp_timeout_mark_lost marks lost only what was not
// SACKed) unless the receiver reneged. gVisor dropped its whole scoreboard
// and sent everything again from SND.UNA: in a lab flow whose queue dropped
// 150 packets, 3 timeouts sent 608 segments again, 457 of which the
// receiver had (third_party/gvisor/patches/0019).
//
// A burst of 80 segments loses every eighth, and its first transmissions
// too, so that the recovery's retransmissions are lost and the timeout
// fires with the rest SACKed; then the path lets them through. Every data
// segment that reaches the receiver carrying only bytes it already had is
// counted. On the virtual clock, so that the losses are the same every
// run (on the wall clock, losing for the first 600 ms, a busy machine
// changed which transmissions fell in that time).
func TestTimeoutResendsOnlyWhatWasNotSACKed(t *testing.T) {
	v := clock.NewVirtual()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go v.Run(ctx)
	const segs = 80
	delivered := map[int]bool{}
	again := 0
	dp := newDropPair(t, v, false, impair.Config{Delay: impair.DelayConfig{Time: 10 * time.Millisecond}}, func(seg, n int) bool {
		if seg%8 == 0 && n <= 4 {
			return true
		}
		if delivered[seg] {
			again++
		}
		delivered[seg] = true
		return false
	})
	info, took := sendAndRead(ctx, t, v, dp.a, dp.b, segs*dp.mss)
	dp.mu.Lock()
	defer dp.mu.Unlock()
	t.Logf("%d bytes in %v of virtual time; sender: %d timeouts, %d retransmissions; %d segments dropped, %d delivered carrying only bytes the receiver had", segs*dp.mss, took, info.Timeouts, info.Retransmits, dp.drops, again)
	if info.Timeouts == 0 || dp.drops == 0 {
		t.Fatal("no timeout: the test did not test")
	}
	if again > 0 {
		t.Errorf("%d segments the receiver had sent again", again)
	}
}

// connect opens a TCP connection from a to b's port 8080 and returns its
// two ends, the dialler's and the listener's; both close at the end of the
// test.
func connect(ctx context.Context, t *testing.T, a, b *Host) (c, s *TCPConn) {
	t.Helper()
	l, err := b.ListenTCP(8080, hostcfg.TCPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan *TCPConn, 1)
	go func() {
		s, err := l.Accept(ctx)
		if err != nil {
			s = nil
		}
		accepted <- s
	}()
	c, err = a.DialTCP(ctx, netip.AddrPortFrom(v4.b.Addr(), 8080), hostcfg.TCPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if s = <-accepted; s == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { s.Close() })
	return c, s
}

// sendBurst has a send burst bytes to b over TCP and close, and waits, at
// most 30 s, until b has read them all; before, when not nil, runs once the
// connection is open, just before the burst is written.
func sendBurst(t *testing.T, a, b *Host, burst int, before func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, s := connect(ctx, t, a, b)
	got := make(chan int64, 1)
	go func() {
		n, _ := io.CopyBuffer(io.Discard, s, make([]byte, 256<<10))
		got <- n
	}()
	if before != nil {
		before()
	}
	if _, err := c.Write(payload(burst, 1)); err != nil {
		t.Fatal(err)
	}
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-got:
		if n != int64(burst) {
			t.Fatalf("received %d bytes, want %d", n, burst)
		}
	case <-ctx.Done():
		t.Fatalf("transfer did not finish in 30 s: %+v", c.Info())
	}
}

// A receiver that reneged (discarded data it had SACKed, as Linux's may
// under memory pressure) is not waited on for ever: when the timeout finds
// SND.UNA itself marked SACKed, the receiver cannot have kept it (its
// cumulative ACK would cover it), and the sender drops its SACK marks and
// sends it again, as Linux's tcp_check_sack_reneging has it. The receiver
// here reneges by proxy: the packets holding bytes 4200 to 12599 are lost
// once, and the first ACK that SACKs beyond them is rewritten to SACK all
// of the hole but its first 2800 bytes too, which the receiver does not
// have.
func TestTimeoutAfterRenegingSendsAgain(t *testing.T) {
	const burst = 40 * 1400
	var (
		mu            sync.Mutex
		isn           uint32
		lost          = map[int]bool{}
		forged        bool
		dropped       int
		forgedS, ackd uint32
	)
	dropAB := func(p []byte) bool {
		mu.Lock()
		defer mu.Unlock()
		seg, ok := parseTCP(p)
		if !ok {
			return false
		}
		if seg.flags&0x02 != 0 {
			isn = seg.seq
			return false
		}
		off := int(seg.seq - isn - 1)
		// The first transmission of the packets holding bytes 4200 to
		// 12599 (seven of 1420).
		if seg.data > 0 && off < 12600 && off+seg.data > 4200 && !lost[off] {
			lost[off] = true
			dropped++
			return true
		}
		return false
	}
	dropBA := func(p []byte) bool {
		mu.Lock()
		defer mu.Unlock()
		seg, ok := parseTCP(p)
		if !ok || forged || seg.flags&0x10 == 0 {
			return false
		}
		ack := seg.ack
		opts := p[seg.ihl+20 : seg.hdr]
		for i := 0; i < len(opts); {
			switch opts[i] {
			case 0:
				return false
			case 1:
				i++
				continue
			}
			if i+1 >= len(opts) || opts[i+1] < 2 || i+int(opts[i+1]) > len(opts) {
				return false
			}
			if opts[i] == 5 && opts[i+1] >= 10 {
				start := binary.BigEndian.Uint32(opts[i+2:])
				if int32(start-ack) >= 5*1400 {
					forgedS = ack + 2*1400
					ackd = ack
					binary.BigEndian.PutUint32(opts[i+2:], forgedS)
					tcpChecksum(p, seg.ihl)
					forged = true
				}
				return false
			}
			i += int(opts[i+1])
		}
		return false
	}
	a, b := newPair(t, pairConfig{fam: v4, sack: true, dropAB: dropAB, dropBA: dropBA})
	sendBurst(t, a, b, burst, nil)
	st := a.Stats().TCP
	mu.Lock()
	defer mu.Unlock()
	t.Logf("sender: %d timeouts, %d retransmissions; %d packets lost; SACK forged from %d (ACK %d)", st.Timeouts, st.Retransmits, dropped, forgedS-isn-1, ackd-isn-1)
	if !forged {
		t.Fatal("no ACK was rewritten: the test did not test")
	}
	if st.Timeouts == 0 {
		t.Error("no timeout: the sender cannot have taken the reneged data for SACKed")
	}
}

// tcpChecksum sets an IPv4 TCP packet's checksum again.
func tcpChecksum(p []byte, ihl int) {
	ip, tcp := header.IPv4(p), header.TCP(p[ihl:])
	tcp.SetChecksum(0)
	xsum := header.PseudoHeaderChecksum(header.TCPProtocolNumber, ip.SourceAddress(), ip.DestinationAddress(), uint16(len(tcp)))
	tcp.SetChecksum(^checksumOf(xsum, tcp))
}
