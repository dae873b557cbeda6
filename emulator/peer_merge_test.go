package emulator

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net/netip"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/netjam/netjam/clock"
	"github.com/netjam/netjam/hostcfg"
	"github.com/netjam/netjam/impair"
	"github.com/netjam/netjam/stack"
)

// mergeBatch returns, from pool (big for GSO packets), the segments of
// one batch reaching the peer's inbox on a connection whose data starts
// at sequence 1000 and that acknowledges ack: runs of partial segments (a
// GSO packet split), one of them corrupted as the corrupt stage does
// (checksum final, then a bit flipped), segments with final checksums, a
// pushed segment that starts a run (Coalesce's rule), a segment of
// another connection between, and a run that starts with a GSO packet (a
// part of a large segment a rate stage cut) and goes on with segments
// of its own. Its data ends at 21500.
func mergeBatch(pool, big *impair.Pool, ack uint32) []*impair.Packet {
	var ps []*impair.Packet
	add := func(p *impair.Packet) { ps = append(ps, p) }
	gso := func(seq uint32, n, mss int, flags byte, partial bool) []*impair.Packet {
		p := big.Copy(tcpSegment(40000, seq, ack, streamBytes(seq, n), flags))
		if !p.SetGSO(mss, partial) {
			panic("not a GSO packet")
		}
		from := len(ps)
		pool.Split(p, add)
		return ps[from:]
	}
	gso(1000, 5000, 1000, 0x18, true) // ACK|PSH: the last ends the run
	b := gso(6000, 4000, 1000, 0x10, true)
	b[1].FinishChecksum()
	b[1].Data[60] ^= 0x04 // a payload bit, as corruptStage flips it
	gso(10000, 3000, 1000, 0x10, false)
	add(pool.Copy(finalChecksum(tcpSegment(40001, 500, ack, streamBytes(500, 1000), 0x10))))
	add(pool.Copy(finalChecksum(tcpSegment(40000, 13000, ack, streamBytes(13000, 1000), 0x18))))
	gso(14000, 2500, 1000, 0x10, true)
	part := big.Copy(tcpSegment(40000, 16500, ack, streamBytes(16500, 3000), 0x10))
	impair.PseudoChecksum(part.Data)
	if !part.SetGSO(1000, true) {
		panic("not a GSO packet")
	}
	add(part)
	gso(19500, 2000, 1000, 0x10, true)
	return ps
}

// streamBytes returns the n bytes of the test's stream from sequence seq.
func streamBytes(seq uint32, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte((int(seq) + i) * 7 >> 3)
	}
	return b
}

// tcpSegment returns an IPv4 TCP segment from 10.0.0.2:sport to
// 10.0.0.1:5201 with flags; its checksum field is 0.
func tcpSegment(sport uint16, seq, ack uint32, payload []byte, flags byte) []byte {
	b := make([]byte, 40+len(payload))
	b[0], b[8], b[9] = 0x45, 64, 6
	binary.BigEndian.PutUint16(b[2:4], uint16(len(b)))
	copy(b[12:16], []byte{10, 0, 0, 2})
	copy(b[16:20], []byte{10, 0, 0, 1})
	var s uint32
	for i := 0; i < 20; i += 2 {
		s += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	s = (s >> 16) + (s & 0xffff)
	s += s >> 16
	binary.BigEndian.PutUint16(b[10:12], ^uint16(s))
	t := b[20:]
	binary.BigEndian.PutUint16(t[0:2], sport)
	binary.BigEndian.PutUint16(t[2:4], 5201)
	binary.BigEndian.PutUint32(t[4:8], seq)
	binary.BigEndian.PutUint32(t[8:12], ack)
	t[12], t[13] = 5<<4, flags
	binary.BigEndian.PutUint16(t[14:16], 65535)
	copy(t[20:], payload)
	return b
}

func finalChecksum(b []byte) []byte {
	impair.CompleteChecksum(b)
	return b
}

// peerConn returns a host at 10.0.0.1 and its end of a connection from
// 10.0.0.2:40000 to its port 5201, made by hand: the data of the
// connection starts at sequence 1000, and the returned ack acknowledges
// the host's SYN.
func peerConn(t testing.TB) (*stack.Host, *stack.TCPConn, uint32) {
	synack := make(chan []byte, 16)
	h, err := stack.NewHost(stack.HostConfig{Name: "peer", Addrs: []netip.Prefix{netip.MustParsePrefix("10.0.0.1/24")}, MTU: 1500,
		Clock: clock.Real{}, Seed: 7, Output: func(pkt [][]byte) {
			b := bytes.Join(pkt, nil)
			if len(b) >= 40 && b[33]&0x12 == 0x12 {
				synack <- b
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	ln, err := h.ListenTCP(5201, hostcfg.TCPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	syn := tcpSegment(40000, 999, 0, []byte{2, 4, 0x05, 0xb4, 1, 3, 3, 7}, 0x02) // MSS 1460, window scale 7
	syn[32] = 7 << 4
	h.Inject(finalChecksum(syn))
	var ack uint32
	select {
	case b := <-synack:
		ack = binary.BigEndian.Uint32(b[24:28]) + 1
	case <-time.After(5 * time.Second):
		t.Fatal("no SYN-ACK")
	}
	h.Inject(finalChecksum(tcpSegment(40000, 1000, ack, nil, 0x10)))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := ln.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return h, c, ack
}

// TestMergingEndAsCoalesce: the peer's end, handed a batch whole, gives
// its host what the inbox gave it when it merged into a pool's packets
// (Coalesce), completed their checksums (the finish step) and injected
// them: the same counters (segments, bytes, valid segments, the corrupted
// segment apart and counted as a checksum error), and once the corrupted segment is sent again, the same
// stream.
func TestMergingEndAsCoalesce(t *testing.T) {
	pool, big := impair.NewPool(1500), impair.NewPool(maxGSOPacket)
	type result struct {
		st     stack.Stats
		stream []byte
	}
	run := func(inject func(h *stack.Host, batch []*impair.Packet)) result {
		h, c, ack := peerConn(t)
		before := h.Stats()
		batch := mergeBatch(pool, big, ack)
		inject(h, batch)
		st := h.Stats()
		h.Inject(finalChecksum(tcpSegment(40000, 7000, ack, streamBytes(7000, 1000), 0x10)))
		stream := make([]byte, 20500)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := io.ReadFull(c, stream)
		if err != nil {
			t.Errorf("read %d bytes of %d: %v", n, len(stream), err)
		}
		st.InPackets -= before.InPackets
		st.InBytes -= before.InBytes
		st.TCP.SegmentsReceived -= before.TCP.SegmentsReceived
		// What the host sends goes as its timers and goroutines go: the
		// ACKs, and the reset its listener sends to the other
		// connection's segment.
		st.OutPackets, st.OutBytes, st.TCP.SegmentsSent, st.TCP.ResetsSent = 0, 0, 0, 0
		return result{st, stream}
	}
	segs, merged := 0, 0
	old := run(func(h *stack.Host, batch []*impair.Packet) {
		segs = 0
		for _, p := range batch {
			segs += p.Segments()
		}
		ps := big.Coalesce(batch)
		merged = len(ps)
		for _, p := range ps {
			p.FinishChecksum()
			h.InjectSegments(p.Data, p.Segments(), false)
			p.Release()
		}
	})
	got := run(func(h *stack.Host, batch []*impair.Packet) {
		m := &mergingEnd{e: &endHost{name: "peer", host: h}, maxBytes: big.Size()}
		m.PushBatch(batch)
	})

	if got.st != old.st {
		t.Errorf("host counters\n got %+v\nwant %+v (after Coalesce)", got.st, old.st)
	}
	if !bytes.Equal(got.stream, streamBytes(1000, 20500)) || !bytes.Equal(old.stream, streamBytes(1000, 20500)) {
		t.Error("the stream read is not the one sent")
	}
	// The host counts segments as they were on the wire, merged or not
	// (every one valid but the one with a bad checksum).
	st := got.st
	if merged >= segs-2 || st.InPackets != uint64(segs) || st.ChecksumErrors != 1 || st.TCP.SegmentsReceived != uint64(segs)-1 {
		t.Errorf("%d segments merged into %d packets; the host took %d packets, %d valid segments, %d checksum errors (want %d, %d, 1): not merged as meant",
			segs, merged, st.InPackets, st.TCP.SegmentsReceived, st.ChecksumErrors, segs, segs-1)
	}
}

// BenchmarkPeerInbox: what the peer's inbox does with a 64 KiB segment of
// an established connection split into MTU-sized packets that reach it
// together: merge them into a packet of a pool, complete its checksum and
// inject it (before), or hand them to the host as a run (mergingEnd).
func BenchmarkPeerInbox(b *testing.B) {
	for _, name := range []string{"coalesce", "gather"} {
		b.Run(name, func(b *testing.B) {
			pool, big := impair.NewPool(1600), impair.NewPool(maxGSOPacket)
			h, c, ack := peerConn(b)
			const mss, n = 1448, 45
			var read atomic.Int64
			go func() {
				buf := make([]byte, 1<<16)
				for {
					k, err := c.Read(buf)
					read.Add(int64(k))
					if err != nil {
						return
					}
				}
			}()
			m := &mergingEnd{e: &endHost{name: "peer", host: h}, maxBytes: big.Size()}
			seg := tcpSegment(40000, 0, ack, streamBytes(0, mss*n), 0x10)
			batch := make([]*impair.Packet, 0, n)
			add := func(p *impair.Packet) { batch = append(batch, p) }
			seq := uint32(1000)
			sent := int64(0)
			b.SetBytes(mss * n)
			b.ReportAllocs()
			for b.Loop() {
				for sent-read.Load() > 512<<10 {
					runtime.Gosched() // the reader keeps the window open
				}
				p := big.Copy(seg)
				binary.BigEndian.PutUint32(p.Data[24:28], seq)
				impair.PseudoChecksum(p.Data)
				p.SetGSO(mss, true)
				batch = batch[:0]
				pool.Split(p, add)
				if name == "gather" {
					m.PushBatch(batch)
				} else {
					for _, q := range big.Coalesce(batch) {
						q.FinishChecksum()
						h.InjectSegments(q.Data, q.Segments(), false)
						q.Release()
					}
				}
				clear(batch)
				seq += mss * n
				sent += mss * n
			}
			b.StopTimer()
			if st := h.Stats(); st.ChecksumErrors != 0 || st.TCP.SegmentsReceived < uint64(b.N) {
				b.Errorf("checksum errors %d, %d segments received for %d sent", st.ChecksumErrors, st.TCP.SegmentsReceived, b.N)
			}
		})
	}
}
