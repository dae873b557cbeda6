package stack

import (
	"context"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/netjam/netjam/hostcfg"
)

// A loss that a tail loss probe repairs is counted as one (TCPStats'
// TLPRecoveries, the peer's tlp_recoveries in TUN mode). The tail of a
// first burst is lost once; nothing follows it for a while, so the probe
// timeout sends it again, and the ACK of the next burst, past the probe,
// ends the episode with a congestion response (RFC 8985, 7.4.2; Linux's
// TCPLossProbeRecovery). gVisor cleared its probe flag just before the
// recovery that counts it, so this case, the one the counter exists for,
// was never counted (third_party/gvisor/patches/0014).
func TestTailLossProbeRepairIsCounted(t *testing.T) {
	const burst = 30001 // its last segment is shorter than an MSS
	var dropped atomic.Bool
	a, b := newPair(t, pairConfig{fam: v4, sack: true, dropAB: func(p []byte) bool {
		ihl := int(p[0]&0x0f) * 4
		if len(p) < ihl+20 || p[9] != 6 {
			return false
		}
		data := len(p) - ihl - int(p[ihl+12]>>4)*4
		// The first data segment shorter than an MSS is the first
		// burst's tail.
		return data > 0 && data < 1000 && dropped.CompareAndSwap(false, true)
	}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := b.ListenTCP(8080, hostcfg.TCPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var read atomic.Int64
	got := acceptAndDrain(ctx, l, countingDiscard{&read})
	c, err := a.DialTCP(ctx, netip.AddrPortFrom(v4.b.Addr(), 8080), hostcfg.TCPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(payload(burst, 1)); err != nil {
		t.Fatal(err)
	}
	// Long enough for the probe (at most a retransmission timeout,
	// 200 ms or more) to repair the tail before the next burst.
	waitFor(t, "the first burst received", func() bool { return read.Load() >= burst })
	if _, err := c.Write(payload(burst, 2)); err != nil {
		t.Fatal(err)
	}
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-got:
		if n != 2*burst {
			t.Fatalf("received %d bytes, want %d", n, 2*burst)
		}
	case <-ctx.Done():
		t.Fatalf("transfer did not finish: %+v", c.Info())
	}
	// The receiver may read the end before the sender has taken the
	// last ACKs: wait for the sender's FIN to be acknowledged, which
	// comes after all of them.
	waitFor(t, "the sender's FIN acknowledged", func() bool {
		s := c.Info().State
		return s != "ESTABLISHED" && s != "FIN-WAIT1"
	})
	st := a.Stats().TCP
	t.Logf("sender: %+v", st)
	if !dropped.Load() {
		t.Fatal("no segment was dropped: the test did not test")
	}
	// A probe more is possible on a busy machine (an ACK held past the
	// probe timeout; its original's DSACK ends that episode uncounted),
	// a timeout is not.
	if st.Retransmits == 0 || st.Timeouts != 0 {
		t.Fatalf("%d retransmissions and %d timeouts: want the probe and no timeout", st.Retransmits, st.Timeouts)
	}
	if st.TLPRecoveries != 1 {
		t.Errorf("%d losses repaired by a tail loss probe counted, want 1", st.TLPRecoveries)
	}
}

// countingDiscard discards what it is written, counting it.
type countingDiscard struct{ n *atomic.Int64 }

func (d countingDiscard) Write(p []byte) (int, error) {
	d.n.Add(int64(len(p)))
	return len(p), nil
}
