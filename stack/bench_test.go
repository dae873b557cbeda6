package stack

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"testing"
	"time"

	"github.com/netjam/netjam/hostcfg"
	"github.com/netjam/netjam/netif"
)

// BenchmarkTCPThroughput measures one unimpaired TCP flow between two hosts
// wired back to back in memory, and reports Mbit/s of payload from the
// first write until the receiver has read the last byte.
//
// wire=direct calls the far host's Inject from Output, on the sending
// goroutine: the cost of gVisor's TCP, the link and one copy per packet,
// all serialized through few goroutines. wire=async hands each packet to a
// goroutine per direction through a bounded channel, as the emulator's
// Runners do, so the two hosts run on both cores; it is the better guide
// to what a Host pushes through the emulator.
func BenchmarkTCPThroughput(b *testing.B) {
	for _, async := range []int{0, 4096} {
		for _, mtu := range []int{1500, 9000, netif.MaxMTU} {
			name := fmt.Sprintf("wire=direct/mtu=%d", mtu)
			if async > 0 {
				name = fmt.Sprintf("wire=async/mtu=%d", mtu)
			}
			b.Run(name, func(b *testing.B) { benchTCP(b, mtu, async) })
		}
	}
}

func benchTCP(b *testing.B, mtu, async int) {
	a, srv := newPair(b, pairConfig{fam: v4, mtu: mtu, sack: true, async: async})
	ctx := context.Background()
	l, err := srv.ListenTCP(5001, hostcfg.TCPOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	read := acceptAndDrain(ctx, l, io.Discard)
	c, err := a.DialTCP(ctx, netip.AddrPortFrom(v4.b.Addr(), 5001), hostcfg.TCPOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	chunk := payload(1<<20, 9)
	b.SetBytes(int64(len(chunk)))
	b.ReportAllocs()
	var sent int64
	start := time.Now()
	for b.Loop() {
		n, err := c.Write(chunk)
		if err != nil {
			b.Fatal(err)
		}
		sent += int64(n)
	}
	c.CloseWrite()
	got := <-read
	elapsed := time.Since(start)
	if got != sent {
		b.Fatalf("receiver read %d of %d bytes", got, sent)
	}
	b.ReportMetric(float64(sent)*8/elapsed.Seconds()/1e6, "Mbit/s")
	b.ReportMetric(float64(c.Info().Retransmits), "retransmits")
}
