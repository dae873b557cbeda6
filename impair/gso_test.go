package impair

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// naiveSum is the RFC 1071 checksum the obvious way: 16-bit big-endian
// words, end-around carry after each addition.
func naiveSum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
		s = (s & 0xffff) + s>>16
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
		s = (s & 0xffff) + s>>16
	}
	return uint16(s)
}

// tcpChecksumOK verifies b's TCP checksum the naive way.
func tcpChecksumOK(t *testing.T, b []byte) bool {
	t.Helper()
	ipLen, ok := tcpHeaders(b)
	if !ok {
		t.Fatalf("not a TCP segment: % x", b[:20])
	}
	return tcpChecksumOKWith(b, binary.BigEndian.Uint16(b[ipLen+16:]))
}

// superSegment returns a TCP segment with payload bytes of pattern, over
// IPv4 (with a 12-byte TCP option) or IPv6, flags CWR, ACK, PSH and FIN.
func superSegment(v6 bool, payload int) []byte {
	tcp := make([]byte, 32+payload)
	binary.BigEndian.PutUint16(tcp[0:], 40000)
	binary.BigEndian.PutUint16(tcp[2:], 5201)
	binary.BigEndian.PutUint32(tcp[4:], 0xfffff000) // wraps across the segments
	binary.BigEndian.PutUint32(tcp[8:], 77)
	tcp[12] = 8 << 4
	tcp[13] = 0x80 | 0x10 | 0x08 | 0x01
	binary.BigEndian.PutUint16(tcp[14:], 512)
	copy(tcp[20:], []byte{1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2}) // NOP NOP timestamps
	for i := range payload {
		tcp[32+i] = byte(i*7 + i/251)
	}
	if v6 {
		ip := make([]byte, 40)
		ip[0] = 0x60
		binary.BigEndian.PutUint16(ip[4:], uint16(len(tcp)))
		ip[6], ip[7] = 6, 64
		ip[8], ip[23] = 0xfd, 1
		ip[24], ip[39] = 0xfd, 2
		return append(ip, tcp...)
	}
	ip := make([]byte, 20)
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(20+len(tcp)))
	binary.BigEndian.PutUint16(ip[4:], 0xfffe) // wraps too
	ip[6] = 0x40                               // DF
	ip[8], ip[9] = 64, 6
	copy(ip[12:], []byte{10, 99, 0, 1, 10, 99, 0, 2})
	return append(ip, tcp...)
}

func TestSplitMakesEverySegmentWhole(t *testing.T) {
	for _, c := range []struct{ v6, partial bool }{{false, true}, {true, true}, {false, false}, {true, false}} {
		v6 := c.v6
		const mss, payload = 1448, 10000 // 6 full segments and one of 1312
		b := superSegment(v6, payload)
		if !c.partial {
			CompleteChecksum(b)
		}
		pool := NewPool(1520)
		big := NewPool(len(b))
		p := big.Copy(b)
		p.Arrival = time.Unix(5, 0)
		if !p.SetGSO(mss, c.partial) {
			t.Fatal("SetGSO refused a TCP segment")
		}
		hl := len(b) - payload
		if p.Segments() != 7 || p.WireLen() != len(b)+6*hl {
			t.Fatalf("segments %d, wire length %d; want 7, %d", p.Segments(), p.WireLen(), len(b)+6*hl)
		}
		var segs []*Packet
		pool.Split(p, func(s *Packet) { segs = append(segs, s) })
		if len(segs) != 7 {
			t.Fatalf("v6=%v: %d segments, want 7", v6, len(segs))
		}
		var joined []byte
		ipLen := hl - 32
		for i, s := range segs {
			h := s.Data
			n := min(mss, payload-i*mss)
			if len(h) != hl+n || s.Arrival != time.Unix(5, 0) || s.Segments() != 1 {
				t.Errorf("segment %d: length %d, want %d (arrival %v)", i, len(h), hl+n, s.Arrival)
			}
			if v6 {
				if got := int(binary.BigEndian.Uint16(h[4:])); got != len(h)-40 {
					t.Errorf("segment %d: payload length %d", i, got)
				}
			} else {
				if got := int(binary.BigEndian.Uint16(h[2:])); got != len(h) {
					t.Errorf("segment %d: total length %d", i, got)
				}
				if id := binary.BigEndian.Uint16(h[4:]); id != uint16(0xfffe+i) {
					t.Errorf("segment %d: id %#x", i, id)
				}
				if naiveSum(h[:20]) != 0xffff {
					t.Errorf("segment %d: bad IPv4 header checksum", i)
				}
			}
			if seq := binary.BigEndian.Uint32(h[ipLen+4:]); seq != 0xfffff000+uint32(i*mss) {
				t.Errorf("segment %d: seq %#x", i, seq)
			}
			f := h[ipLen+13]
			wantFlags := byte(0x10)
			if i == 0 {
				wantFlags |= 0x80
			}
			if i == 6 {
				wantFlags |= 0x09
			}
			if f != wantFlags {
				t.Errorf("segment %d: flags %#x, want %#x", i, f, wantFlags)
			}
			if !bytes.Equal(h[ipLen+14:ipLen+16], b[ipLen+14:ipLen+16]) || !bytes.Equal(h[ipLen+18:hl], b[ipLen+18:hl]) {
				t.Errorf("segment %d: window or options changed", i)
			}
			if s.Partial() != c.partial {
				t.Errorf("segment %d of a partial=%v packet: Partial() %v", i, c.partial, s.Partial())
			}
			if c.partial {
				// What a device with checksum offload does with it.
				if tcpChecksumOK(t, h) {
					t.Errorf("segment %d: a partial segment's checksum was summed over it", i)
				}
				CompletePartial(h, ipLen, 16)
			}
			if !tcpChecksumOK(t, h) {
				t.Errorf("segment %d (partial %v): bad TCP checksum", i, c.partial)
			}
			joined = append(joined, h[hl:]...)
		}
		if !bytes.Equal(joined, b[hl:]) {
			t.Errorf("v6=%v: the segments' payloads do not make the original's", v6)
		}
	}
}

func TestSetGSO(t *testing.T) {
	pool := NewPool(65536)
	b := superSegment(false, 1000)
	p := pool.Copy(b)
	if p.SetGSO(1448, true) || p.Segments() != 1 {
		t.Error("a segment within one MSS is not a GSO packet")
	}
	if !tcpChecksumOK(t, p.Data) {
		t.Error("SetGSO left the checksum of a partial one-segment packet incomplete")
	}
	udp := superSegment(false, 3000)
	udp[9] = 17
	if pool.Copy(udp).SetGSO(1448, false) {
		t.Error("SetGSO took a UDP packet")
	}
	frag := superSegment(false, 3000)
	frag[6] |= 0x20 // more fragments
	if pool.Copy(frag).SetGSO(1448, false) {
		t.Error("SetGSO took a fragment")
	}
	short := superSegment(true, 3000)
	if pool.Copy(short[:len(short)-1]).SetGSO(1448, false) {
		t.Error("SetGSO took an IPv6 packet whose length field disagrees")
	}
	q := pool.Copy(superSegment(true, 3000))
	if !q.SetGSO(1000, false) || q.Segments() != 3 {
		t.Errorf("IPv6: segments %d", q.Segments())
	}
	if mss, partial, ok := q.GSO(); mss != 1000 || partial || !ok {
		t.Errorf("GSO() = %d, %v, %v", mss, partial, ok)
	}
	q.Release()
	if r := pool.Get(100); r.Segments() != 1 {
		t.Error("a released packet kept its GSO state")
	}
}

// TestSplitAnySegmentCount splits the largest GSO packets a kernel TCP
// with a small MSS sends (TCP_MAXSEG 88, Linux's smallest, makes 745
// segments of 64 KiB): every segment is at most its headers and one MSS,
// with a good checksum, and together they carry the whole payload. Such a
// packet once stayed whole (a limit of 128 segments), so loss and queue
// limits acted on 64 KiB at a time.
func TestSplitAnySegmentCount(t *testing.T) {
	pool := NewPool(65536)
	for _, v6 := range []bool{false, true} {
		for _, mss := range []int{88, 200, 536, 1448} {
			payload := 65535 - 20 - 32 // the largest IPv4 packet
			if v6 {
				payload = 65536 - 40 - 32 // a packet of the largest MTU
			}
			b := superSegment(v6, payload)
			p := pool.Copy(b)
			if !p.SetGSO(mss, false) {
				t.Fatalf("v6=%v mss %d: SetGSO refused a %d-byte segment", v6, mss, len(b))
			}
			want := (payload + mss - 1) / mss
			if p.Segments() != want {
				t.Errorf("v6=%v mss %d: %d segments, want %d", v6, mss, p.Segments(), want)
			}
			hl := len(b) - payload
			var got []byte
			n := 0
			pool.Split(p, func(s *Packet) {
				if len(s.Data) > hl+mss {
					t.Errorf("v6=%v mss %d: segment %d is %d bytes, more than %d", v6, mss, n, len(s.Data), hl+mss)
				}
				if !tcpChecksumOK(t, s.Data) {
					t.Errorf("v6=%v mss %d: segment %d has a bad checksum", v6, mss, n)
				}
				got = append(got, s.Data[hl:]...)
				n++
				s.Release()
			})
			if n != want || !bytes.Equal(got, b[hl:]) {
				t.Errorf("v6=%v mss %d: %d segments carrying %d bytes, want %d carrying the %d of the payload", v6, mss, n, len(got), want, payload)
			}
		}
	}
}

func TestCompleteAndPseudoChecksum(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		for _, n := range []int{0, 1, 2, 3, 1447, 1448, 60000} {
			b := superSegment(v6, n)
			CompleteChecksum(b)
			if !tcpChecksumOK(t, b) {
				t.Errorf("v6=%v, %d bytes: bad checksum", v6, n)
			}
			// The pseudo-header sum plus the segment's own sum (what a
			// device with offload adds) gives the full checksum.
			PseudoChecksum(b)
			ipLen, _ := tcpHeaders(b)
			if got := ^fold(sum(b[ipLen:], 0)); !tcpChecksumOKWith(b, got) {
				t.Errorf("v6=%v, %d bytes: the pseudo-header sum does not complete to the checksum", v6, n)
			}
		}
	}
}

// tcpChecksumOKWith reports whether b is valid with checksum c.
func tcpChecksumOKWith(b []byte, c uint16) bool {
	ipLen, _ := tcpHeaders(b)
	b = bytes.Clone(b)
	binary.BigEndian.PutUint16(b[ipLen+16:], c)
	var pseudo []byte
	if b[0]>>4 == 4 {
		pseudo = append(pseudo, b[12:20]...)
	} else {
		pseudo = append(pseudo, b[8:40]...)
	}
	l := len(b) - ipLen
	pseudo = append(pseudo, 0, 0, 0, 6, byte(l>>8), byte(l))
	return naiveSum(append(pseudo, b[ipLen:]...)) == 0xffff
}

func FuzzChecksumSum(f *testing.F) {
	f.Add([]byte{0xff, 0xff, 0xff})
	f.Add(bytes.Repeat([]byte{0xff}, 1000))
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := fold(sum(b, 0)), naiveSum(b); got != want && !(got == 0xffff && want == 0) && !(got == 0 && want == 0xffff) {
			t.Fatalf("fold(sum) = %#x, naive %#x", got, want)
		}
	})
}

// TestChainKeepsOrSplitsSegments: a direction with only a fixed delay
// carries a GSO packet whole and counts its segments; one with a rate
// splits it and sends each segment at its own time.
func TestChainKeepsOrSplitsSegments(t *testing.T) {
	b := superSegment(false, 4000) // 3 segments of 1448, 1448, 1104
	hl := len(b) - 4000
	big := NewPool(len(b))
	t0 := time.Unix(100, 0)

	var got []*Packet
	var at []time.Time
	deliver := func(now time.Time, p *Packet) { got, at = append(got, p), append(at, now) }
	c, err := NewChain(Config{Name: "up", Delay: DelayConfig{Time: 10 * time.Millisecond}}, deliver)
	if err != nil {
		t.Fatal(err)
	}
	p := big.Copy(b)
	p.SetGSO(1448, false)
	c.Arrive(t0, p)
	c.Advance(t0.Add(time.Second))
	st := c.Stats()
	if len(got) != 1 || got[0].Segments() != 3 || st.InPackets != 3 || st.OutPackets != 3 || st.OutBytes != uint64(len(b)+2*hl) || st.WholeGSO != 1 {
		t.Fatalf("delay only: %d packets out, stats %+v", len(got), st)
	}

	got, at = nil, nil
	c, err = NewChain(Config{Name: "up", Rate: RateConfig{Bitrate: 10e6}}, deliver)
	if err != nil {
		t.Fatal(err)
	}
	if c.TakesSegments() {
		t.Fatal("a rate-limited direction keeps segments")
	}
	p = big.Copy(b)
	p.SetGSO(1448, false)
	c.Arrive(t0, p)
	c.Advance(t0.Add(time.Second))
	if len(got) != 3 {
		t.Fatalf("rate: %d packets out, want 3 segments", len(got))
	}
	// Each segment is serialized on its own: 1500 bytes at 10 Mbit/s
	// take 1.2 ms.
	for i, want := range []time.Duration{1200 * time.Microsecond, 2400 * time.Microsecond, 2400*time.Microsecond + time.Duration(hl+1104)*800} {
		if d := at[i].Sub(t0); d != want {
			t.Errorf("segment %d left after %v, want %v", i, d, want)
		}
	}
}

// TestCoalesceUndoesSplit: a segment split into its MTU-sized parts and
// coalesced again is the same segment (but for its checksums); a segment
// of another connection, a gap in sequence, or a FIN ends a run.
func TestCoalesceUndoesSplit(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		b := superSegment(v6, 10000)
		ipLen, _ := tcpHeaders(b)
		b[ipLen+13] = 0x80 | 0x10 | 0x08 // CWR, ACK, PSH: no FIN
		hl := len(b) - 10000
		small, big := NewPool(1600), NewPool(65536)
		p := big.Copy(b)
		p.SetGSO(1448, false)
		var segs []*Packet
		small.Split(p, func(s *Packet) { segs = append(segs, s) })
		got := big.Coalesce(segs)
		if len(got) != 1 || got[0].Segments() != 7 || got[0].WireLen() != len(b)+6*hl {
			t.Fatalf("v6=%v: %d packets, segments %d", v6, len(got), got[0].Segments())
		}
		m := got[0].Data
		if mss, partial, _ := got[0].GSO(); mss != 1448 || !partial {
			t.Errorf("mss %d, partial %v", mss, partial)
		}
		CompleteChecksum(m)
		if !tcpChecksumOK(t, m) || (!v6 && naiveSum(m[:20]) != 0xffff) {
			t.Error("bad checksums after completion")
		}
		want := bytes.Clone(b)
		CompleteChecksum(want)
		if !v6 {
			want[10], want[11], m[10], m[11] = 0, 0, 0, 0
		}
		if !bytes.Equal(m, want) {
			t.Errorf("v6=%v: the coalesced segment differs from the original", v6)
		}
	}

	// Runs end where they must.
	small, big := NewPool(1600), NewPool(65536)
	parts := func(b []byte) []*Packet {
		p := big.Copy(b)
		p.SetGSO(1000, false)
		var segs []*Packet
		small.Split(p, func(s *Packet) { segs = append(segs, s) })
		return segs
	}
	a := superSegment(false, 3000) // 3 segments, the last with FIN|PSH
	other := superSegment(false, 2000)
	other[20+1]++ // another source port: another connection
	ps := append(parts(a), parts(other)...)
	gap := parts(superSegment(false, 3000))
	ps = append(ps, gap[0], gap[2]) // seq gap between them
	got := big.Coalesce(ps)
	var shape []int
	for _, p := range got {
		shape = append(shape, p.Segments())
	}
	// a: 2 merged + the FIN alone; other: 2 merged (ACK|PSH last... its
	// last carries FIN too, so 1 + 1); the gap: 1 + 1.
	want := []int{2, 1, 1, 1, 1, 1}
	if fmt.Sprint(shape) != fmt.Sprint(want) {
		t.Errorf("runs %v, want %v", shape, want)
	}
}

// splitCoalesce returns a step that splits a large segment of payload
// bytes into MTU-sized packets and coalesces them again, releasing all.
func splitCoalesce(payload int) (seg []byte, step func()) {
	seg = superSegment(false, payload)
	ipLen, _ := tcpHeaders(seg)
	seg[ipLen+13] = 0x10
	small, big := NewPool(1600), NewPool(65536)
	segs := make([]*Packet, 0, 64)
	collect := func(s *Packet) { segs = append(segs, s) }
	return seg, func() {
		p := big.Copy(seg)
		p.SetGSO(1448, false)
		segs = segs[:0]
		small.Split(p, collect)
		for _, m := range big.Coalesce(segs) {
			m.Release()
		}
	}
}

// TestSplitCoalesceAllocateNothing: splitting a large segment and
// coalescing its parts again draws every packet from the pools.
func TestSplitCoalesceAllocateNothing(t *testing.T) {
	_, step := splitCoalesce(20000)
	step()
	checkPooledNoAllocs(t, 1000, "split and coalesce", step)
}

func BenchmarkSplitCoalesce(b *testing.B) {
	seg, step := splitCoalesce(64000)
	b.ReportAllocs()
	b.SetBytes(int64(len(seg)))
	for b.Loop() {
		step()
	}
}

// TestRunJoinsWithoutACopy: a run of partial segments (Run) gathered
// after JoinHeaders is the segment they were split from, with its
// checksum partial for the merged length, over IPv4 and IPv6; a run ends
// at a wrong checksum, at a pushed segment and at maxBytes.
func TestRunJoinsWithoutACopy(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		b := superSegment(v6, 10000)
		ipLen, _ := tcpHeaders(b)
		b[ipLen+13] = 0x80 | 0x10 | 0x08 // CWR, ACK, PSH: no FIN
		small, big := NewPool(1600), NewPool(65536)
		p := big.Copy(b)
		PseudoChecksum(p.Data)
		p.SetGSO(1448, true)
		var segs []*Packet
		small.Split(p, func(s *Packet) { segs = append(segs, s) })
		n, _, mss, total := Run(segs, 65535)
		if n != 7 || mss != 1448 || total != len(b) {
			t.Fatalf("v6=%v: run of %d, mss %d, %d bytes; want 7, 1448, %d", v6, n, mss, total, len(b))
		}
		hl := JoinHeaders(segs, total)
		m := bytes.Clone(segs[0].Data)
		for _, s := range segs[1:] {
			m = append(m, s.Data[hl:]...)
		}
		// The device completes the checksum from the pseudo-header's sum.
		if !CompletePartial(m, ipLen, 16) || !tcpChecksumOK(t, m) || (!v6 && naiveSum(m[:20]) != 0xffff) {
			t.Errorf("v6=%v: bad checksums", v6)
		}
		want := bytes.Clone(b)
		CompleteChecksum(want)
		if !v6 {
			want[10], want[11], m[10], m[11] = 0, 0, 0, 0
		}
		if !bytes.Equal(m, want) {
			t.Errorf("v6=%v: the gathered segment differs from the original", v6)
		}
		for _, s := range segs {
			s.Release()
		}
	}

	small, big := NewPool(1600), NewPool(65536)
	parts := func(n int) []*Packet {
		b := superSegment(false, n*1000)
		b[20+13] = 0x10
		p := big.Copy(b)
		PseudoChecksum(p.Data)
		p.SetGSO(1000, true)
		var segs []*Packet
		small.Split(p, func(s *Packet) { segs = append(segs, s) })
		return segs
	}
	ps := parts(6)
	ps[1].FinishChecksum() // right: it may merge
	ps[2].FinishChecksum()
	ps[2].Data[60] ^= 1       // damaged after its checksum: it may not
	ps[4].Data[20+13] |= 0x08 // PSH
	var shape []int
	for rest := ps; len(rest) > 0; {
		n, _, _, _ := Run(rest, 65535)
		shape, rest = append(shape, n), rest[n:]
	}
	// 2; the damaged one alone; 2 up to and with the pushed one; 1.
	if want := []int{2, 1, 2, 1}; fmt.Sprint(shape) != fmt.Sprint(want) {
		t.Errorf("runs %v, want %v", shape, want)
	}
	if n, _, _, total := Run(parts(6), 20+32+2500); n != 2 || total != 20+32+2000 {
		t.Errorf("run of %d (%d bytes) under a bound of 2 segments", n, total)
	}
}

// BenchmarkSplitGather is BenchmarkSplitCoalesce with the segments
// gathered (Run, JoinHeaders) instead of copied into a merged packet, as
// a device with offload takes them.
func BenchmarkSplitGather(b *testing.B) {
	seg := superSegment(false, 64000)
	ipLen, _ := tcpHeaders(seg)
	seg[ipLen+13] = 0x10
	small, big := NewPool(1600), NewPool(65536)
	segs := make([]*Packet, 0, 64)
	vec := make([][]byte, 0, 64)
	collect := func(s *Packet) { segs = append(segs, s) }
	b.ReportAllocs()
	b.SetBytes(int64(len(seg)))
	for b.Loop() {
		p := big.Copy(seg)
		PseudoChecksum(p.Data)
		p.SetGSO(1448, true)
		segs = segs[:0]
		small.Split(p, collect)
		for rest := segs; len(rest) > 0; {
			n, _, _, total := Run(rest, 65535)
			if n > 1 {
				hl := JoinHeaders(rest[:n], total)
				vec = append(vec[:0], rest[0].Data)
				for _, s := range rest[1:n] {
					vec = append(vec, s.Data[hl:])
				}
			}
			for _, s := range rest[:n] {
				s.Release()
			}
			rest = rest[n:]
		}
	}
}

// A corrupted segment is not merged by Coalesce: the merged packet's
// checksum, computed afresh (finish, or the device), would make its
// damage right. Its neighbours merge around it.
func TestCoalesceKeepsACorruptedSegmentApart(t *testing.T) {
	b := superSegment(false, 5000)
	b[20+13] = 0x10
	small, big := NewPool(1600), NewPool(65536)
	p := big.Copy(b)
	PseudoChecksum(p.Data)
	p.SetGSO(1000, true)
	var segs []*Packet
	small.Split(p, func(s *Packet) { segs = append(segs, s) })
	corrupt := newCorruptStage(Chance{P: 1}, newRand(1, "t", "corrupt"))
	var damaged *Packet
	corrupt.Push(time.Time{}, segs[2], emitFunc(func(p *Packet) { damaged = p }))
	bad := bytes.Clone(damaged.Data)
	got := big.Coalesce(segs)
	var shape []int
	for _, p := range got {
		shape = append(shape, p.Segments())
	}
	if fmt.Sprint(shape) != "[2 1 2]" {
		t.Fatalf("merged into %v, want [2 1 2]", shape)
	}
	if !bytes.Equal(got[1].Data, bad) || got[1].Partial() || tcpChecksumOK(t, got[1].Data) {
		t.Error("the corrupted segment was changed, or its checksum is right")
	}
}

// CoalesceRun finds the runs Coalesce merges, and JoinHeaders with the
// payloads gathered makes the packets it makes: over random batches of
// segments of two connections, partial or final, some short, pushed,
// corrupted or missing, under bounds that cut runs.
func TestCoalesceRunIsCoalesce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	small := NewPool(1600)
	type seg struct {
		b       []byte
		partial bool
	}
	batch := func(seed uint64) []seg {
		r := rand.New(rand.NewPCG(seed, 3))
		var bs []seg
		seq := [2]uint32{0xfffff000, 5000}
		for range 1 + r.IntN(40) {
			f := r.IntN(2)
			n := 1000
			if r.IntN(8) == 0 {
				n = 1 + r.IntN(999)
			}
			b := superSegment(false, n)
			b[20+1] += byte(f)
			binary.BigEndian.PutUint32(b[24:], seq[f])
			b[20+13] = 0x10
			if r.IntN(8) == 0 {
				b[20+13] |= 0x08
			}
			CompleteChecksum(b)
			partial := false
			switch r.IntN(10) {
			case 0:
				b[len(b)-1] ^= 1 // corrupted
			case 1, 2, 3, 4:
				PseudoChecksum(b)
				partial = true
			}
			if r.IntN(20) != 0 {
				seq[f] += uint32(n)
			} else {
				seq[f] += 2 * uint32(n) // a gap
			}
			bs = append(bs, seg{b, partial})
		}
		return bs
	}
	packets := func(bs []seg) []*Packet {
		var ps []*Packet
		for _, s := range bs {
			p := small.Copy(s.b)
			p.partial = s.partial
			ps = append(ps, p)
		}
		return ps
	}
	for i := range 300 {
		seed := rng.Uint64()
		size := []int{65535, 3200, 5000}[i%3]
		bs := batch(seed)
		big := NewPool(size)
		var want [][]byte
		for _, p := range big.Coalesce(packets(bs)) {
			p.FinishChecksum()
			want = append(want, bytes.Clone(p.Data))
			p.Release()
		}
		var got [][]byte
		for rest := packets(bs); len(rest) > 0; {
			n, _, _, total := CoalesceRun(rest, size)
			p := rest[0]
			m := bytes.Clone(p.Data)
			if n > 1 {
				hl := JoinHeaders(rest[:n], total)
				m = bytes.Clone(p.Data)
				for _, s := range rest[1:n] {
					m = append(m, s.Data[hl:]...)
				}
				CompleteChecksum(m)
			} else if p.Partial() {
				CompleteChecksum(m)
			}
			if len(m) != total {
				t.Fatalf("seed %d: run of %d, %d bytes, said %d", seed, n, len(m), total)
			}
			got = append(got, m)
			for _, s := range rest[:n] {
				s.Release()
			}
			rest = rest[n:]
		}
		if len(got) != len(want) {
			t.Fatalf("seed %d, bound %d: %d packets, Coalesce made %d", seed, size, len(got), len(want))
		}
		for j := range got {
			if !bytes.Equal(got[j], want[j]) {
				t.Fatalf("seed %d, bound %d: packet %d differs from Coalesce's", seed, size, j)
			}
		}
	}
}

// The parts a rate stage cuts a large segment into (cutHead), delivered
// together, merge again into the segment they came from: Coalesce, Run
// and CoalesceRun take a GSO packet as its segments. Before, a GSO
// packet ended every run, and a 10 Gbit/s path handed its receiver (the
// peer's gVisor, a TUN device) each 10 µs part on its own: 7.5 segments
// a delivery instead of 45 without the rate.
func TestPartsMergeAgain(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		for _, c := range []struct {
			payload, m int  // the segment, and the segments a part takes
			partial    bool // the sender left the checksum partial
			short      bool // the last segment is shorter than the MSS
		}{
			{40 * 1448, 8, true, false},
			{40*1448 - 700, 8, true, true},
			{13 * 1448, 5, false, false},
			{13*1448 - 1, 1, true, true},
		} {
			name := fmt.Sprintf("v6=%v/%d bytes, parts of %d, partial %v", v6, c.payload, c.m, c.partial)
			b := superSegment(v6, c.payload)
			ipLen, _ := tcpHeaders(b)
			b[ipLen+13] = 0x10 | 0x08 // ACK, PSH (the last segment's)
			big := NewPool(65536)
			cut := func() []*Packet {
				p := big.Copy(b)
				if c.partial {
					PseudoChecksum(p.Data)
				}
				if !p.SetGSO(1448, c.partial) {
					t.Fatal("not a GSO packet")
				}
				var parts []*Packet
				for int(p.segs) > c.m {
					parts = append(parts, cutHead(p, c.m))
				}
				return append(parts, p)
			}
			want := bytes.Clone(b)
			CompleteChecksum(want)
			segs := (c.payload + 1447) / 1448

			ps := cut()
			if len(ps) < 2 {
				t.Fatalf("%s: cut into %d", name, len(ps))
			}
			n, k, mss, total := Run(ps, 65535)
			if n != len(ps) || k != segs || mss != 1448 || total != len(b) {
				t.Errorf("%s: Run: %d of %d packets, %d segments of %d, %d bytes; want all, %d of 1448, %d", name, n, len(ps), k, mss, total, segs, len(b))
			}
			if n2, k2, _, _ := CoalesceRun(ps, 65535); n2 != n || k2 != k {
				t.Errorf("%s: CoalesceRun %d packets, %d segments; Run %d, %d", name, n2, k2, n, k)
			}
			got := big.Coalesce(ps)
			if len(got) != 1 || got[0].Segments() != segs {
				t.Fatalf("%s: Coalesce made %d packets, the first of %d segments; want 1 of %d", name, len(got), got[0].Segments(), segs)
			}
			m := got[0].Data
			CompleteChecksum(m)
			if !v6 {
				m[10], m[11] = 0, 0
				want[10], want[11] = 0, 0
			}
			if !bytes.Equal(m, want) {
				t.Errorf("%s: the merged parts differ from the segment", name)
			}
			got[0].Release()

			// Gathered without a copy (a device's write), the same.
			ps = cut()
			hl := JoinHeaders(ps, total)
			g := bytes.Clone(ps[0].Data)
			for _, p := range ps[1:] {
				g = append(g, p.Data[hl:]...)
			}
			CompleteChecksum(g)
			if !v6 {
				g[10], g[11] = 0, 0
			}
			if !bytes.Equal(g, want) {
				t.Errorf("%s: the gathered parts differ from the segment", name)
			}
			for _, p := range ps {
				p.Release()
			}
		}
	}

	// A part of another MSS starts a run of its own.
	big := NewPool(65536)
	b := superSegment(false, 10*1000)
	b[20+13] = 0x10 // ACK only
	p := big.Copy(b)
	p.SetGSO(1000, false)
	h := cutHead(p, 4)
	if n, _, _, _ := Run([]*Packet{h, p}, 65535); n != 2 {
		t.Errorf("two parts of one segment: a run of %d", n)
	}
	p.mss = 500
	if n, _, _, _ := Run([]*Packet{h, p}, 65535); n != 1 {
		t.Errorf("a part of another MSS joined the run (%d)", n)
	}
}
