package topology_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/netjam/netjam/impair"
	"github.com/netjam/netjam/topology"
)

var (
	server = netip.MustParseAddr("10.0.0.101")
	other  = netip.MustParseAddr("10.0.0.7")
)

func TestTwoLinksInSeries(t *testing.T) {
	var g topology.Graph
	src := topology.NewSource("host", topology.Emits{}, pool, big)
	a, b := &link{name: "a", d: 10 * time.Millisecond}, &link{name: "b", d: 5 * time.Millisecond}
	out := newSink("server", mtuChecked)
	g.Chain(g.Add(src.Node()), g.Add(a.Node()), g.Add(b.Node()), g.Add(out.Node()))
	n := mustCompile(t, &g)
	if want := "host -> a\na -> b\nb -> server"; n.String() != want {
		t.Errorf("compiled:\n%s\nwant:\n%s", n, want)
	}
	src.Push(t0, packet(segment(server, 100, 1, 1)))
	got := out.seen()
	if len(got) != 1 || got[0].at != t0.Add(15*time.Millisecond) || a.n != 1 || b.n != 1 {
		t.Errorf("got %+v through %d and %d, want one packet at 15ms through both", got, a.n, b.n)
	}
}

// Two paths share one link: what crosses it from either queues behind
// the other's packets.
func TestTwoPathsShareOneLink(t *testing.T) {
	var g topology.Graph
	srcA, srcB := topology.NewSource("hostA", topology.Emits{}, pool, big), topology.NewSource("hostB", topology.Emits{}, pool, big)
	a, b := &link{name: "a", d: 10 * time.Millisecond}, &link{name: "b", d: 10 * time.Millisecond}
	shared := &link{name: "shared", tx: time.Millisecond, d: 5 * time.Millisecond}
	out := newSink("server", mtuChecked)
	s := g.Add(shared.Node())
	g.Chain(g.Add(srcA.Node()), g.Add(a.Node()), s)
	g.Chain(g.Add(srcB.Node()), g.Add(b.Node()), s)
	g.Link(s, g.Add(out.Node()))
	mustCompile(t, &g)
	srcA.Push(t0, packet(segment(server, 100, 1, 1)))
	srcB.Push(t0, packet(segment(server, 100, 1, 2)))
	got := out.seen()
	if len(got) != 2 || got[0].id != 1 || got[0].at != t0.Add(16*time.Millisecond) ||
		got[1].id != 2 || got[1].at != t0.Add(17*time.Millisecond) || shared.n != 2 {
		t.Errorf("got %+v, want A's packet at 16ms, then B's at 17ms, queued behind it", got)
	}
}

func TestClassifierChoosesPathByDestinationPrefix(t *testing.T) {
	var g topology.Graph
	src := topology.NewSource("uplink", topology.Emits{}, pool, big)
	r := topology.NewRouter("router")
	net, host, def := newSink("net", mtuChecked), newSink("host", mtuChecked), newSink("default", mtuChecked)
	rid := g.Add(r.Node())
	g.Link(g.Add(src.Node()), rid)
	nid, hid, did := g.Add(net.Node()), g.Add(host.Node()), g.Add(def.Node())
	g.Link(rid, nid)
	g.Link(rid, hid)
	g.Link(rid, did)
	if err := r.Set([]topology.Route{
		{Prefix: netip.MustParsePrefix("10.0.0.0/24"), To: nid},
		{Prefix: netip.PrefixFrom(other, 32), To: hid},
		{Prefix: netip.MustParsePrefix("10.0.0.0/8"), To: did},
	}); err != nil {
		t.Fatal(err)
	}
	mustCompile(t, &g)
	for i, dst := range []string{"10.0.0.101", "10.0.0.7", "10.1.2.3", "192.0.2.1", "10.0.0.9"} {
		src.Push(t0, packet(segment(netip.MustParseAddr(dst), 10, 1, uint16(i))))
	}
	ids := func(s *sink) (ids []uint16) {
		for _, p := range s.seen() {
			ids = append(ids, p.id)
		}
		return ids
	}
	if n, h, d := ids(net), ids(host), ids(def); len(n) != 2 || n[0] != 0 || n[1] != 4 || len(h) != 1 || h[0] != 1 || len(d) != 1 || d[0] != 2 {
		t.Errorf("10.0.0.0/24 got %v (want 0 4), 10.0.0.7 got %v (want 1), 10.0.0.0/8 got %v (want 2)", n, h, d)
	}
	if r.NoRoute() != 1 {
		t.Errorf("%d packets without a route, want 1 (192.0.2.1)", r.NoRoute())
	}
}

// Routes are settings: Set swaps the whole table between two packets
// while a sender pushes on another goroutine; each packet goes by the
// old table or the new one, and none is lost.
func TestRouterSwapsRoutesBetweenTwoPackets(t *testing.T) {
	var g topology.Graph
	src := topology.NewSource("uplink", topology.Emits{}, pool, big)
	r := topology.NewRouter("router")
	a, b := newSink("a", mtuChecked), newSink("b", mtuChecked)
	rid := g.Add(r.Node())
	g.Link(g.Add(src.Node()), rid)
	aid, bid := g.Add(a.Node()), g.Add(b.Node())
	g.Link(rid, aid)
	g.Link(rid, bid)
	all := netip.MustParsePrefix("10.0.0.0/8")
	r.Set([]topology.Route{{Prefix: all, To: aid}})
	mustCompile(t, &g)
	const n = 2000
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			src.Push(t0, packet(segment(server, 10, 1, uint16(i))))
		}
	}()
	waitFor(t, "packets to a", func() bool { return len(a.seen()) > 0 })
	if err := r.Set([]topology.Route{{Prefix: all, To: bid}}); err != nil {
		t.Fatal(err)
	}
	<-done
	ga, gb := a.seen(), b.seen()
	if len(ga)+len(gb) != n {
		t.Fatalf("%d + %d packets arrived, want %d", len(ga), len(gb), n)
	}
	for i, p := range append(ga, gb...) {
		if p.id != uint16(i) {
			t.Fatalf("packet %d is %d: a before the swap, b after, in order", i, p.id)
		}
	}
	t.Logf("%d packets by the old table, %d by the new", len(ga), len(gb))
	if err := r.Set([]topology.Route{{Prefix: all, To: 99}}); err == nil || r.Set(nil) != nil {
		t.Errorf("a route to a node the router is not linked to: %v, want an error", err)
	}
}

func TestSplitOnlyWhereANodeNeedsIt(t *testing.T) {
	var g topology.Graph
	src := topology.NewSource("peer", topology.Emits{GSO: true, Partial: true}, pool, big)
	r := topology.NewRouter("router")
	host := newSink("host", mtuChecked) // a netstack host: segments, checked
	dev := newSink("device", anything)  // a device with offload: whole, partial
	mtuDev := newSink("old-device", topology.Accepts{GSO: topology.No, Partial: true})
	rid := g.Add(r.Node())
	g.Link(g.Add(src.Node()), rid)
	hid, did, mid := g.Add(host.Node()), g.Add(dev.Node()), g.Add(mtuDev.Node())
	g.Link(rid, hid)
	g.Link(rid, did)
	g.Link(rid, mid)
	r.Set([]topology.Route{{Prefix: netip.PrefixFrom(server, 32), To: hid}, {Prefix: netip.PrefixFrom(other, 32), To: did}, {To: mid}})
	n := mustCompile(t, &g)
	want := "peer -> router\nrouter -> split -> finish -> host\nrouter -> device\nrouter -> split -> old-device"
	if n.String() != want {
		t.Errorf("compiled:\n%s\nwant:\n%s", n, want)
	}
	src.Push(t0, gso(server, 5, 1000, true))
	src.Push(t0, gso(other, 5, 1000, true))
	src.Push(t0, gso(netip.MustParseAddr("10.9.9.9"), 3, 1000, true))
	for _, c := range []struct {
		s                 *sink
		n, segs           int
		partial, checksum bool
	}{{host, 5, 1, false, true}, {dev, 1, 5, true, false}, {mtuDev, 3, 1, true, false}} {
		got := c.s.seen()
		if len(got) != c.n {
			t.Errorf("%s got %d packets, want %d", c.s.name, len(got), c.n)
		}
		for _, p := range got {
			if p.segs != c.segs || p.partial != c.partial || p.checksum != c.checksum {
				t.Errorf("%s got %+v, want %d segments, partial %v, final checksum %v", c.s.name, p, c.segs, c.partial, c.checksum)
			}
		}
	}
}

// No split where nothing can carry a GSO packet, no completion where no
// checksum is partial.
func TestNoStepWhereNoneIsNeeded(t *testing.T) {
	var g topology.Graph
	src := topology.NewSource("host", topology.Emits{}, pool, big)
	out := newSink("server", mtuChecked)
	g.Link(g.Add(src.Node()), g.Add(out.Node()))
	if n := mustCompile(t, &g); n.String() != "host -> server" {
		t.Errorf("compiled %q, want no step", n)
	}
}

// A capture tap writes the wire, each segment with its final checksum,
// and forwards the GSO packet whole.
func TestTapSeesTheWireWithoutSplittingThePath(t *testing.T) {
	var g topology.Graph
	src := topology.NewSource("kernel", topology.Emits{GSO: true, Partial: true}, pool, big)
	w := &pcap{}
	tap := topology.NewTap("capture", w, pool, big)
	dev := newSink("peer", anything)
	g.Chain(g.Add(src.Node()), g.Add(tap.Node()), g.Add(dev.Node()))
	n := mustCompile(t, &g)
	if n.String() != "kernel -> capture\ncapture -> peer" {
		t.Errorf("compiled:\n%s", n)
	}
	src.Push(t0.Add(time.Second), gso(server, 4, 1200, true))
	src.Push(t0.Add(2*time.Second), packet(segment(server, 100, 1, 1)))
	if got := dev.seen(); len(got) != 2 || got[0].segs != 4 || !got[0].partial || got[1].segs != 1 {
		t.Errorf("the tap forwarded %+v, want the GSO packet whole (partial), then the other", got)
	}
	if len(w.pkts) != 5 {
		t.Fatalf("the tap wrote %d packets, want 4 segments and 1", len(w.pkts))
	}
	for i, p := range w.pkts {
		if !checksumOK(p) || (i < 4 && len(p) != 40+1200) || !w.at[i].Equal(t0.Add(time.Duration(1+i/4)*time.Second)) {
			t.Errorf("written packet %d: %d bytes at %v, checksum final %v", i, len(p), w.at[i], checksumOK(p))
		}
	}
}

type pcap struct {
	pkts [][]byte
	at   []time.Time
}

func (w *pcap) WritePacket(t time.Time, b []byte) error {
	w.pkts = append(w.pkts, append([]byte(nil), b...))
	w.at = append(w.at, t)
	return nil
}

// A node taking GSO packets only at times (a direction that may change)
// gets a split that asks it per packet.
func TestSplitAsksANodeThatVaries(t *testing.T) {
	var g topology.Graph
	whole := true
	src := topology.NewSource("host", topology.Emits{GSO: true}, pool, big)
	out := newSink("uplink", topology.Accepts{GSO: topology.Varies, Whole: func() bool { return whole }, Partial: true})
	g.Link(g.Add(src.Node()), g.Add(out.Node()))
	if n := mustCompile(t, &g); n.String() != "host -> split? -> uplink" {
		t.Errorf("compiled %q", n)
	}
	src.Push(t0, gso(server, 3, 1000, false))
	whole = false
	src.Push(t0, gso(server, 3, 1000, false))
	if got := out.seen(); len(got) != 4 || got[0].segs != 3 || got[1].segs != 1 {
		t.Errorf("got %+v, want one whole packet, then 3 segments", got)
	}
}

// A queue in front of a node that wants merged segments hands them on
// merged: those that wait together.
func TestQueueMergesForANodeThatWantsIt(t *testing.T) {
	var g topology.Graph
	src := topology.NewSource("downlink", topology.Emits{}, pool, big)
	q := topology.NewQueue("inbox", 16, 1<<20, time.Second)
	peer := newSink("peer", topology.Accepts{GSO: topology.Yes, Merged: true})
	g.Chain(g.Add(src.Node()), g.Add(q.Node()), g.Add(peer.Node()))
	n := mustCompile(t, &g)
	if n.String() != "downlink -> inbox\ninbox -> merge -> finish -> peer" {
		t.Errorf("compiled:\n%s", n)
	}
	for i := range 4 {
		src.Push(t0, packet(segment(server, 1000, 1000+uint32(i)*1000, 1)))
	}
	n.Start(context.Background())
	n.Close()
	if got := peer.seen(); len(got) != 1 || got[0].segs != 4 || !got[0].checksum || got[0].partial {
		t.Errorf("got %+v, want the 4 segments merged, checksum final", got)
	}
}

func TestCompileReportsEveryError(t *testing.T) {
	var g topology.Graph
	a, b := &link{name: "a"}, &link{name: "b"}
	ai, bi := g.Add(a.Node()), g.Add(b.Node())
	g.Link(ai, bi)
	g.Link(bi, ai)
	g.Add((&link{name: "loose"}).Node())
	s1 := topology.NewSource("src", topology.Emits{}, pool, big)
	si := g.Add(s1.Node())
	g.Link(si, g.Add(newSink("x", mtuChecked).Node()))
	g.Link(si, g.Add(newSink("y", topology.Accepts{GSO: topology.Yes, Merged: true}).Node()))
	g.Add(newSink("x", topology.Accepts{GSO: topology.Varies}).Node())
	_, err := g.Compile(opts)
	want := []string{
		`topology: two nodes named "x"`,
		`topology: a cycle through a, b`,
		`topology: node "loose": its output leads nowhere`,
		`topology: node "src": feeds 2 nodes; only a router feeds more than one`,
		`topology: node "y": wants merged segments but is fed by "src", not a queue`,
		`topology: node "x": takes GSO packets now and then but says not when (Accepts.Whole)`,
	}
	if err == nil || err.Error() != strings.Join(want, "\n") {
		t.Errorf("got:\n%v\nwant:\n%s", err, strings.Join(want, "\n"))
	}
}

// Compiling and pushing start no goroutine: packets cross the graph on
// the pusher's.
func TestCompiledGraphAddsNoGoroutine(t *testing.T) {
	before := goroutines()
	var g topology.Graph
	src := topology.NewSource("host", topology.Emits{GSO: true}, pool, big)
	r := topology.NewRouter("router")
	out := newSink("server", mtuChecked)
	rid := g.Add(r.Node())
	oid := g.Add(out.Node())
	g.Chain(g.Add(src.Node()), g.Add((&link{name: "a"}).Node()), rid, oid)
	r.Set([]topology.Route{{To: oid}})
	n := mustCompile(t, &g)
	n.Start(context.Background())
	defer n.Close()
	for range 100 {
		src.Push(t0, gso(server, 4, 1000, false))
	}
	if after := goroutines(); after != before || len(out.seen()) != 400 {
		t.Errorf("%d goroutines before, %d after; %d packets", before, after, len(out.seen()))
	}
}

// The compiled path allocates nothing per packet: a GSO packet split in
// front of a router, routed, completed and taken.
func TestCompiledPathAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops packets at random under the race detector")
	}
	var g topology.Graph
	src := topology.NewSource("host", topology.Emits{GSO: true, Partial: true}, pool, big)
	r := topology.NewRouter("router")
	w := &counter{}
	tap := topology.NewTap("capture", w, pool, big)
	oid := g.Add(topology.Node{Name: "server", In: topology.SinkFunc(func(_ time.Time, p *impair.Packet) { p.Release() }), Accepts: mtuChecked})
	rid := g.Add(r.Node())
	g.Chain(g.Add(src.Node()), g.Add(tap.Node()), rid, oid)
	r.Set([]topology.Route{{Prefix: netip.PrefixFrom(server, 32), To: oid}})
	mustCompile(t, &g)
	tmpl := gso(server, 8, 1400, true)
	step := func() {
		p := big.Copy(tmpl.Data)
		p.SetGSO(1400, true)
		src.Push(t0, p)
	}
	for range 100 {
		step()
	}
	if a := testing.AllocsPerRun(1000, step); a != 0 {
		t.Errorf("%v allocations per GSO packet", a)
	}
	if w.n == 0 {
		t.Error("the tap wrote nothing")
	}
}

type counter struct{ n int }

func (c *counter) WritePacket(time.Time, []byte) error { c.n++; return nil }

// A router linked to nothing (a run without hosts) drops everything,
// counted.
func TestRouterWithoutRoutesDropsAndCounts(t *testing.T) {
	var g topology.Graph
	src := topology.NewSource("uplink", topology.Emits{}, pool, big)
	r := topology.NewRouter("router")
	g.Link(g.Add(src.Node()), g.Add(r.Node()))
	mustCompile(t, &g)
	src.Push(t0, packet(segment(server, 10, 1, 1)))
	if r.NoRoute() != 1 {
		t.Errorf("%d packets without a route, want 1", r.NoRoute())
	}
}

// BenchmarkCompiledPath pushes MTU-sized packets through a compiled
// path as the lab's uplink end has it: a tap-less source into a router
// choosing among 100 hosts, then the checksum step and the host.
func BenchmarkCompiledPath(b *testing.B) {
	var g topology.Graph
	src := topology.NewSource("direction", topology.Emits{Partial: true}, pool, big)
	r := topology.NewRouter("router")
	rid := g.Add(r.Node())
	g.Link(g.Add(src.Node()), rid)
	var routes []topology.Route
	for i := range 100 {
		id := g.Add(topology.Node{Name: fmt.Sprint("host", i), In: topology.SinkFunc(func(_ time.Time, p *impair.Packet) { p.Release() }), Accepts: mtuChecked})
		g.Link(rid, id)
		routes = append(routes, topology.Route{Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(1 + i)}), 32), To: id})
	}
	r.Set(routes)
	mustCompile(b, &g)
	tmpl := segment(netip.AddrFrom4([4]byte{10, 0, 0, 50}), 1400, 1, 1)
	b.ReportAllocs()
	for b.Loop() {
		src.Push(t0, pool.Copy(tmpl))
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "packets/s")
}

// TestRouterByProtocolAndPort: routes naming a protocol or port take
// the packets they match, the most specific first; a source router reads
// the source address and port.
func TestRouterByProtocolAndPort(t *testing.T) {
	var g topology.Graph
	src := topology.NewSource("uplink", topology.Emits{}, pool, big)
	r, back := topology.NewRouter("paths"), topology.NewSourceRouter("replies")
	a, b, c := newSink("a", mtuChecked), newSink("b", mtuChecked), newSink("c", mtuChecked)
	rid := g.Add(r.Node())
	g.Link(g.Add(src.Node()), rid)
	bsrc := topology.NewSource("downlink", topology.Emits{}, pool, big)
	bid := g.Add(back.Node())
	g.Link(g.Add(bsrc.Node()), bid)
	ids := []topology.ID{g.Add(a.Node()), g.Add(b.Node()), g.Add(c.Node())}
	for _, id := range ids {
		g.Link(rid, id)
		g.Link(bid, id)
	}
	r.Set([]topology.Route{
		{Proto: 6, Port: 5201, To: ids[1]},
		{To: ids[2]},
		{Prefix: netip.MustParsePrefix("10.20.0.0/16"), To: ids[0]},
	})
	back.Set([]topology.Route{{Prefix: netip.MustParsePrefix("10.99.0.0/16"), Port: 7, To: ids[0]}, {To: ids[2]}})
	mustCompile(t, &g)
	toPort := func(b []byte, port uint16) []byte {
		binary.BigEndian.PutUint16(b[22:], port)
		impair.CompleteChecksum(b)
		return b
	}
	src.Push(t0, packet(segment(netip.MustParseAddr("10.20.0.5"), 10, 1, 1)))             // the prefix beats the port
	src.Push(t0, packet(segment(netip.MustParseAddr("10.30.0.1"), 10, 1, 2)))             // the port
	src.Push(t0, packet(toPort(segment(netip.MustParseAddr("10.30.0.1"), 10, 1, 3), 80))) // neither
	bsrc.Push(t0, packet(segment(netip.MustParseAddr("10.0.0.1"), 10, 1, 7)))             // from 10.99.0.1:7
	bsrc.Push(t0, packet(segment(netip.MustParseAddr("10.0.0.1"), 10, 1, 8)))             // from port 8
	got := func(s *sink) (ids []uint16) {
		for _, p := range s.seen() {
			ids = append(ids, p.id)
		}
		return ids
	}
	if ga, gb, gc := got(a), got(b), got(c); !slices.Equal(ga, []uint16{1, 7}) || !slices.Equal(gb, []uint16{2}) || !slices.Equal(gc, []uint16{3, 8}) {
		t.Errorf("a got %v, b %v, c %v; want [1 7], [2], [3 8]", ga, gb, gc)
	}
	ms := []topology.Match{{Proto: 6, Port: 5201}, {}, {Prefix: netip.MustParsePrefix("10.20.0.0/16")}}
	if i := topology.Pick(ms, netip.MustParseAddr("10.20.0.5"), 6, 5201); i != 2 {
		t.Errorf("Pick = %d, want 2 (the prefix)", i)
	}
}

// A queue is bounded in bytes as well as in packets: with room for 16
// packets but 3000 bytes, a third packet of 1040 bytes waits, and is
// dropped and counted when nothing makes room in time (before, the queue
// took it: 16 segments of 64 KiB filled an inbox bounded in packets
// only). A Push waiting for bytes goes in once the queue's goroutine
// takes packets out.
func TestQueueBoundsBytes(t *testing.T) {
	q := topology.NewQueue("inbox", 16, 3000, 20*time.Millisecond)
	for i := range 3 {
		q.Push(t0, packet(segment(server, 1000, uint32(i)*1000, 1)))
	}
	if q.Full() != 1 || q.Waits() != 1 {
		t.Errorf("3 packets of 1040 bytes into 3000: %d dropped, %d waited; want 1 and 1", q.Full(), q.Waits())
	}
	q.Close()

	var g topology.Graph
	src := topology.NewSource("downlink", topology.Emits{}, pool, big)
	q = topology.NewQueue("inbox", 16, 3000, 10*time.Second)
	peer := newSink("peer", anything)
	g.Chain(g.Add(src.Node()), g.Add(q.Node()), g.Add(peer.Node()))
	n := mustCompile(t, &g)
	for i := range 2 {
		src.Push(t0, packet(segment(server, 1000, uint32(i)*1000, 1)))
	}
	pushed := make(chan struct{})
	go func() {
		defer close(pushed)
		src.Push(t0, packet(segment(server, 1000, 2000, 1)))
	}()
	for deadline := time.Now().Add(2 * time.Second); q.Waits() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			<-pushed
			n.Start(context.Background())
			n.Close()
			t.Fatal("a third packet of 1040 bytes did not wait for room in 3000")
		}
	}
	n.Start(context.Background())
	<-pushed
	n.Close()
	if got := len(peer.seen()); got != 3 || q.Full() != 0 {
		t.Errorf("the peer got %d packets, %d dropped; want 3 and 0", got, q.Full())
	}
}

// Whole asks the nodes a sender's GSO packets may reach on the way to a
// receiver: never whole behind a node that takes none, else while every
// node whose support varies takes them; not the receivers.
func TestWholeAsksTheWayNotTheReceivers(t *testing.T) {
	var g topology.Graph
	upWhole, downWhole := true, true
	up := newSink("uplink", topology.Accepts{GSO: topology.Varies, Whole: func() bool { return upWhole }, Partial: true})
	down := newSink("downlink", topology.Accepts{GSO: topology.Varies, Whole: func() bool { return downWhole }, Partial: true})
	upNode, downNode := up.Node(), down.Node()
	upNode.Out, downNode.Out = new(topology.Port), new(topology.Port)
	client := g.Add(topology.NewSource("client", topology.Emits{GSO: true}, pool, big).Node())
	server := g.Add(topology.NewSource("server", topology.Emits{GSO: true}, pool, big).Node())
	receiver := g.Add(newSink("host", topology.Accepts{GSO: topology.Varies, Whole: func() bool { return false }}).Node())
	u, d := g.Add(upNode), g.Add(downNode)
	g.Chain(client, u, receiver)
	g.Chain(server, d, g.Add(newSink("host2", topology.Accepts{GSO: topology.No}).Node()))
	cw, sw := g.Whole(client), g.Whole(server)
	if !cw() || !sw() {
		t.Errorf("every direction takes GSO packets: whole %v, %v, want true (the receivers are not asked)", cw(), sw())
	}
	upWhole = false
	if cw() || !sw() {
		t.Errorf("the uplink splits: client %v, server %v, want false, true", cw(), sw())
	}
	// A medium that never takes GSO packets on the way.
	var h topology.Graph
	src := h.Add(topology.NewSource("station", topology.Emits{GSO: true}, pool, big).Node())
	medium := newSink("medium", topology.Accepts{GSO: topology.No, Partial: true}).Node()
	medium.Out = new(topology.Port)
	h.Chain(src, h.Add(medium), h.Add(newSink("ap", topology.Accepts{GSO: topology.Yes}).Node()))
	if h.Whole(src)() {
		t.Error("behind a medium that takes no GSO packet: whole")
	}
	// A medium whose way on is its own (a cell: the station's packets
	// leave from the access point) is on the way, not a receiver, once
	// declared (Beyond).
	var c topology.Graph
	st := c.Add(topology.NewSource("station", topology.Emits{GSO: true}, pool, big).Node())
	entry := c.Add(newSink("cell up", topology.Accepts{GSO: topology.No, Partial: true}).Node())
	ap := c.Add(topology.NewSource("ap", topology.Emits{GSO: true}, pool, big).Node())
	c.Link(st, entry)
	c.Chain(ap, c.Add(newSink("server", topology.Accepts{GSO: topology.Yes}).Node()))
	if !c.Whole(st)() {
		t.Error("the medium's entry alone, a receiver to the graph: not whole")
	}
	c.Beyond(entry, ap)
	if c.Whole(st)() {
		t.Error("the medium's entry, its way on declared: whole")
	}
}

// A source router sends an ICMP error from a router on the way (whose
// own address no route names) back the way a reply to the packet it
// quotes goes: by the quoted packet's destination, protocol and port.
func TestSourceRouterSendsICMPErrorsByTheirQuote(t *testing.T) {
	var g topology.Graph
	src := topology.NewSource("downlink", topology.Emits{}, pool, big)
	back := topology.NewSourceRouter("replies")
	eu, other := newSink("eu", mtuChecked), newSink("other", mtuChecked)
	bid := g.Add(back.Node())
	g.Link(g.Add(src.Node()), bid)
	euID, otherID := g.Add(eu.Node()), g.Add(other.Node())
	g.Link(bid, euID)
	g.Link(bid, otherID)
	back.Set([]topology.Route{{Prefix: netip.MustParsePrefix("10.20.0.0/16"), Proto: 6, Port: 5201, To: euID}, {To: otherID}})
	mustCompile(t, &g)
	// What a router at 10.99.0.254 sends the client: time exceeded,
	// quoting the client's segment to 10.20.0.5:5201.
	icmp := func(v4 []byte, typ byte) []byte {
		quote := segment(netip.MustParseAddr("10.20.0.5"), 0, 1, 9)[:28]
		b := make([]byte, 20+8+len(quote))
		b[0], b[8], b[9] = 0x45, 64, 1
		binary.BigEndian.PutUint16(b[2:], uint16(len(b)))
		copy(b[12:16], v4)
		copy(b[16:20], []byte{10, 99, 0, 1})
		b[20] = typ
		copy(b[28:], quote)
		binary.BigEndian.PutUint16(b[10:], ipSum(b[:20]))
		return b
	}
	src.Push(t0, packet(icmp([]byte{10, 99, 0, 254}, 11))) // time exceeded: by its quote
	src.Push(t0, packet(icmp([]byte{10, 99, 0, 254}, 0)))  // an echo reply quotes nothing: by its source
	if e, o := len(eu.seen()), len(other.seen()); e != 1 || o != 1 {
		t.Errorf("eu got %d, other %d; want the error on eu's way back, the echo reply by its source", e, o)
	}
	if topology.Quoted(segment(server, 100, 1, 1)) != nil {
		t.Error("a TCP segment quotes a packet")
	}
}
