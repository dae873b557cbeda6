package emulator

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/netjam/netjam/impair"
	"github.com/netjam/netjam/summary"
	"github.com/netjam/netjam/topology"
)

// pathsLab has two paths across a shared access link: to-eu 20 ms one
// way in all, to-us 80 ms, with a UDP probe and a TCP transfer on each.
const pathsLab = `
clock: virtual
duration: 2s
links:
  - {name: access, delay: 5ms}
  - {name: eu, delay: 15ms}
  - {name: us, delay: 75ms}
paths:
  - {name: to-eu, via: [access, eu], match: {dst: 10.20.0.0/16}}
  - {name: to-us, via: [access, us], match: {dst: 10.30.0.0/16}}
flows:
  - {name: eu-probe, type: udp, interval: 10ms, packet_size: 200, duration: 2s, path: to-eu}
  - {name: us-probe, type: udp, interval: 10ms, packet_size: 200, duration: 2s, path: to-us}
  - {name: eu-bulk, type: tcp, size: 200KB, path: to-eu}
  - {name: us-back, type: tcp, size: 200KB, path: to-us, direction: down}
`

// TestLabPathsDelays: each path's flows see the delay of its own links:
// 20 ms and 80 ms one way, within 1 ms (exact on the virtual clock, but
// for the microseconds a host takes), both ways (the TCP flows' RTT).
func TestLabPathsDelays(t *testing.T) {
	r := runPlan(t, pathsLab).Runs[0]
	for _, c := range []struct {
		flow string
		ms   float64
		path string
	}{{"eu-probe", 20, "to-eu"}, {"us-probe", 80, "to-us"}} {
		f := flowByName(t, r, c.flow)
		d := f.UDPSummary.DelayMs
		t.Logf("%s: %d datagrams, one-way delay %.3f to %.3f ms", c.flow, d.Count, d.Min, d.Max)
		if d.Count < 150 || math.Abs(d.Min-c.ms) > 1 || math.Abs(d.Max-c.ms) > 1 {
			t.Errorf("%s: %d datagrams, delay %.3f to %.3f ms, want %.0f within 1 ms", c.flow, d.Count, d.Min, d.Max, c.ms)
		}
		if f.Path != c.path {
			t.Errorf("%s: path %q, want %q", c.flow, f.Path, c.path)
		}
	}
	for _, c := range []struct {
		flow string
		ms   float64
	}{{"eu-bulk", 40}, {"us-back", 160}} {
		f := flowByName(t, r, c.flow)
		ms := f.TCPSummary.ConnectS * 1000
		if !f.TCPSummary.Completed || ms < c.ms || ms > c.ms+2 {
			t.Errorf("%s: completed %v, handshake %.3f ms, want completed in one round trip of %.0f ms", c.flow, f.TCPSummary.Completed, ms, c.ms)
		}
	}
	var names []string
	for _, l := range r.Links {
		names = append(names, l.Name)
	}
	want := []string{"access.uplink", "access.downlink", "eu.uplink", "eu.downlink", "us.uplink", "us.downlink"}
	if len(names) != len(want) {
		t.Fatalf("links %q, want %q", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Fatalf("links %q, want %q", names, want)
		}
	}
	// The paths, with their servers and flows.
	if len(r.Paths) != 2 || r.Paths[1].Name != "to-us" || r.Paths[1].Match != "dst 10.30.0.0/16" ||
		strings.Join(r.Paths[1].Servers, " ") != "10.30.0.1" || strings.Join(r.Paths[1].Flows, " ") != "us-probe us-back" ||
		strings.Join(r.Paths[0].Via, " ") != "access eu" {
		t.Errorf("paths %+v", r.Paths)
	}
	// The access link carries both paths' packets; each other link one's.
	if a, e, u := r.Links[0].PacketsOut, r.Links[2].PacketsIn, r.Links[4].PacketsIn; a != e+u || e == 0 || u == 0 {
		t.Errorf("uplink packets: access %d out, eu %d in, us %d in: want access = eu + us", a, e, u)
	}
}

// TestLabPathsShareABottleneck: two UDP floods of 7 and 9 Mbit/s, on two
// paths across one 10 Mbit/s access link, together get its 10 Mbit/s of
// IP and no more, and each still sees its own path's delay (10 ms and 40
// ms, plus the shared queue's wait). Their rates and packet sizes differ:
// two floods of one rate and size send at the same instants on the
// virtual clock, and a full drop-tail queue then takes one's packet
// first at every instant (measured: 1.9 and 7.8 Mbit/s).
func TestLabPathsShareABottleneck(t *testing.T) {
	r := runPlan(t, `
clock: virtual
duration: 4s
links:
  - {name: access, uplink: {rate: 10Mbps, queue: 100}}
  - {name: eu, delay: 10ms}
  - {name: us, delay: 40ms}
paths:
  - {name: to-eu, via: [access, eu], match: {dst: 10.20.0.0/16}}
  - {name: to-us, via: [access, us], match: {dst: 10.30.0.0/16}}
flows:
  - {name: eu, type: udp, rate: 7Mbps, packet_size: 1000, duration: 4s, path: to-eu}
  - {name: us, type: udp, rate: 9Mbps, packet_size: 1200, duration: 4s, path: to-us}
expect:
  - links.access.uplink.drops.queue > 0
  - links.eu.uplink.packets_in > 1000
`).Runs[0]
	eu, us := flowByName(t, r, "eu"), flowByName(t, r, "us")
	// Of IP: 28 bytes of headers a datagram.
	euIP, usIP := eu.ThroughputBps*1028/1000, us.ThroughputBps*1228/1200
	sum := euIP + usIP
	t.Logf("eu %.3f + us %.3f = %.3f Mbit/s of IP", euIP/1e6, usIP/1e6, sum/1e6)
	// The flows' intervals (first to last arrival) differ by their
	// paths' 30 ms: 1% of 4 s; the sum of the two rates is within that
	// of the link's.
	if sum > 10e6*1.01 || sum < 10e6*0.97 || euIP < 1e6 || usIP < 1e6 {
		t.Errorf("together %.3f Mbit/s of IP (eu %.3f, us %.3f), want 10, at most 1%% more, each a share", sum/1e6, euIP/1e6, usIP/1e6)
	}
	// The first datagrams of both flows meet an empty queue at one
	// instant: each waits at most for the other's and its own
	// serialization (1028 and 1228 bytes at 10 Mbit/s: 0.82 and 0.98 ms).
	for _, c := range []struct {
		f    string
		ms   float64
		size float64
	}{{"eu", 10, 1028}, {"us", 40, 1228}} {
		d := flowByName(t, r, c.f).UDPSummary.DelayMs
		own := c.size * 8 / 10e6 * 1e3
		t.Logf("%s: delay %.3f ms at least, %.3f median", c.f, d.Min, d.P50)
		if d.Min < c.ms+own-0.001 || d.Min > c.ms+own+0.983 {
			t.Errorf("%s: delay %.3f ms at least, want %.0f ms of path, its serialization (%.3f ms) and at most the other's", c.f, d.Min, c.ms, own)
		}
	}
	if r.Links[0].Name != "access.uplink" || r.Links[0].Drops["queue"] == 0 {
		t.Errorf("%s: drops %v, want the shared queue's", r.Links[0].Name, r.Links[0].Drops)
	}
	// Expectations name a link's direction as summary.json does.
	for _, e := range r.Expectations {
		if !e.Pass || !strings.HasPrefix(e.Figure, "links.access.uplink.") && !strings.HasPrefix(e.Figure, "links.eu.uplink.") {
			t.Errorf("expectation %+v", e)
		}
	}
}

// TestLabPathsTimeline: the timeline changes one link by name
// (links.eu.delay) mid-run; only the path across it sees the change.
func TestLabPathsTimeline(t *testing.T) {
	r := runPlan(t, `
clock: virtual
duration: 2s
links:
  - {name: access}
  - {name: eu, delay: 20ms}
  - {name: us, delay: 80ms}
paths:
  - {name: to-eu, via: [access, eu], match: {dst: 10.20.0.0/16}}
  - {name: to-us, via: [access, us], match: {dst: 10.30.0.0/16}}
flows:
  - {name: eu, type: udp, interval: 10ms, packet_size: 200, duration: 2s, path: to-eu}
  - {name: us, type: udp, interval: 10ms, packet_size: 200, duration: 2s, path: to-us}
timeline:
  - {at: 1s, set: {links.eu.delay: 50ms}}
`).Runs[0]
	eu, us := flowByName(t, r, "eu").UDPSummary.DelayMs, flowByName(t, r, "us").UDPSummary.DelayMs
	t.Logf("eu %.3f to %.3f ms, us %.3f to %.3f ms", eu.Min, eu.Max, us.Min, us.Max)
	if math.Abs(eu.Min-20) > 1 || math.Abs(eu.Max-50) > 1 || math.Abs(us.Min-80) > 1 || math.Abs(us.Max-80) > 1 {
		t.Errorf("eu %.3f to %.3f ms, us %.3f to %.3f ms; want eu 20 then 50, us 80 throughout", eu.Min, eu.Max, us.Min, us.Max)
	}
	want := summary.TimelineEvent{TimeS: 1, Key: "links.eu.delay", Old: "20ms", New: "50ms"}
	if len(r.Timeline) != 1 || r.Timeline[0] != want {
		t.Errorf("timeline %+v, want %+v", r.Timeline, want)
	}
	if c := r.Links[2].Configured; r.Links[2].Name != "eu.uplink" || c.DelayMs != 20 {
		t.Errorf("%s configured %+v", r.Links[2].Name, c)
	}
}

// TestLabLinkEndCaptures: capture: [eu.client, eu.server] writes what
// enters and leaves link eu at each end: at its client end what enters
// its uplink and leaves its downlink, at its server end what leaves its
// uplink and enters its downlink, packet for packet.
func TestLabLinkEndCaptures(t *testing.T) {
	out := t.TempDir()
	plan := mustPlan(t, `
clock: virtual
duration: 2s
links:
  - {name: access, delay: 5ms}
  - {name: eu, delay: 15ms, loss: 5%}
paths:
  - {name: to-eu, via: [access, eu], match: {dst: 10.20.0.0/16}}
  - {name: direct, via: [access]}
capture: [eu.client, eu.server]
flows:
  - {name: probe, type: udp, interval: 10ms, packet_size: 200, duration: 2s, path: to-eu}
  - {name: bulk, type: tcp, size: 100KB, path: to-eu}
  - {name: local, type: udp, interval: 10ms, packet_size: 200, duration: 2s}
`)
	r := runInto(t, plan, out, Options{}).Runs[0]
	up, down := r.Links[2], r.Links[3]
	if up.Name != "eu.uplink" || down.Name != "eu.downlink" {
		t.Fatalf("links %s, %s", up.Name, down.Name)
	}
	client, server := r.Captures["eu.client"], r.Captures["eu.server"]
	t.Logf("eu.client %d packets, eu.server %d; eu.uplink %d in, %d out; eu.downlink %d in, %d out",
		client.Packets, server.Packets, up.PacketsIn, up.PacketsOut, down.PacketsIn, down.PacketsOut)
	if client.Packets != up.PacketsIn+down.PacketsOut || server.Packets != up.PacketsOut+down.PacketsIn || client.Packets <= server.Packets {
		t.Errorf("eu.client %d packets, eu.server %d; want %d and %d", client.Packets, server.Packets,
			up.PacketsIn+down.PacketsOut, up.PacketsOut+down.PacketsIn)
	}
	for _, f := range []string{"eu.client.pcap", "eu.server.pcap"} {
		if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() < 1000 {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// TestLabPathByPort: a path matching a protocol and port takes the
// flows to that port (the flow's server listens on it), both ways; the
// others take the default path, to the same kind of server.
func TestLabPathByPort(t *testing.T) {
	r := runPlan(t, `
clock: virtual
duration: 1s
links:
  - {name: access, delay: 5ms}
  - {name: quic, delay: 25ms}
paths:
  - {name: quic, via: [access, quic], match: {proto: udp, port: 443}}
  - {name: other, via: [access]}
flows:
  - {name: q, type: udp, interval: 10ms, packet_size: 200, duration: 1s, path: quic}
  - {name: u, type: udp, interval: 10ms, packet_size: 200, duration: 1s}
  - {name: t, type: tcp, size: 50KB}
`).Runs[0]
	for _, c := range []struct {
		flow string
		ms   float64
	}{{"q", 30}, {"u", 5}} {
		d := flowByName(t, r, c.flow).UDPSummary.DelayMs
		if d.Count < 90 || math.Abs(d.Min-c.ms) > 1 || math.Abs(d.Max-c.ms) > 1 {
			t.Errorf("%s: %d datagrams, delay %.3f to %.3f ms, want %.0f", c.flow, d.Count, d.Min, d.Max, c.ms)
		}
	}
	if f := flowByName(t, r, "t"); !f.TCPSummary.Completed || f.TCPSummary.ConnectS*1000 > 12 {
		t.Errorf("t: completed %v, handshake %.3f ms, want the default path's 10 ms", f.TCPSummary.Completed, f.TCPSummary.ConnectS*1000)
	}
	if q := r.Links[2]; q.Name != "quic.uplink" || q.PacketsIn != flowByName(t, r, "q").UDPSummary.PacketsSent {
		t.Errorf("%s: %d packets in, want q's %d only", q.Name, q.PacketsIn, flowByName(t, r, "q").UDPSummary.PacketsSent)
	}
}

// TestLabPathNetsRefused: a path whose dst holds the lab's client
// addresses, or a flow the routers would send along another path than
// its own, is refused before the run, saying why.
func TestLabPathNetsRefused(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{`
links: [{name: a}, {name: b}]
paths:
  - {name: p, via: [a, b], match: {dst: 10.0.0.0/8}}
  - {name: q, via: [a]}
flows: [{name: f, type: udp, count: 1, interval: 10ms, path: p}]
`, "path p: its dst 10.0.0.0/8 overlaps 10.0.0.0/24, the lab's own"},
		{`
links: [{name: a}, {name: b}]
paths:
  - {name: p, via: [a, b], match: {proto: udp}}
  - {name: q, via: [a]}
flows: [{name: f, type: udp, count: 1, interval: 10ms}]
`, "flow f: its packets (udp to 10.0.0.101, port 5001) would take path p, not its path q"},
	} {
		plan := mustPlan(t, "clock: virtual\nduration: 1s\n"+c.src)
		sum, err := Run(context.Background(), plan, Options{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s\nerror %v, want %q (summary %+v)", c.src, err, c.want, sum)
		}
	}
}

// TestDeliveryWaitsReachTheirDirection: the times a direction waited for
// a receiver's full inbox are the summary's, on the direction that
// delivered into it, beside the drops of an inbox stuck past its wait.
// The server's inbox here holds one packet and nothing takes it: the
// second packet waits, then is dropped.
func TestDeliveryWaitsReachTheirDirection(t *testing.T) {
	s := mustPlan(t, "duration: 1s\nlink: {delay: 1ms}\nflows: [{name: f, type: tcp, duration: 1s}]\n").Runs[0]
	in := topology.NewQueue("server inbox", 1, 1<<20, time.Millisecond)
	pool := impair.NewPool(1600)
	for range 2 {
		in.Push(time.Time{}, pool.Copy(make([]byte, 100)))
	}
	l := &lab{s: s, servers: []*endHost{{name: "server", in: in}}}
	rows := []summary.LinkSummary{{Name: "uplink"}, {Name: "downlink"}}
	l.addDeliveryCounts(s, rows)
	if up := rows[0]; up.DeliveryWaits != 1 || up.DeliveryDrops != 1 {
		t.Errorf("uplink: %d waits, %d delivery drops; want 1 and 1", up.DeliveryWaits, up.DeliveryDrops)
	}
	if down := rows[1]; down.DeliveryWaits != 0 || down.DeliveryDrops != 0 {
		t.Errorf("downlink: %d waits, %d delivery drops; want none", down.DeliveryWaits, down.DeliveryDrops)
	}
}

// TestLabPathIPv6Down: a path whose dst is IPv6 gives its servers an
// IPv6 address only; a flow down it dials the client's IPv6 address (it
// dialled the IPv4 one, which the server cannot reach: "host server0 has
// no IPv4 address").
func TestLabPathIPv6Down(t *testing.T) {
	r := runPlan(t, `
clock: virtual
duration: 2s
links: [{name: x, delay: 1ms, rate: 50Mbps}]
paths: [{name: p, via: [x], match: {dst: 'fd00:1::/64'}}, {name: q, via: [x]}]
flows:
  - {name: down, type: tcp, size: 100KB, path: p, direction: down}
  - {name: probe, type: udp, interval: 10ms, duration: 1s, path: p, direction: down}
  - {name: up, type: tcp, size: 100KB, path: p}
`).Runs[0]
	for _, name := range []string{"down", "up"} {
		if f := flowByName(t, r, name); f.TCPSummary == nil || !f.TCPSummary.Completed {
			t.Errorf("flow %s did not complete: %+v", name, f)
		}
	}
	if f := flowByName(t, r, "probe"); f.UDPSummary == nil || f.UDPSummary.PacketsReceived == 0 {
		t.Errorf("flow probe received nothing: %+v", f)
	}
}
