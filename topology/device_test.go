package topology_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/netjam/netjam/impair"
	"github.com/netjam/netjam/netif"
	"github.com/netjam/netjam/topology"
)

// fakeDevice records what is written into it.
type fakeDevice struct {
	offload bool
	gso     []netif.GSO
	lens    []int
	refuse  bool
}

func (d *fakeDevice) Offload() bool { return d.offload }

func (d *fakeDevice) WritePacket(pkt [][]byte, g netif.GSO) (int, error) {
	if d.refuse {
		return 0, errors.New("refused")
	}
	d.gso, d.lens = append(d.gso, g), append(d.lens, len(pkt[0]))
	return len(pkt[0]), nil
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
		q := topology.NewQueue("inbox", 16, time.Second)
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
