package stack

import (
	"io"
	"net/netip"
	"testing"

	"github.com/netjam/netjam/hostcfg"
)

// BenchmarkRelayEcho moves 8 MiB through the TCP echo service and back
// per iteration, in memory: the cost of the echo ring growing from its
// first size, against one allocated at its cap.
func BenchmarkRelayEcho(b *testing.B) {
	client, _ := newRelayPair(b, hostcfg.RelayConfig{Services: true})
	data := payload(8<<20, 9)
	got := make([]byte, len(data))
	b.SetBytes(int64(2 * len(data)))
	for b.Loop() {
		c, err := client.DialTCP(b.Context(), netip.AddrPortFrom(peer4, echoPort), hostcfg.TCPOptions{})
		if err != nil {
			b.Fatal(err)
		}
		go c.Write(data)
		if _, err := io.ReadFull(c, got); err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
}
