package topology_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/netjam/netjam/clock"
	"github.com/netjam/netjam/impair"
	"github.com/netjam/netjam/topology"
	"github.com/netjam/netjam/wifi"
)

func direction(t *testing.T, cfg impair.Config, clk clock.Clock) *topology.Direction {
	t.Helper()
	d, err := topology.NewDirection(cfg, clk)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Two real directions in series, shared by two paths, on the manual
// clock: exact departure times, one goroutine per direction.
func TestDirectionsInSeriesSharingOneLink(t *testing.T) {
	clk := clock.NewManual()
	var g topology.Graph
	srcA, srcB := topology.NewSource("hostA", topology.Emits{}, pool, big), topology.NewSource("hostB", topology.Emits{}, pool, big)
	a := direction(t, impair.Config{Name: "a", Delay: impair.DelayConfig{Time: 10 * time.Millisecond}}, clk)
	b := direction(t, impair.Config{Name: "b", Delay: impair.DelayConfig{Time: 10 * time.Millisecond}}, clk)
	// 1000-byte packets take 1 ms at 8 Mbit/s.
	shared := direction(t, impair.Config{Name: "shared", Rate: impair.RateConfig{Bitrate: 8e6}, Delay: impair.DelayConfig{Time: 5 * time.Millisecond}}, clk)
	out := newSink("server", mtuChecked)
	s := g.Add(shared.Node())
	g.Chain(g.Add(srcA.Node()), g.Add(a.Node()), s)
	g.Chain(g.Add(srcB.Node()), g.Add(b.Node()), s)
	g.Link(s, g.Add(out.Node()))
	n := mustCompile(t, &g)
	before := goroutines()
	n.Start(context.Background())
	if d := goroutines() - before; d != 3 {
		t.Errorf("%d goroutines started for 3 directions", d)
	}
	defer n.Close()
	srcA.Push(t0, packet(segment(server, 960, 1, 1)))
	srcB.Push(t0, packet(segment(server, 960, 1, 2)))
	waitFor(t, "a and b to arm their timers", func() bool { return clk.Armed() == 2 })
	clk.Set(t0.Add(10 * time.Millisecond))
	waitFor(t, "the shared link", func() bool { return shared.Runner().Stats().InPackets == 2 && clk.Armed() == 1 })
	clk.Set(t0.Add(20 * time.Millisecond))
	waitFor(t, "deliveries", func() bool { return len(out.seen()) == 2 })
	got := out.seen()
	if got[0].at != t0.Add(16*time.Millisecond) || got[1].at != t0.Add(17*time.Millisecond) {
		t.Errorf("left the shared link at %v and %v, want 16ms and 17ms (one behind the other)", got[0].at.Sub(t0), got[1].at.Sub(t0))
	}
}

// A direction's settings are swapped between two packets: the one before
// keeps the old delay, the one after gets the new.
func TestDirectionSettingsSwapBetweenTwoPackets(t *testing.T) {
	clk := clock.NewManual()
	var g topology.Graph
	src := topology.NewSource("host", topology.Emits{}, pool, big)
	cfg := impair.Config{Name: "up", Delay: impair.DelayConfig{Time: 10 * time.Millisecond}}
	d := direction(t, cfg, clk)
	out := newSink("server", mtuChecked)
	g.Chain(g.Add(src.Node()), g.Add(d.Node()), g.Add(out.Node()))
	n := mustCompile(t, &g)
	n.Start(context.Background())
	defer n.Close()
	src.Push(t0, packet(segment(server, 100, 1, 1)))
	waitFor(t, "the first packet", func() bool { return d.Runner().Stats().InPackets == 1 })
	cfg.Delay.Time = 50 * time.Millisecond
	if err := d.Runner().Set(cfg); err != nil {
		t.Fatal(err)
	}
	src.Push(t0, packet(segment(server, 100, 1, 2)))
	waitFor(t, "the second packet", func() bool { return d.Runner().Stats().InPackets == 2 && clk.Armed() == 1 })
	clk.Set(t0.Add(time.Second))
	waitFor(t, "deliveries", func() bool { return len(out.seen()) == 2 })
	got := out.seen()
	if got[0].id != 1 || got[0].at != t0.Add(10*time.Millisecond) || got[1].id != 2 || got[1].at != t0.Add(50*time.Millisecond) {
		t.Errorf("got %+v, want packet 1 at 10ms (before the change), 2 at 50ms", got)
	}
}

// A GSO packet crosses a delay-only direction whole, and is split in
// front of it once a change makes it decide per packet.
func TestDirectionTakesGSOWholeWhileItMay(t *testing.T) {
	clk := clock.NewManual()
	var g topology.Graph
	src := topology.NewSource("host", topology.Emits{GSO: true}, pool, big)
	cfg := impair.Config{Name: "up", Delay: impair.DelayConfig{Time: time.Millisecond}}
	d := direction(t, cfg, clk)
	out := newSink("server", anything)
	g.Chain(g.Add(src.Node()), g.Add(d.Node()), g.Add(out.Node()))
	n := mustCompile(t, &g)
	if n.String() != "host -> split? -> up\nup -> server" {
		t.Errorf("compiled:\n%s", n)
	}
	n.Start(context.Background())
	defer n.Close()
	src.Push(t0, gso(server, 4, 1000, false))
	waitFor(t, "the first packet", func() bool { return d.Runner().Stats().InPackets == 4 })
	cfg.Loss = impair.LossConfig{Model: impair.LossRandom, P: 1e-9}
	if err := d.Runner().Set(cfg); err != nil {
		t.Fatal(err)
	}
	src.Push(t0, gso(server, 4, 1000, false))
	waitFor(t, "arrivals", func() bool { return d.Runner().Stats().InPackets == 8 && clk.Armed() == 1 })
	clk.Set(t0.Add(time.Second))
	waitFor(t, "deliveries", func() bool { return len(out.seen()) == 5 })
	if got := out.seen(); got[0].segs != 4 || got[1].segs != 1 {
		t.Errorf("got %+v, want one whole packet, then 4 segments", got)
	}
}

// A Wi-Fi cell's stations are nodes found by name.
func TestCellStationsByName(t *testing.T) {
	clk := clock.NewManual()
	cell, err := topology.NewCell(wifi.Config{Standard: "802.11n", Seed: 1, Stations: []wifi.StationConfig{{Name: "laptop"}, {Name: "phone"}}}, clk)
	if err != nil {
		t.Fatal(err)
	}
	var g topology.Graph
	src := topology.NewSource("phone-host", topology.Emits{GSO: true}, pool, big)
	ap, phone := newSink("ap-side", mtuChecked), newSink("phone-rx", mtuChecked)
	down := topology.NewSource("downlink", topology.Emits{}, pool, big)
	g.Link(g.Add(src.Node()), g.Add(cell.Uplink("phone")))
	g.Link(g.Add(cell.AP()), g.Add(ap.Node()))
	g.Link(g.Add(down.Node()), g.Add(cell.Downlink("phone")))
	g.Link(g.Add(cell.Station("phone")), g.Add(phone.Node()))
	g.Add(cell.Uplink("laptop"))
	n := mustCompile(t, &g)
	want := "phone-host -> split -> cell/phone/up\ncell/ap -> finish -> ap-side\ndownlink -> cell/phone/down\ncell/phone -> finish -> phone-rx"
	if n.String() != want {
		t.Errorf("compiled:\n%s\nwant:\n%s", n, want)
	}
	n.Start(context.Background())
	defer n.Close()
	src.Push(t0, gso(server, 2, 1000, false))
	down.Push(t0, packet(segment(server, 100, 1, 7)))
	for len(ap.seen()) < 2 || len(phone.seen()) < 1 {
		next, ok := clk.Next()
		if !ok {
			time.Sleep(time.Millisecond)
			continue
		}
		clk.Set(next)
	}
	if st := cell.Runner().Stats(); len(ap.seen()) != 2 || phone.seen()[0].id != 7 {
		t.Errorf("the AP got %d, the phone %+v; %+v", len(ap.seen()), phone.seen(), st)
	}
	if cell.Has("tablet") || !cell.Has("laptop") {
		t.Error("Has")
	}
}

func goroutines() int {
	time.Sleep(10 * time.Millisecond) // let started goroutines reach their loop
	return runtime.NumGoroutine()
}
