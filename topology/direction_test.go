package topology_test

import (
	"context"
	"runtime"
	"slices"
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

// A GSO packet crosses a delay-only direction whole. After a change it
// still does when the new stage decides on each segment inside (loss),
// and is split in front of the direction when the stage decides on whole
// packets only (duplication).
func TestDirectionTakesGSOWholeWhileItMay(t *testing.T) {
	for _, c := range []struct {
		name       string
		change     func(*impair.Config)
		deliveries int // the first packet whole, then the second
		second     int // segments of the second's first delivery
	}{
		{"duplicate", func(c *impair.Config) { c.Duplicate = impair.Chance{P: 1e-9} }, 5, 1},
		{"loss", func(c *impair.Config) { c.Loss = impair.LossConfig{Model: impair.LossRandom, P: 1e-9} }, 2, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
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
			c.change(&cfg)
			if err := d.Runner().Set(cfg); err != nil {
				t.Fatal(err)
			}
			src.Push(t0, gso(server, 4, 1000, false))
			waitFor(t, "arrivals", func() bool { return d.Runner().Stats().InPackets == 8 && clk.Armed() == 1 })
			clk.Set(t0.Add(time.Second))
			waitFor(t, "deliveries", func() bool { return len(out.seen()) == c.deliveries })
			if got := out.seen(); got[0].segs != 4 || got[1].segs != c.second {
				t.Errorf("got %+v, want one whole packet, then the second's first delivery of %d segments", got, c.second)
			}
		})
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

// Two paths share one link built from real directions: one queue holds
// both paths' packets and one rate serves them. Path A's three packets
// reach the shared link at 10 ms, path B's at 10.5 ms: A's first goes on
// the wire (1 ms per 1000-byte packet at 8 Mbit/s) and the queue, of 3
// packets, holds A's other two, so it takes B's first and drops B's other
// two. What leaves, leaves one packet time apart, B's behind A's. Separate
// queues or rates per path would neither drop B's packets nor hold B1
// back until 18 ms.
func TestTwoPathsShareOneQueueAndItsRate(t *testing.T) {
	clk := clock.NewManual()
	var g topology.Graph
	srcA, srcB := topology.NewSource("hostA", topology.Emits{}, pool, big), topology.NewSource("hostB", topology.Emits{}, pool, big)
	a := direction(t, impair.Config{Name: "a", Delay: impair.DelayConfig{Time: 10 * time.Millisecond}}, clk)
	b := direction(t, impair.Config{Name: "b", Delay: impair.DelayConfig{Time: 10*time.Millisecond + 500*time.Microsecond}}, clk)
	shared := direction(t, impair.Config{Name: "shared", Rate: impair.RateConfig{Bitrate: 8e6},
		Queue: impair.QueueConfig{LimitPackets: 3}, Delay: impair.DelayConfig{Time: 5 * time.Millisecond}}, clk)
	out := newSink("server", mtuChecked)
	s := g.Add(shared.Node())
	g.Chain(g.Add(srcA.Node()), g.Add(a.Node()), s)
	g.Chain(g.Add(srcB.Node()), g.Add(b.Node()), s)
	g.Link(s, g.Add(out.Node()))
	n := mustCompile(t, &g)
	n.Start(context.Background())
	defer n.Close()
	for i := range uint16(3) {
		srcA.Push(t0, packet(segment(server, 960, 1, 1+i)))  // 1000 bytes: A1, A2, A3
		srcB.Push(t0, packet(segment(server, 960, 1, 11+i))) // B1, B2, B3
	}
	waitFor(t, "a and b to take their packets", func() bool {
		return a.Runner().Stats().InPackets == 3 && b.Runner().Stats().InPackets == 3 && clk.Armed() == 2
	})
	clk.Set(t0.Add(10 * time.Millisecond))
	waitFor(t, "A's packets at the shared link", func() bool { return shared.Runner().Stats().InPackets == 3 })
	clk.Set(t0.Add(10*time.Millisecond + 500*time.Microsecond))
	waitFor(t, "B's packets at the shared link", func() bool { return shared.Runner().Stats().InPackets == 6 })
	clk.Set(t0.Add(time.Second))
	waitFor(t, "deliveries", func() bool { return len(out.seen()) == 4 })
	type left struct {
		id uint16
		at time.Duration
	}
	var got []left
	for _, p := range out.seen() {
		got = append(got, left{p.id, p.at.Sub(t0)})
	}
	ms := time.Millisecond
	want := []left{{1, 16 * ms}, {2, 17 * ms}, {3, 18 * ms}, {11, 19 * ms}}
	if !slices.Equal(got, want) {
		t.Errorf("left the shared link: %v, want %v", got, want)
	}
	if st := shared.Runner().Stats(); st.Drops["queue"] != 2 || st.OutPackets != 4 {
		t.Errorf("shared link: %d queue drops, %d out; want 2 (B2, B3) and 4", st.Drops["queue"], st.OutPackets)
	}
}

// A direction's settings are swapped at an exact time between two
// packets (impair.Runner.SetAt): the packet that arrives a nanosecond
// before the change gets the old delay, the packets arriving at its
// instant and after get the new one, and the change reports that it
// applied at that instant.
func TestDirectionSettingsSwapAtAnInstant(t *testing.T) {
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
	swap := t0.Add(time.Millisecond)
	applied := make(chan time.Time, 1)
	next := cfg
	next.Delay.Time = 50 * time.Millisecond
	err := d.Runner().SetAt(impair.Change{At: swap, Config: next, Done: func(at time.Time, err error) {
		if err != nil {
			t.Error(err)
		}
		applied <- at
	}})
	if err != nil {
		t.Fatal(err)
	}
	clk.Set(swap.Add(-time.Nanosecond))
	src.Push(clk.Now(), packet(segment(server, 100, 1, 1)))
	waitFor(t, "the packet before the change", func() bool { return d.Runner().Stats().InPackets == 1 })
	clk.Set(swap)
	src.Push(clk.Now(), packet(segment(server, 100, 1, 2)))
	src.Push(clk.Now(), packet(segment(server, 100, 1, 3)))
	if at := <-applied; !at.Equal(swap) {
		t.Errorf("the change applied at %v, want %v", at.Sub(t0), swap.Sub(t0))
	}
	waitFor(t, "the packets at the change", func() bool { return d.Runner().Stats().InPackets == 3 })
	clk.Set(t0.Add(time.Second))
	waitFor(t, "deliveries", func() bool { return len(out.seen()) == 3 })
	got := out.seen()
	want := []time.Duration{11*time.Millisecond - time.Nanosecond, 51 * time.Millisecond, 51 * time.Millisecond}
	for i, p := range got {
		if p.id != uint16(i+1) || p.at.Sub(t0) != want[i] {
			t.Errorf("packet %d left at %v, want packet %d at %v", p.id, p.at.Sub(t0), i+1, want[i])
		}
	}
}
