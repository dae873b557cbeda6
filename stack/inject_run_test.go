package stack

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"sync/atomic"
	"testing"

	"github.com/netjam/netjam/clock"
	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip/header"
)

// runSegment returns a TCP segment over IPv4 or IPv6 with payload bytes,
// its checksum field scrambled, as impair.JoinHeaders leaves a merged
// one's (partial).
func runSegment(v6 bool, payload int) []byte {
	tcp := make([]byte, 32+payload)
	binary.BigEndian.PutUint16(tcp[0:], 40000)
	binary.BigEndian.PutUint16(tcp[2:], 5201)
	binary.BigEndian.PutUint32(tcp[4:], 1000)
	binary.BigEndian.PutUint32(tcp[8:], 1)
	tcp[12], tcp[13] = 8<<4, 0x18
	tcp[16], tcp[17] = 0xde, 0xad
	for i := range payload {
		tcp[32+i] = byte(i*7 + i/251)
	}
	if v6 {
		ip := make([]byte, 40)
		ip[0], ip[6], ip[7] = 0x60, 6, 64
		binary.BigEndian.PutUint16(ip[4:], uint16(len(tcp)))
		ip[8], ip[23], ip[24], ip[39] = 0xfd, 2, 0xfd, 1
		return append(ip, tcp...)
	}
	ip := header.IPv4([]byte{0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 2, 10, 0, 0, 1})
	binary.BigEndian.PutUint16(ip[2:], uint16(20+len(tcp)))
	ip.SetChecksum(^ip.CalculateChecksum())
	return append(ip, tcp...)
}

// cut returns b in parts that end at each of ends.
func cut(b []byte, ends ...int) [][]byte {
	var parts [][]byte
	from := 0
	for _, e := range append(ends, len(b)) {
		parts = append(parts, b[from:e])
		from = e
	}
	return parts
}

// runCase is a run of parts the inbound tests build: a TCP segment's
// (tcp), or another packet's.
type runCase struct {
	name string
	run  [][]byte
	tcp  bool
}

// runCases are the runs of the inbound tests: TCP segments over IPv4 and
// IPv6 in parts, headers only, one part, empty parts, and a UDP datagram.
func runCases() []runCase {
	v4, v6 := runSegment(false, 4000), runSegment(true, 4000)
	udp := runSegment(false, 100)
	udp[9] = 17
	return []runCase{
		{"IPv4", cut(v4, 1052, 2052, 3052), true},
		{"IPv6", cut(v6, 1072, 2072, 3072), true},
		{"headers only", [][]byte{runSegment(false, 0)}, true},
		{"one part", [][]byte{v4}, true},
		{"empty parts", cut(v4, 52, 52, 2000, 2000), true},
		{"not TCP", cut(udp, 60, 100), false},
	}
}

// TestInboundRunIsInboundJoined: a run given in parts reaches gVisor as
// the same bytes as the parts joined given whole with a partial checksum,
// taken as checked alike, and building it allocates nothing.
func TestInboundRunIsInboundJoined(t *testing.T) {
	for _, c := range runCases() {
		joined := bytes.Join(c.run, nil)
		want, wantChecked := inbound(joined, nil, true)
		got, checked := inboundRun(c.run, nil, len(joined))
		if !bytes.Equal(got.Flatten(), want.Flatten()) {
			t.Errorf("%s: gVisor gets other bytes than for the parts joined", c.name)
		}
		if checked != wantChecked || checked != (c.name != "not TCP") {
			t.Errorf("%s: taken as checked %v, joined %v", c.name, checked, wantChecked)
		}
		want.Release()
		got.Release()
		if raceEnabled {
			continue // sync.Pool drops what is put back at random
		}
		if n := testing.AllocsPerRun(100, func() {
			b, _ := inboundRun(c.run, nil, len(joined))
			b.Release()
		}); n != 0 {
			t.Errorf("%s: %v allocations per run", c.name, n)
		}
	}
}

// countingLender counts its releases, and scribbles over its bytes at
// each, as a pool that hands them out again would. It may be given back on
// another goroutine (gVisor's) than the one that looks at it.
type countingLender struct {
	released atomic.Int32
	bytes    []byte
}

func (l *countingLender) Release() {
	l.released.Add(1)
	for i := range l.bytes {
		l.bytes[i] = 0xee
	}
}

// TestInboundRunLentKeepsTheParts: parts lent (every one, or every other)
// reach gVisor as the same bytes as the parts joined and copied, in place:
// a part is given back only once the buffer holding it is released, each
// exactly once, and a part with no payload (headers only, or not a TCP
// segment's, which is copied) at once. Building it allocates nothing.
func TestInboundRunLentKeepsTheParts(t *testing.T) {
	for _, c := range runCases() {
		joined := bytes.Join(c.run, nil)
		want, wantChecked := inboundRun([][]byte{joined}, nil, len(joined))
		for _, every := range []int{1, 2} {
			run := make([][]byte, len(c.run))
			lenders := make([]*countingLender, len(c.run))
			own := make([]Lender, len(c.run))
			for i := range own {
				run[i] = bytes.Clone(c.run[i])
				if i%every == 0 {
					lenders[i] = &countingLender{bytes: run[i]}
					own[i] = lenders[i]
				}
			}
			got, checked := inboundRun(run, own, len(joined))
			if !bytes.Equal(got.Flatten(), want.Flatten()) {
				t.Errorf("%s, every %d lent: gVisor gets other bytes than for the parts joined", c.name, every)
			}
			if checked != wantChecked {
				t.Errorf("%s, every %d lent: checksums taken as checked: %v, for the parts joined and copied: %v", c.name, every, checked, wantChecked)
			}
			for i, l := range lenders {
				kept := c.tcp && len(c.run[i]) > 0 && !(i == 0 && len(c.run[0]) == tcpHeadersLen(c.run[0], len(joined)))
				if l != nil && l.released.Load() != map[bool]int32{true: 0, false: 1}[kept] {
					t.Errorf("%s, every %d lent: part %d given back %d times before the buffer was released (kept: %v)", c.name, every, i, l.released.Load(), kept)
				}
			}
			got.Release()
			for i, l := range lenders {
				if l != nil && l.released.Load() != 1 {
					t.Errorf("%s, every %d lent: part %d given back %d times, want once", c.name, every, i, l.released.Load())
				}
			}
			if raceEnabled {
				continue // sync.Pool drops what is put back at random
			}
			for _, l := range lenders {
				if l != nil {
					l.bytes = nil // no more scribbling
				}
			}
			if n := testing.AllocsPerRun(100, func() {
				b, _ := inboundRun(run, own, len(joined))
				b.Release()
			}); n != 0 {
				t.Errorf("%s, every %d lent: %v allocations per run", c.name, every, n)
			}
		}
		want.Release()
	}
}

// TestInboundLentKeepsThePayload: a packet lent whole reaches gVisor as
// the same bytes as copied; a TCP segment's payload stays lent until the
// buffer is released, anything else is copied before it is given back.
func TestInboundLentKeepsThePayload(t *testing.T) {
	udp := runSegment(false, 100)
	udp[9] = 17
	for _, c := range []struct {
		name string
		pkt  []byte
		kept bool
	}{
		{"TCP", runSegment(false, 3000), true},
		{"TCP, headers only", runSegment(false, 0), false},
		{"UDP", udp, false},
	} {
		want, wantChecked := inbound(c.pkt, nil, true)
		pkt := bytes.Clone(c.pkt)
		l := &countingLender{bytes: pkt}
		got, checked := inbound(pkt, l, true)
		if !bytes.Equal(got.Flatten(), want.Flatten()) {
			t.Errorf("%s: gVisor gets other bytes than a copy", c.name)
		}
		if checked != wantChecked {
			// Read from bytes given back (scribbled over) already.
			t.Errorf("%s: checksums taken as checked: %v, for a copy: %v", c.name, checked, wantChecked)
		}
		if kept := l.released.Load() == 0; kept != c.kept {
			t.Errorf("%s: given back %d times before the buffer was released", c.name, l.released.Load())
		}
		got.Release()
		want.Release()
		if l.released.Load() != 1 {
			t.Errorf("%s: given back %d times, want once", c.name, l.released.Load())
		}
	}
}

// TestInjectRunRefusesWhatInjectRefuses: parts that make no packet are
// counted as malformed, as Inject counts them, and never panic.
func TestInjectRunRefusesWhatInjectRefuses(t *testing.T) {
	h, err := NewHost(HostConfig{Name: "h", Addrs: []netip.Prefix{netip.MustParsePrefix("10.0.0.1/24")}, MTU: 1500,
		Clock: clock.Real{}, Seed: 1, Output: func([][]byte) {}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	v4 := runSegment(false, 1000)
	long := runSegment(false, 1000)
	binary.BigEndian.PutUint16(long[2:], 2000) // longer than what is given
	for i, run := range [][][]byte{nil, {nil}, {v4[:10], v4[10:]}, cut(long, 100), {{0x70}, v4[1:]}} {
		before := h.Stats()
		h.InjectRun(run, 2)
		st := h.Stats()
		if st.Malformed != before.Malformed+1 || st.InPackets != before.InPackets+2 {
			t.Errorf("run %d: malformed %d -> %d, packets %d -> %d", i, before.Malformed, st.Malformed, before.InPackets, st.InPackets)
		}
	}
}
