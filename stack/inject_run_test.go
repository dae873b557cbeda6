package stack

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/netjam/netjam/clock"
	"gvisor.dev/gvisor/pkg/tcpip/header"
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

// TestInboundRunIsInboundJoined: a run given in parts reaches gVisor as
// the same bytes as the parts joined given whole with a partial checksum,
// taken as checked alike, and building it allocates nothing.
func TestInboundRunIsInboundJoined(t *testing.T) {
	v4, v6 := runSegment(false, 4000), runSegment(true, 4000)
	udp := runSegment(false, 100)
	udp[9] = 17
	for _, c := range []struct {
		name string
		run  [][]byte
	}{
		{"IPv4", cut(v4, 1052, 2052, 3052)},
		{"IPv6", cut(v6, 1072, 2072, 3072)},
		{"headers only", [][]byte{runSegment(false, 0)}},
		{"one part", [][]byte{v4}},
		{"empty parts", cut(v4, 52, 52, 2000, 2000)},
		{"not TCP", cut(udp, 60, 100)},
	} {
		joined := bytes.Join(c.run, nil)
		want, wantChecked := inbound(joined, true)
		got, checked := inboundRun(c.run, len(joined))
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
			b, _ := inboundRun(c.run, len(joined))
			b.Release()
		}); n != 0 {
			t.Errorf("%s: %v allocations per run", c.name, n)
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
