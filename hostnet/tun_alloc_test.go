package hostnet

import (
	"net"
	"net/netip"
	"testing"

	"github.com/netjam/netjam/netif"
)

// TestTUNIOAllocatesNothing: writing a packet into the device and
// reading one from it, with or without a virtio-net header, allocate
// nothing.
func TestTUNIOAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops its I/O state at random under the race detector")
	}
	ns := newNetns(t)
	for _, offload := range []bool{false, true} {
		tun, err := OpenTUN(TUNConfig{Name: "njalloc0", Addrs: []netip.Prefix{netip.MustParsePrefix("10.98.7.1/24")}, Netns: nsPath(ns), Offload: offload})
		if err != nil {
			t.Fatal(err)
		}
		// A UDP datagram to a port nobody listens on, from the peer's
		// side: the kernel takes it and drops it.
		pkt := []byte{0x45, 0, 0, 28, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 98, 7, 2, 10, 98, 7, 1, 0x30, 0x39, 0x30, 0x39, 0, 8, 0, 0}
		var sum uint32
		for i := 0; i < 20; i += 2 {
			sum += uint32(pkt[i])<<8 | uint32(pkt[i+1])
		}
		for sum > 0xffff {
			sum = sum&0xffff + sum>>16
		}
		pkt[10], pkt[11] = byte(^sum>>8), byte(^sum)
		vec := [][]byte{pkt}
		write := func() {
			if _, err := tun.WritePacket(vec, netif.GSO{}); err != nil {
				t.Fatal(err)
			}
		}
		write()
		if n := testing.AllocsPerRun(1000, write); n != 0 {
			t.Errorf("offload %v: %v allocations per write", offload, n)
		}
		// And reading what the kernel sends into the device.
		if err := inNetns(ns, func() error {
			c, err := net.Dial("udp", "10.98.7.2:9")
			if err != nil {
				return err
			}
			defer c.Close()
			for range 300 {
				c.Write([]byte("x"))
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 65536)
		read := func() {
			if _, _, err := tun.ReadPacket(buf); err != nil {
				t.Fatal(err)
			}
		}
		if n := testing.AllocsPerRun(200, read); n != 0 {
			t.Errorf("offload %v: %v allocations per read", offload, n)
		}
		tun.Close()
	}
}
