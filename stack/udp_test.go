package stack

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"
)

// TestUDP sends datagrams both ways between a listening socket on b and a
// connected one on a, sizes up to MTU-28 (the largest unfragmented IPv4
// datagram; on IPv6, whose header is 20 bytes longer, the largest sizes
// are fragmented and reassembled).
func TestUDP(t *testing.T) {
	const mtu = 1500
	sizes := []int{0, 1, 100, 1000, mtu - 48, mtu - 28}
	for _, fam := range []family{v4, v6} {
		t.Run(fam.name, func(t *testing.T) {
			var mu sync.Mutex
			var largest int
			var fragmented bool
			a, b := newPair(t, pairConfig{fam: fam, mtu: mtu, dropAB: func(p []byte) bool {
				mu.Lock()
				defer mu.Unlock()
				largest = max(largest, len(p))
				fragmented = fragmented || p[0]>>4 == 4 && binary.BigEndian.Uint16(p[6:])&0x3fff != 0 || p[0]>>4 == 6 && p[6] == 44
				return false
			}})
			srv, err := b.ListenUDP(53)
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			cli, err := a.DialUDP(netip.AddrPortFrom(fam.b.Addr(), 53))
			if err != nil {
				t.Fatal(err)
			}
			defer cli.Close()
			deadline := time.Now().Add(10 * time.Second) // against hangs only
			srv.SetDeadline(deadline)
			cli.SetDeadline(deadline)
			buf := make([]byte, 65536)
			for i, n := range sizes {
				msg := payload(n, uint64(i))
				if _, err := cli.Write(msg); err != nil {
					t.Fatalf("client write %d bytes: %v", n, err)
				}
				got, from, err := srv.ReadFrom(buf)
				if err != nil {
					t.Fatalf("server read: %v", err)
				}
				if !bytes.Equal(buf[:got], msg) {
					t.Fatalf("server got %d bytes, want %d", got, n)
				}
				if want := cli.LocalAddr().String(); from.String() != want {
					t.Errorf("datagram from %v, want %v", from, want)
				}
				reply := payload(n, uint64(100+i))
				if _, err := srv.WriteTo(reply, from); err != nil {
					t.Fatalf("server write %d bytes: %v", n, err)
				}
				got, err = cli.Read(buf)
				if err != nil {
					t.Fatalf("client read: %v", err)
				}
				if !bytes.Equal(buf[:got], reply) {
					t.Fatalf("client got %d bytes, want %d", got, n)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if largest != mtu {
				t.Errorf("largest packet on the wire: %d bytes, want the MTU, %d", largest, mtu)
			}
			if fragmented != (fam.name == "ipv6") {
				t.Errorf("fragmented: %v", fragmented)
			}
		})
	}
}

// TestUDPDualStack checks that a listener on a host with both families
// serves both, and answers each from the right family.
func TestUDPDualStack(t *testing.T) {
	a, b := newDualPair(t)
	srv, err := b.ListenUDP(0)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	port := uint16(srv.LocalAddr().(*net.UDPAddr).Port)
	for _, dst := range []netip.Addr{v4.b.Addr(), v6.b.Addr()} {
		cli, err := a.DialUDP(netip.AddrPortFrom(dst, port))
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		srv.SetDeadline(deadline)
		cli.SetDeadline(deadline)
		msg := []byte(fmt.Sprint("to ", dst))
		if _, err := cli.Write(msg); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 100)
		n, from, err := srv.ReadFrom(buf)
		if err != nil || !bytes.Equal(buf[:n], msg) {
			t.Fatalf("ReadFrom = %q, %v", buf[:n], err)
		}
		if _, err := srv.WriteTo(buf[:n], from); err != nil {
			t.Fatalf("WriteTo(%v): %v", from, err)
		}
		if n, err := cli.Read(buf); err != nil || !bytes.Equal(buf[:n], msg) {
			t.Fatalf("Read = %q, %v", buf[:n], err)
		}
		cli.Close()
	}
}

// newDualPair returns two hosts with an IPv4 and an IPv6 address each.
func newDualPair(t *testing.T) (a, b *Host) {
	ab, ba := newWire(nil), newWire(nil)
	mk := func(name string, out *wire, addrs ...netip.Prefix) *Host {
		h, err := NewHost(HostConfig{Name: name, Addrs: addrs, MTU: 1500, Clock: realClock, Output: out.output})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		return h
	}
	a = mk("a", ab, v4.a, v6.a)
	b = mk("b", ba, v4.b, v6.b)
	ab.to.Store(b)
	ba.to.Store(a)
	return a, b
}

// TestUDPListenerCountsReceiveDrops: a listener that nobody reads holds
// what its 4 MiB buffer takes and counts the rest as receive drops: every
// datagram sent is either read or counted, none vanishes.
func TestUDPListenerCountsReceiveDrops(t *testing.T) {
	a, b := newPair(t, pairConfig{fam: v4})
	srv, err := b.ListenUDP(53)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cli, err := a.DialUDP(netip.AddrPortFrom(v4.b.Addr(), 53))
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	const n = 6000
	msg := payload(1400, 1)
	for range n {
		if _, err := cli.Write(msg); err != nil {
			t.Fatal(err)
		}
	}
	drops := srv.(interface{ ReceiveDrops() uint64 }).ReceiveDrops()
	buf := make([]byte, 2048)
	read := 0
	for {
		srv.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		if _, _, err := srv.ReadFrom(buf); err != nil {
			break
		}
		read++
	}
	t.Logf("%d datagrams read, %d dropped at the full buffer", read, drops)
	if drops == 0 || read < 2000 || uint64(read)+drops != n {
		t.Errorf("%d read and %d dropped of %d sent: want at least 2000 held (4 MiB), the rest dropped, all counted", read, drops, n)
	}
}
