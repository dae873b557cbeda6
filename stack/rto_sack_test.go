package stack

import (
	"context"
	"encoding/binary"
	"io"
	"net/netip"
	"sync"
	"testing"
	"time"

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
// A burst of 80 segments loses a packet in every eight, and every
// transmission of those for the first 600 ms, so that the recovery's
// retransmissions are lost too and the timeout fires with the rest SACKed;
// then the path heals. Every data packet that reaches the receiver
// carrying only bytes it already had is counted.
func TestTimeoutResendsOnlyWhatWasNotSACKed(t *testing.T) {
	const (
		burst = 80 * 1400
		heal  = 600 * time.Millisecond
	)
	w := &resendWatch{got: make([]bool, burst+1), start: time.Now()}
	a, b := newPair(t, pairConfig{fam: v4, sack: true, dropAB: w.drop(heal)})
	sendBurst(t, a, b, burst, func() {
		w.mu.Lock()
		w.start = time.Now()
		w.mu.Unlock()
	})
	st := a.Stats().TCP
	w.mu.Lock()
	defer w.mu.Unlock()
	t.Logf("sender: %d timeouts, %d retransmissions; %d packets dropped, %d delivered carrying only bytes the receiver had", st.Timeouts, st.Retransmits, w.dropped, w.again)
	if st.Timeouts == 0 || w.dropped == 0 {
		t.Fatal("no timeout: the test did not test")
	}
	if w.again > 0 {
		t.Errorf("%d segments the receiver had SACKed sent again after a timeout", w.again)
	}
}

// connect opens a TCP connection from a to b's port 8080 and returns its
// two ends, the dialler's and the listener's; both close at the end of the
// test.
func connect(ctx context.Context, t *testing.T, a, b *Host) (c, s *TCPConn) {
	t.Helper()
	l, err := b.ListenTCP(8080, TCPOptions{})
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
	c, err = a.DialTCP(ctx, netip.AddrPortFrom(v4.b.Addr(), 8080), TCPOptions{})
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

// resendWatch drops what the test loses and counts what reaches the
// receiver again.
type resendWatch struct {
	mu      sync.Mutex
	start   time.Time
	isn     uint32
	synced  bool
	got     []bool // bytes of the stream received, by offset
	dropped int
	again   int
}

func (w *resendWatch) drop(heal time.Duration) func([]byte) bool {
	return func(p []byte) bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		seg, ok := parseTCP(p)
		if !ok {
			return false
		}
		if seg.flags&0x02 != 0 {
			w.isn, w.synced = seg.seq, true
			return false
		}
		data := seg.data
		if !w.synced || data <= 0 {
			return false
		}
		off := int(seg.seq - w.isn - 1)
		if off < 0 || off+data > len(w.got)-1 {
			return false
		}
		// Every eighth 1400 bytes' first byte: about one packet in
		// eight, wherever the sender cuts its segments.
		if time.Since(w.start) < heal {
			for o := off; o < off+data; o++ {
				if o%(8*1400) == 3*1400 {
					w.dropped++
					return true
				}
			}
		}
		had := true
		for o := off; o < off+data; o++ {
			had = had && w.got[o]
			w.got[o] = true
		}
		if had {
			w.again++
		}
		return false
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
