package stack

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"slices"
	"sync"
	"testing"

	"github.com/netjam/netjam/clock"
	"github.com/netjam/netjam/netif"
)

// capture is a Host whose Output keeps copies of what it sends.
type capture struct {
	*Host
	mu  sync.Mutex
	out [][]byte
}

func newCapture(t testing.TB, addrs ...netip.Prefix) *capture {
	t.Helper()
	c := &capture{}
	h, err := NewHost(HostConfig{Name: "h", Addrs: addrs, MTU: 1500, Clock: clock.NewManual(),
		Output: func(pkt [][]byte) {
			c.mu.Lock()
			c.out = append(c.out, slices.Concat(pkt...))
			c.mu.Unlock()
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	c.Host = h
	return c
}

func (c *capture) sent() [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.out)
}

// checksum is the Internet checksum (RFC 1071) of the concatenation of bs.
func checksum(bs ...[]byte) uint16 {
	var sum uint32
	var odd []byte
	for _, b := range bs {
		b = append(odd, b...)
		odd = nil
		for len(b) >= 2 {
			sum += uint32(binary.BigEndian.Uint16(b))
			b = b[2:]
		}
		if len(b) == 1 {
			odd = []byte{b[0]}
		}
	}
	if odd != nil {
		sum += uint32(odd[0]) << 8
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return ^uint16(sum)
}

// echoRequest builds an ICMP or ICMPv6 echo request from src to dst.
func echoRequest(src, dst netip.Addr, id, seq uint16, data []byte) []byte {
	icmp := make([]byte, 8+len(data))
	binary.BigEndian.PutUint16(icmp[4:], id)
	binary.BigEndian.PutUint16(icmp[6:], seq)
	copy(icmp[8:], data)
	if src.Is4() {
		icmp[0] = 8 // echo request
		binary.BigEndian.PutUint16(icmp[2:], checksum(icmp))
		ip := make([]byte, 20)
		ip[0] = 0x45
		binary.BigEndian.PutUint16(ip[2:], uint16(20+len(icmp)))
		ip[8], ip[9] = 64, 1
		s, d := src.As4(), dst.As4()
		copy(ip[12:], s[:])
		copy(ip[16:], d[:])
		binary.BigEndian.PutUint16(ip[10:], checksum(ip))
		return append(ip, icmp...)
	}
	icmp[0] = 128 // echo request
	s, d := src.As16(), dst.As16()
	pseudo := make([]byte, 40)
	copy(pseudo, s[:])
	copy(pseudo[16:], d[:])
	binary.BigEndian.PutUint32(pseudo[32:], uint32(len(icmp)))
	pseudo[39] = 58
	binary.BigEndian.PutUint16(icmp[2:], checksum(pseudo, icmp))
	ip := make([]byte, 40)
	ip[0] = 0x60
	binary.BigEndian.PutUint16(ip[4:], uint16(len(icmp)))
	ip[6], ip[7] = 58, 64
	copy(ip[8:], s[:])
	copy(ip[24:], d[:])
	return append(ip, icmp...)
}

// TestEcho checks that a host answers ICMP echo requests, so ping-like
// probes work, synchronously within Inject.
func TestEcho(t *testing.T) {
	for _, fam := range []family{v4, v6} {
		t.Run(fam.name, func(t *testing.T) {
			h := newCapture(t, fam.b)
			data := []byte("netjam ping")
			h.Inject(echoRequest(fam.a.Addr(), fam.b.Addr(), 0x1234, 7, data))
			out := h.sent()
			if len(out) != 1 {
				t.Fatalf("sent %d packets, want 1 echo reply", len(out))
			}
			reply := out[0]
			var icmp []byte
			var src, dst netip.Addr
			if fam.a.Addr().Is4() {
				icmp = reply[20:]
				src, _ = netip.AddrFromSlice(reply[12:16])
				dst, _ = netip.AddrFromSlice(reply[16:20])
				if icmp[0] != 0 || checksum(reply[:20]) != 0 || checksum(icmp) != 0 {
					t.Fatalf("not a valid echo reply: %x", reply)
				}
			} else {
				icmp = reply[40:]
				src, _ = netip.AddrFromSlice(reply[8:24])
				dst, _ = netip.AddrFromSlice(reply[24:40])
				if reply[6] != 58 || icmp[0] != 129 {
					t.Fatalf("not an echo reply: %x", reply)
				}
			}
			if src != fam.b.Addr() || dst != fam.a.Addr() {
				t.Errorf("reply from %v to %v", src, dst)
			}
			if binary.BigEndian.Uint16(icmp[4:]) != 0x1234 || binary.BigEndian.Uint16(icmp[6:]) != 7 || !bytes.Equal(icmp[8:], data) {
				t.Errorf("reply does not echo the request: %x", icmp)
			}
		})
	}
}

// TestInjectMalformed feeds broken packets: each is counted once as
// Malformed (by Inject's own check or by gVisor's), none is answered, and
// nothing panics.
func TestInjectMalformed(t *testing.T) {
	h := newCapture(t, v4.b, v6.b)
	good4 := echoRequest(v4.a.Addr(), v4.b.Addr(), 1, 1, []byte("x"))
	good6 := echoRequest(v6.a.Addr(), v6.b.Addr(), 1, 1, []byte("x"))
	mod := func(p []byte, f func([]byte)) []byte { p = slices.Clone(p); f(p); return p }
	cases := map[string][]byte{
		"empty":               {},
		"version 5":           {0x50, 0, 0, 0},
		"short ipv4":          good4[:19],
		"ipv4 ihl 4":          mod(good4, func(p []byte) { p[0] = 0x44 }),
		"ipv4 length long":    mod(good4, func(p []byte) { p[3] += 10 }),
		"ipv4 length short":   mod(good4, func(p []byte) { binary.BigEndian.PutUint16(p[2:], 10) }),
		"ipv4 bad checksum":   mod(good4, func(p []byte) { p[10] ^= 0xff }),
		"icmp bad checksum":   mod(good4, func(p []byte) { p[22] ^= 0xff }),
		"short ipv6":          good6[:39],
		"ipv6 payload long":   mod(good6, func(p []byte) { p[5] += 10 }),
		"icmpv6 truncated":    mod(good6, func(p []byte) { binary.BigEndian.PutUint16(p[4:], 2) }),
		"icmpv6 bad checksum": mod(good6, func(p []byte) { p[42] ^= 0xff }),
	}
	for name, p := range cases {
		before := h.Stats()
		h.Inject(p)
		after := h.Stats()
		if got := after.Malformed - before.Malformed; got != 1 {
			t.Errorf("%s: Malformed went up by %d, want 1 (%+v)", name, got, after)
		}
	}
	if out := h.sent(); len(out) != 0 {
		t.Errorf("host answered %d malformed packets", len(out))
	}
	// The same host still answers a good one.
	h.Inject(good4)
	if out := h.sent(); len(out) != 1 {
		t.Errorf("sent %d packets for a good echo request, want 1", len(out))
	}
}

// FuzzInject feeds arbitrary bytes to a host with both families: Inject
// must never panic, whatever gVisor makes of the input.
func FuzzInject(f *testing.F) {
	f.Add(echoRequest(v4.a.Addr(), v4.b.Addr(), 1, 1, []byte("seed")))
	f.Add(echoRequest(v6.a.Addr(), v6.b.Addr(), 1, 1, []byte("seed")))
	f.Add([]byte{0x45, 0, 0, 20, 0, 0, 0x20, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2}) // IPv4 fragment, TCP
	f.Add([]byte{0x60, 0, 0, 0, 0, 8, 44, 64})                                          // truncated IPv6 with a fragment header
	f.Add([]byte{})
	h := newCapture(f, v4.b, v6.b)
	f.Fuzz(func(t *testing.T, pkt []byte) {
		h.Inject(pkt)
		h.mu.Lock()
		h.out = h.out[:0] // replies are allowed; keep memory flat
		h.mu.Unlock()
	})
}

func TestConfigValidate(t *testing.T) {
	out := func([][]byte) {}
	cases := []struct {
		cfg  HostConfig
		want string
	}{
		{HostConfig{}, `stack: host "": name: must not be empty
addrs: at least one address is required
mtu: 0 is out of range 576..65536
clock: must be set
output: must be set`},
		{HostConfig{Name: "h", Addrs: []netip.Prefix{v6.a, {}, netip.MustParsePrefix("::ffff:10.0.0.1/120"), netip.MustParsePrefix("224.0.0.1/4"), v6.a},
			MTU: 1000, Clock: realClock, Output: out}, `stack: host "h": addrs[1]: invalid Prefix is not a valid prefix
addrs[2]: ::ffff:10.0.0.1/120: use the plain IPv4 form, not IPv4-mapped IPv6
addrs[3]: 224.0.0.1/4 is not a unicast host address
addrs[4]: fd00::1 is listed twice
mtu: 1000 is below IPv6's minimum of 1280`},
		{HostConfig{Name: "h", Addrs: []netip.Prefix{v4.a}, MTU: 65537, Clock: realClock, Output: out}, `stack: host "h": mtu: 65537 is out of range 576..65536`},
	}
	for _, c := range cases {
		h, err := NewHost(c.cfg)
		if err == nil {
			h.Close()
			t.Errorf("NewHost(%+v) succeeded", c.cfg)
			continue
		}
		if err.Error() != c.want {
			t.Errorf("NewHost error:\n%s\nwant:\n%s", err, c.want)
		}
	}
	for _, mtu := range []int{netif.MinMTU, netif.MaxMTU} {
		h, err := NewHost(HostConfig{Name: "h", Addrs: []netip.Prefix{v4.a}, MTU: mtu, Clock: realClock, Output: out})
		if err != nil {
			t.Errorf("MTU %d: %v", mtu, err)
			continue
		}
		h.Close()
	}
}
