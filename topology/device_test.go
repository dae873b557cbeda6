package topology_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/netjam/netjam/clock"
	"github.com/netjam/netjam/impair"
	"github.com/netjam/netjam/netif"
	"github.com/netjam/netjam/topology"
)

// fakeDevice records what is written into it.
type fakeDevice struct {
	mu      sync.Mutex
	offload bool
	gso     []netif.GSO
	lens    []int
	data    [][]byte // each write's packet, its slices joined
	refuse  bool
	closed  bool
}

func (d *fakeDevice) Offload() bool { return d.offload }

func (d *fakeDevice) WritePacket(pkt [][]byte, g netif.GSO) (int, error) {
	if d.refuse {
		return 0, errors.New("refused")
	}
	if d.closed {
		return 0, fmt.Errorf("write netjam0: %w", os.ErrClosed)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	b := bytes.Join(pkt, nil)
	d.gso, d.lens, d.data = append(d.gso, g), append(d.lens, len(pkt[0])), append(d.data, b)
	return len(b), nil
}

// writes returns what was written so far.
func (d *fakeDevice) writes() ([][]byte, []netif.GSO) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.data), slices.Clone(d.gso)
}

// TestDeviceCountsWritesAfterCloseApart: a packet refused by a device
// that was closed (the run's end, packets still on the path) is counted
// apart from a write the open device refused.
func TestDeviceCountsWritesAfterCloseApart(t *testing.T) {
	pool := impair.NewPool(1500)
	d := &fakeDevice{refuse: true}
	dev := topology.NewDevice("device", d)
	pkt := func() *impair.Packet {
		p := pool.Get(28)
		copy(p.Data, []byte{0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2, 0, 1, 0, 7, 0, 8, 0, 0})
		return p
	}
	dev.Push(time.Time{}, pkt())
	d.refuse, d.closed = false, true
	dev.Push(time.Time{}, pkt())
	dev.Push(time.Time{}, pkt())
	if e, c := dev.WriteErrors(), dev.AfterClose(); e != 1 || c != 2 {
		t.Errorf("write errors %d, after close %d; want 1 and 2", e, c)
	}
}

// A device with offload gets merged segments, its checksum left to the
// kernel; one without gets MTU-sized packets with final checksums.
func TestDeviceTakesWhatItsOffloadAllows(t *testing.T) {
	for _, c := range []struct {
		offload bool
		desc    string
		writes  int
	}{
		{true, "peer tx -> inbox\ninbox -> merge -> device", 1},
		{false, "peer tx -> inbox\ninbox -> split -> finish -> device", 4},
	} {
		var g topology.Graph
		src := topology.NewSource("peer tx", topology.Emits{GSO: true, Partial: true}, pool, big)
		q := topology.NewQueue("inbox", 16, 1<<20, time.Second)
		fd := &fakeDevice{offload: c.offload}
		dev := topology.NewDevice("device", fd)
		g.Chain(g.Add(src.Node()), g.Add(q.Node()), g.Add(dev.Node()))
		n := mustCompile(t, &g)
		if n.String() != c.desc {
			t.Errorf("offload %v: compiled:\n%s\nwant:\n%s", c.offload, n, c.desc)
		}
		src.Push(t0, gso(server, 4, 1000, true))
		n.Start(context.Background())
		n.Close()
		if len(fd.gso) != c.writes {
			t.Fatalf("offload %v: %d writes, want %d", c.offload, len(fd.gso), c.writes)
		}
		if c.offload && (fd.gso[0].MSS != 1000 || !fd.gso[0].NeedsCsum) || !c.offload && fd.gso[0] != (netif.GSO{}) {
			t.Errorf("offload %v: wrote %+v", c.offload, fd.gso)
		}
	}
	fd := &fakeDevice{refuse: true}
	dev := topology.NewDevice("device", fd)
	dev.Push(t0, packet(segment(server, 10, 1, 1)))
	if dev.WriteErrors() != 1 {
		t.Errorf("%d write errors, want 1", dev.WriteErrors())
	}
}

// Copy makes a GSO packet of a large segment handed over with its MSS,
// completes a partial checksum of an ordinary one, and counts what does
// not fit.
func TestSourceCopies(t *testing.T) {
	var g topology.Graph
	src := topology.NewSource("host", topology.Emits{GSO: true, Partial: true}, pool, big)
	out := newSink("peer", anything)
	g.Link(g.Add(src.Node()), g.Add(out.Node()))
	mustCompile(t, &g)
	seg := segment(server, 3000, 1, 1)
	impair.PseudoChecksum(seg)
	src.Copy(t0, [][]byte{seg[:40], seg[40:]}, netif.GSO{MSS: 1000, NeedsCsum: true})
	small := segment(server, 100, 1, 2)
	impair.PseudoChecksum(small)
	src.Copy(t0, [][]byte{small}, netif.GSO{NeedsCsum: true})
	src.Copy(t0, [][]byte{make([]byte, 2000)}, netif.GSO{})
	got := out.seen()
	if len(got) != 2 || got[0].segs != 3 || !got[0].partial || got[1].segs != 1 || !got[1].checksum {
		t.Errorf("got %+v, want a GSO packet of 3 segments (partial), then a packet with its checksum final", got)
	}
	if src.TooLarge() != 1 {
		t.Errorf("%d too large, want 1", src.TooLarge())
	}
}

// Take puts a large segment read into a buffer of the source's into the
// graph in that buffer, without a copy; anything else it copies as Copy
// does, leaving the buffer the reader's.
func TestSourceTakes(t *testing.T) {
	var g topology.Graph
	src := topology.NewSource("kernel", topology.Emits{GSO: true, Partial: true}, pool, big)
	var got []*impair.Packet
	out := topology.SinkFunc(func(_ time.Time, p *impair.Packet) { got = append(got, p) })
	g.Link(g.Add(src.Node()), g.Add(topology.Node{Name: "peer", In: out, Accepts: anything}))
	mustCompile(t, &g)

	buf := src.ReadBuffer()
	if len(buf.Data) != big.Size() {
		t.Fatalf("a read buffer of %d bytes, want %d", len(buf.Data), big.Size())
	}
	seg := segment(server, 3000, 1, 1)
	impair.PseudoChecksum(seg)
	n := copy(buf.Data, seg)
	if !src.Take(t0, buf, n, netif.GSO{MSS: 1000, NeedsCsum: true}) {
		t.Fatal("a large segment was not taken in its buffer")
	}
	if len(got) != 1 || got[0] != buf || got[0].Segments() != 3 || !got[0].Partial() || !bytes.Equal(got[0].Data, seg) {
		t.Fatalf("got %v, want the read buffer itself as a GSO packet of 3 partial segments", got)
	}

	buf = src.ReadBuffer()
	small := segment(server, 100, 1, 2)
	impair.PseudoChecksum(small)
	n = copy(buf.Data, small)
	if src.Take(t0, buf, n, netif.GSO{NeedsCsum: true}) {
		t.Fatal("a small packet was taken in a 64 KiB buffer")
	}
	if len(got) != 2 || got[1] == buf || len(got[1].Data) != len(small) || len(buf.Data) != big.Size() {
		t.Fatalf("got %d packets, the last of %d bytes; want a copy of the %d-byte packet, the buffer left whole", len(got), len(got[len(got)-1].Data), len(small))
	}
	if c := slices.Clone(got[1].Data); !impair.CompleteChecksum(c) || !bytes.Equal(c, got[1].Data) {
		t.Error("the small packet's checksum is not final")
	}
	if src.Take(t0, buf, 2000, netif.GSO{}) || src.TooLarge() != 1 {
		t.Errorf("a 2000-byte packet without GSO: %d too large, want 1", src.TooLarge())
	}
	buf.Release()
}

// segments returns the n partial segments of mss bytes a sender with
// offload makes of one large segment to dst (as the peer's split does),
// and that segment, its checksum final: what they make merged.
func segments(dst netip.Addr, n, mss int, seq uint32) ([]*impair.Packet, []byte) {
	whole := segment(dst, n*mss, seq, 1)
	p := big.Copy(whole)
	impair.PseudoChecksum(p.Data)
	p.SetGSO(mss, true)
	var ps []*impair.Packet
	pool.Split(p, func(s *impair.Packet) { ps = append(ps, s) })
	return ps, whole
}

// sameSegment reports, for a GSO write b of the device, whether b is
// want with its TCP checksum left partial: equal to it once completed,
// with a right IP header checksum.
func sameSegment(b, want []byte) bool {
	c := slices.Clone(b)
	if !impair.CompletePartial(c, 20, 16) {
		return false
	}
	return bytes.Equal(c, want) && binary.BigEndian.Uint16(b[10:]) == ipSum(b[:20])
}

// What one pass of a direction delivers reaches the device together: the
// segments due at one instant go in as one GSO packet, in one write,
// gathered from them (its headers the merged packet's, its checksum
// partial for the kernel to complete), even when the node between the
// direction and the device's queue is slow; segments due at different
// instants are written apart, each when due. A queue looking for what
// waits whenever one packet arrives would take the first of a pass alone.
func TestDeviceWritesWhatAPassDeliversAsOne(t *testing.T) {
	clk := clock.NewManual()
	var g topology.Graph
	src := topology.NewSource("peer tx", topology.Emits{Partial: true}, pool, big)
	down := direction(t, impair.Config{Name: "down", Delay: impair.DelayConfig{Time: time.Millisecond}}, clk)
	slow := &slowLink{}
	q := topology.NewQueue("inbox", 64, 1<<20, time.Second)
	fd := &fakeDevice{offload: true}
	dev := topology.NewDevice("device", fd)
	g.Chain(g.Add(src.Node()), g.Add(down.Node()), g.Add(slow.Node()), g.Add(q.Node()), g.Add(dev.Node()))
	n := mustCompile(t, &g)
	n.Start(context.Background())
	defer n.Close()

	ps, whole := segments(server, 4, 1000, 5000)
	for _, p := range ps {
		src.Push(t0, p)
	}
	waitFor(t, "the direction's timer", func() bool { return down.Runner().Stats().InPackets == 4 && clk.Armed() == 1 })
	clk.Set(t0.Add(time.Millisecond))
	waitFor(t, "the first write", func() bool { d, _ := fd.writes(); return len(d) > 0 })
	// Two more, 1 us apart: due at different instants.
	ps, _ = segments(server, 2, 1000, 9000)
	src.Push(t0.Add(time.Millisecond), ps[0])
	waitFor(t, "the first of two", func() bool { return down.Runner().Stats().InPackets == 5 && clk.Armed() == 1 })
	clk.Set(t0.Add(time.Millisecond + time.Microsecond))
	src.Push(t0.Add(time.Millisecond+time.Microsecond), ps[1])
	waitFor(t, "the second of two", func() bool { return down.Runner().Stats().InPackets == 6 && clk.Armed() == 1 })
	clk.Set(t0.Add(2 * time.Millisecond))
	waitFor(t, "the first of two's write", func() bool { d, _ := fd.writes(); return len(d) >= 2 })
	clk.Set(t0.Add(2*time.Millisecond + time.Microsecond))
	// The device counts a write after the fake took it: wait for its count.
	waitFor(t, "every write", func() bool { d, _ := fd.writes(); w, _ := dev.Writes(); return len(d) >= 3 && w >= 3 })

	data, gsos := fd.writes()
	if len(data) != 3 {
		t.Fatalf("%d writes, want 3: the 4 segments due at once as one, then the 2 due apart alone", len(data))
	}
	if gsos[0] != (netif.GSO{MSS: 1000, NeedsCsum: true}) || !sameSegment(data[0], whole) {
		t.Errorf("first write %+v of %d bytes, want the 4 segments as one GSO packet of 4000 payload bytes, checksum partial", gsos[0], len(data[0]))
	}
	for i, b := range data[1:] {
		if len(b) != 1040 || gsos[i+1].MSS != 0 {
			t.Errorf("write %d: %d bytes, %+v; want one segment alone", i+2, len(b), gsos[i+1])
		}
	}
	if w, p := dev.Writes(); w != 3 || p != 6 {
		t.Errorf("counted %d writes of %d packets, want 3 of 6", w, p)
	}
}

// slowLink forwards on the pusher's goroutine, and takes its time after
// the first packet of each burst: a slow router between a direction and
// a queue.
type slowLink struct {
	out  topology.Port
	last time.Time
}

func (l *slowLink) Node() topology.Node {
	return topology.Node{Name: "slow", In: l, Out: &l.out, Accepts: anything}
}

func (l *slowLink) Push(now time.Time, p *impair.Packet) {
	l.out.Push(now, p)
	if !now.Equal(l.last) {
		l.last = now
		time.Sleep(20 * time.Millisecond)
	}
}

// A segment whose checksum is final (the corrupt stage finished it before
// flipping a bit) is not merged with its neighbours: the device's
// checksum over the merged packet would hide the damage. The others
// merge around it; a pushed segment ends its run, as GRO flushes at PSH.
func TestDeviceBatchKeepsFinalChecksumsApart(t *testing.T) {
	var g topology.Graph
	src := topology.NewSource("peer tx", topology.Emits{Partial: true}, pool, big)
	q := topology.NewQueue("inbox", 64, 1<<20, time.Second)
	fd := &fakeDevice{offload: true}
	g.Chain(g.Add(src.Node()), g.Add(q.Node()), g.Add(topology.NewDevice("device", fd).Node()))
	n := mustCompile(t, &g)
	ps, _ := segments(server, 6, 1000, 1)
	ps[2].FinishChecksum()
	ps[2].Data[100] ^= 1 // damaged after its checksum
	bad := slices.Clone(ps[2].Data)
	ps[3].Data[20+13] |= 0x08 // PSH: its run ends with it
	for _, p := range ps {
		src.Push(t0, p) // waiting together when the queue starts
	}
	n.Start(context.Background())
	n.Close()
	data, gsos := fd.writes()
	var segs []int
	for i, b := range data {
		n := 1
		if m := gsos[i].MSS; m > 0 {
			n = (len(b) - 40 + m - 1) / m
		}
		segs = append(segs, n)
	}
	if !slices.Equal(segs, []int{2, 1, 1, 2}) {
		t.Fatalf("wrote runs of %v segments, want [2 1 1 2]", segs)
	}
	if !bytes.Equal(data[1], bad) || gsos[1].NeedsCsum {
		t.Errorf("the damaged segment was changed or its checksum left to the device")
	}
}

// usoDevice is a fakeDevice that takes runs of UDP datagrams.
type usoDevice struct{ *fakeDevice }

func (usoDevice) UDPOffload() bool { return true }

// udpDatagram returns a checksummed IPv4 UDP datagram of n payload bytes.
func udpDatagram(n int, fill byte) []byte {
	b := make([]byte, 28+n)
	b[0], b[8], b[9] = 0x45, 64, 17
	binary.BigEndian.PutUint16(b[2:], uint16(len(b)))
	copy(b[12:20], []byte{10, 99, 0, 2, 10, 99, 0, 1})
	binary.BigEndian.PutUint16(b[10:], ipSum(b[:20]))
	binary.BigEndian.PutUint16(b[20:], 5201)
	binary.BigEndian.PutUint16(b[22:], 40000)
	binary.BigEndian.PutUint16(b[24:], uint16(8+n))
	for i := range n {
		b[28+i] = fill
	}
	s := uint32(17 + 8 + n)
	for i := 12; i < 20; i += 2 {
		s += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	for i := 20; i+1 < len(b); i += 2 {
		s += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	binary.BigEndian.PutUint16(b[26:], ^uint16(s))
	return b
}

// A device that takes UDP runs gets the datagrams of one flow that reach
// it together in one write, as a UDP GSO packet of their size; one that
// does not gets each in a write of its own.
func TestDeviceWritesUDPRuns(t *testing.T) {
	for _, uso := range []bool{true, false} {
		fd := &fakeDevice{offload: true}
		var dev topology.DeviceWriter = fd
		if uso {
			dev = usoDevice{fd}
		}
		d := topology.NewDevice("device", dev)
		d.PushBatch([]*impair.Packet{packet(udpDatagram(1000, 'a')), packet(udpDatagram(1000, 'b')), packet(udpDatagram(400, 'c'))})
		data, gsos := fd.writes()
		want := []netif.GSO{{MSS: 1000, NeedsCsum: true}}
		if !uso {
			want = []netif.GSO{{}, {}, {}}
		}
		if !slices.Equal(gsos, want) {
			t.Errorf("UDP offload %v: writes %+v, want %+v", uso, gsos, want)
			continue
		}
		if writes, packets := d.Writes(); writes != uint64(len(want)) || packets != 3 {
			t.Errorf("UDP offload %v: %d writes of %d packets, want %d of 3", uso, writes, packets, len(want))
		}
		if uso && len(data[0]) != 28+2400 {
			t.Errorf("the run's packet is %d bytes, want %d", len(data[0]), 28+2400)
		}
	}
}
