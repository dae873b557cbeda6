package emulator

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/netjam/netjam/flows"
	"github.com/netjam/netjam/scenario"
	"github.com/netjam/netjam/summary"

	"github.com/netjam/netjam/internal/testenv"
)

// runPlan runs a scenario text and returns its summary; a failed run fails
// the test.
func runPlan(t *testing.T, y string) *summary.Summary {
	t.Helper()
	sum, err := Run(context.Background(), mustPlan(t, y), Options{})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return sum
}

func flowByName(t *testing.T, r summary.RunSummary, name string) flows.FlowSummary {
	t.Helper()
	for _, f := range r.Flows {
		if f.Name == name {
			return f
		}
	}
	t.Fatalf("no flow %q in %+v", name, r.Flows)
	return flows.FlowSummary{}
}

// TestLabTCPArrivesByteExact sends 5 MiB clean and 1 MiB with loss; the flow
// itself verifies every byte, so a clean return is the check. The seed keeps
// the handshakes whole: a SYN-ACK lost on the way seeds the sender's RTT with
// the 1 s of its timeout (the echo names the first SYN, RFC 7323 4.3), so
// the timeouts start at 3 s and back off to 6, 12 and 24; over 3% loss
// without SACK that once took a flow past the minute (under the race
// detector, 406 KB of 1 MiB). What a retransmitted handshake does to the RTT
// is stack.TestRetransmittedHandshakeSamplesTheRoundTrip's.
func TestLabTCPArrivesByteExact(t *testing.T) {
	sum := runPlan(t, `
seed: 2
duration: 60s
link: {delay: 5ms}
flows: [{name: bulk, type: tcp, size: 5MiB}]
variants:
  - {name: clean, set: {}}
  - {name: lossy, set: {link.loss: 3%, flows.bulk.size: 1MiB}}
  - {name: lossy-nosack-reno, set: {link.loss: 3%, flows.bulk.size: 1MiB, flows.bulk.sack: false, flows.bulk.cc: reno}}
`)
	for _, r := range sum.Runs {
		f := flowByName(t, r, "bulk")
		size := uint64(1 << 20)
		if r.Variant == "clean" {
			size = 5 << 20
		}
		if f.BytesReceived != size || f.CompletionS <= 0 {
			t.Errorf("%s: received %d bytes, completion %v", r.Variant, f.BytesReceived, f.CompletionS)
		}
		if r.Variant != "clean" && f.Retransmissions == 0 {
			t.Errorf("%s: no retransmissions over a lossy path", r.Variant)
		}
		// The handshake takes a round trip (10 ms), or a SYN timeout of
		// 1 s (then 2, 4, ...) per SYN or SYN-ACK lost.
		if f.ConnectS < 0.01 || f.TotalS != f.ConnectS+f.CompletionS {
			t.Errorf("%s: connect %v s, total %v s: want at least a round trip, and connect + completion", r.Variant, f.ConnectS, f.TotalS)
		}
	}
}

// A lab host's TCP counters (summary.json's hosts[].tcp) count what crossed
// the links: the client's segments sent are what the uplink took, its
// segments received what the downlink delivered, and the server's the other
// way; its retransmissions are its one flow's. On the virtual clock, over
// 2% loss both ways.
func TestLabHostsCountTCPAsTheLinks(t *testing.T) {
	sum := runPlan(t, `
clock: virtual
seed: 3
duration: 5s
link: {delay: 5ms, loss: 2%, rate: 20Mbps}
flows: [{name: bulk, type: tcp, duration: 5s}]
expect: [hosts.client0.tcp.retransmits > 0]
`)
	r := sum.Runs[0]
	if len(r.Hosts) != 2 || r.Hosts[0].Name != "client0" || r.Hosts[1].Name != "server0" {
		t.Fatalf("hosts %+v, want client0 and server0", r.Hosts)
	}
	c, s := r.Hosts[0].TCP, r.Hosts[1].TCP
	up, down := r.Links[0], r.Links[1]
	f := flowByName(t, r, "bulk")
	t.Logf("client %+v\nserver %+v\nuplink in %d out %d, downlink in %d out %d; flow: %d retransmissions", c, s, up.PacketsIn, up.PacketsOut, down.PacketsIn, down.PacketsOut, f.Retransmissions)
	// The last segments (a FIN's ACK, a reset) may leave as the run
	// ends, after the links stopped counting.
	near := func(what string, got, want uint64) {
		if got < want || got > want+2 {
			t.Errorf("%s: %d, want %d (or up to 2 more)", what, got, want)
		}
	}
	near("client's segments sent against the uplink's packets in", c.SegmentsSent, up.PacketsIn)
	near("server's segments sent against the downlink's packets in", s.SegmentsSent, down.PacketsIn)
	if c.SegmentsReceived != down.PacketsOut || s.SegmentsReceived != up.PacketsOut {
		t.Errorf("segments received: client %d, server %d; the links delivered %d and %d", c.SegmentsReceived, s.SegmentsReceived, down.PacketsOut, up.PacketsOut)
	}
	if c.Retransmits == 0 || c.Retransmits != f.Retransmissions {
		t.Errorf("client retransmitted %d segments, its flow %d: want the same, not 0", c.Retransmits, f.Retransmissions)
	}
	if len(r.Expectations) != 1 || !r.Expectations[0].Pass {
		t.Errorf("expectations %+v, want hosts.client0.tcp.retransmits > 0 to hold", r.Expectations)
	}
}

// TestLabUDPLossMatchesConfiguredRate: 4000 datagrams over 5% random loss.
// The number lost is Binomial(4000, 0.05): sd = sqrt(0.05*0.95/4000) =
// 0.0034 of the ratio; 4.5 sd gives a band of +-0.0155 that a correct
// emulator leaves about once in 150,000 runs. And the flow's lost datagrams
// must be exactly the uplink's loss drops: nothing else may lose them.
func TestLabUDPLossMatchesConfiguredRate(t *testing.T) {
	sum := runPlan(t, `
seed: 11
link: {uplink: {loss: 5%, delay: 20ms}}
flows: [{name: probe, type: udp, interval: 1ms, count: 4000, packet_size: 100}]
`)
	r := sum.Runs[0]
	f := flowByName(t, r, "probe")
	if math.Abs(f.LossRatio-0.05) > 0.0155 {
		t.Errorf("loss ratio %.4f, want 0.05 +- 0.0155", f.LossRatio)
	}
	up := r.Links[0]
	if lost := f.PacketsSent - f.PacketsReceived; lost != up.Drops["loss"] {
		t.Errorf("flow lost %d datagrams, uplink dropped %d (%v)", lost, up.Drops["loss"], up.Drops)
	}
	// One-way delay: the configured 20 ms plus what the stacks and the
	// scheduler add, tens of microseconds. The fastest datagram shows
	// the path's delay: a loaded machine delays datagrams, it speeds none
	// up (the median was 40.6 ms once at a load of 13 under the race
	// detector, when it was bounded too; the path's own p50 below is
	// exact). A delay applied twice or not at all is 20 ms off.
	if f.DelayMs.Min < 20 || f.DelayMs.Min > 21 {
		t.Errorf("one-way delay min %.3f ms, p50 %.3f ms: want the fastest within 1 ms above 20 ms", f.DelayMs.Min, f.DelayMs.P50)
	}
	if up.Achieved.DelayMs.P50 != 20 {
		t.Errorf("uplink added %.3f ms at p50, configured 20 ms", up.Achieved.DelayMs.P50)
	}
}

// TestLabTraceDrivenLink: UDP offered above a trace-driven link's capacity
// arrives at what its opportunities carry. The trace is a 100 ms round of
// bursts and gaps: two opportunities a millisecond for 50 ms, none for
// 49 ms, one at 100 ms, so 1010 a second of 1504 bytes: 12.15 Mbit/s of
// IP, 1000/1028 of it payload (a packet spans opportunities, so a
// saturated link wastes none). On the virtual clock, so that a loaded
// machine cannot make the opportunities late.
func TestLabTraceDrivenLink(t *testing.T) {
	var b strings.Builder
	for ms := 1; ms <= 50; ms++ {
		fmt.Fprintf(&b, "%d\n%d\n", ms, ms)
	}
	b.WriteString("100\n")
	trace := filepath.Join(t.TempDir(), "bursts.trace")
	if err := os.WriteFile(trace, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	plan := mustPlan(t, fmt.Sprintf(`
clock: virtual
duration: 6s
link: {uplink: {rate: {trace: %s}, queue: 100}}
flows: [{name: flood, type: udp, rate: 20Mbps, packet_size: 1000, duration: 6s}]
`, trace))
	sum := runInto(t, plan, out, Options{})
	r := sum.Runs[0]
	f := flowByName(t, r, "flood")
	capacity := 1010 * 1504 * 8.0
	t.Logf("delivered %.3f Mbit/s of payload; the trace carries %.3f of IP", f.ThroughputBps/1e6, capacity/1e6)
	if payload := capacity * 1000 / 1028; math.Abs(f.ThroughputBps-payload)/payload > 0.03 {
		t.Errorf("delivered %.3f Mbit/s, want %.3f within 3%%", f.ThroughputBps/1e6, payload/1e6)
	}
	// The time series has what the trace offered in each interval:
	// on average its capacity (samples of 100 ms, one round each).
	csv, err := os.ReadFile(filepath.Join(out, "timeseries.csv"))
	if err != nil {
		t.Fatal(err)
	}
	var n, total float64
	for _, line := range strings.Split(string(csv), "\n") {
		if f := strings.Split(line, ","); len(f) == 5 && f[2] == "capacity_bps" && f[3] == "uplink" {
			v, _ := strconv.ParseFloat(f[4], 64)
			n, total = n+1, total+v
		}
	}
	if n < 50 || math.Abs(total/n-capacity)/capacity > 0.02 {
		t.Errorf("%.0f capacity samples, mean %.3f Mbit/s; want about 60, %.3f within 2%%", n, total/n/1e6, capacity/1e6)
	}
	up := r.Links[0]
	if up.Configured.Trace != trace || up.Configured.RateBps != uint64(capacity) || up.Drops["queue"] == 0 {
		t.Errorf("configured %+v, drops %v: want the trace, its mean rate and queue drops", up.Configured, up.Drops)
	}
}

// TestLabTCPFillsTheBottleneck: a lone TCP flow over 10 Mbit/s and 20 ms of
// round trip with an ample queue gets at least 90% of the rate left for
// payload: 1448 of each 1500-byte packet with TCP timestamps. On the
// virtual clock, so that a loaded machine's scheduling cannot starve the
// sender (on the wall clock this failed under CI's race pass).
func TestLabTCPFillsTheBottleneck(t *testing.T) {
	sum := runPlan(t, `
clock: virtual
duration: 6s
link: {rate: 10Mbps, delay: 10ms, queue: 1000}
flows: [{name: bulk, type: tcp, duration: 6s}]
`)
	f := flowByName(t, sum.Runs[0], "bulk")
	payload := 10e6 * 1448 / 1500
	t.Logf("goodput %.3f Mbit/s of %.3f", f.ThroughputBps/1e6, payload/1e6)
	if f.ThroughputBps < 0.9*payload {
		t.Errorf("goodput %.2f Mbit/s, want at least 90%% of %.2f", f.ThroughputBps/1e6, payload/1e6)
	}
}

// TestLabUDPAboveBottleneckIsCutToIt: 20 Mbit/s of UDP into a 10 Mbit/s link
// arrives at 10 Mbit/s of IP, 1000/1028 of it payload. On the virtual
// clock: on the wall clock a loaded machine's sender fell behind the
// offered rate (CI: 9.00 of 9.73 Mbit/s at a load average of 9).
func TestLabUDPAboveBottleneckIsCutToIt(t *testing.T) {
	sum := runPlan(t, `
clock: virtual
duration: 6s
link: {uplink: {rate: 10Mbps, queue: 100}}
flows: [{name: flood, type: udp, rate: 20Mbps, packet_size: 1000, duration: 6s}]
`)
	r := sum.Runs[0]
	f := flowByName(t, r, "flood")
	payload := 10e6 * 1000 / 1028
	if math.Abs(f.ThroughputBps-payload)/payload > 0.03 {
		t.Errorf("delivered %.3f Mbit/s, want %.3f within 3%%", f.ThroughputBps/1e6, payload/1e6)
	}
	if r.Links[0].Drops["queue"] == 0 {
		t.Errorf("no queue drops with twice the link rate offered: %v", r.Links[0].Drops)
	}
}

// TestShippedConfigsRun runs every scenario of configs/, each variant cut
// to 2 s, and checks that every flow moved data.
func TestShippedConfigsRun(t *testing.T) {
	files, err := filepath.Glob("../configs/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no configs: %v", err)
	}
	d := 2 * time.Second
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			p, err := scenario.Load(f, scenario.Options{Duration: &d})
			if err != nil {
				t.Fatal(err)
			}
			// Runs in TUN mode put their device in a namespace of the
			// test; without the privileges for it they must be reported
			// as skipped, and the others run.
			tun := false
			for _, s := range p.Runs {
				tun = tun || s.TUN != nil
			}
			privileged := tun && testenv.TUNPrivileged()
			if tun && (privileged || os.Getenv("NETJAM_REQUIRE_TUN") == "1") {
				ns := testNetns(t)
				for _, s := range p.Runs {
					if s.TUN != nil {
						s.TUN.Device.Netns = ns.Path()
					}
				}
			}
			sum, err := Run(context.Background(), p, Options{})
			if err != nil && !(tun && !privileged && IsPrivilege(err)) {
				t.Fatal(err)
			}
			if len(sum.Runs) != len(p.Runs) {
				t.Fatalf("%d runs of %d", len(sum.Runs), len(p.Runs))
			}
			for i, r := range sum.Runs {
				if r.Skipped != "" {
					if privileged || p.Runs[i].TUN == nil {
						t.Errorf("%s: skipped: %s", r.Variant, r.Skipped)
					}
					continue
				}
				for _, fl := range r.Flows {
					if fl.ThroughputBps <= 0 {
						t.Errorf("%s/%s: no data moved", r.Variant, fl.Name)
					}
				}
			}
		})
	}
}

// TestLabWiFiCell runs two stations' flows across an 802.11g cell: the
// medium must carry every delivered datagram once, and report each
// station's exchanges.
func TestLabWiFiCell(t *testing.T) {
	sum := runPlan(t, `
duration: 3s
wifi: {standard: 802.11g, stations: [{name: a}, {name: b, rate: 12Mbps}]}
flows:
  - {name: up, type: udp, rate: 2Mbps, packet_size: 1000, duration: 2s, station: a}
  - {name: down, type: udp, rate: 1Mbps, packet_size: 500, duration: 2s, station: b, direction: down}
`)
	r := sum.Runs[0]
	if r.WiFi == nil || len(r.WiFi.Stations) != 2 {
		t.Fatalf("wifi stats %+v", r.WiFi)
	}
	up, down := flowByName(t, r, "up"), flowByName(t, r, "down")
	if up.PacketsReceived == 0 || down.PacketsReceived == 0 {
		t.Fatalf("flows moved nothing: %+v %+v", up, down)
	}
	// Station a sent the uplink datagrams; the AP sent the downlink ones
	// to b. The medium acknowledged each exactly once (no frame errors
	// configured, and no retry limit reached at this load).
	if got := r.WiFi.Stations[0].Delivered; got != up.PacketsSent {
		t.Errorf("station a delivered %d frames, flow sent %d", got, up.PacketsSent)
	}
	if got := r.WiFi.AP.Delivered; got != down.PacketsSent {
		t.Errorf("AP delivered %d frames, flow sent %d", got, down.PacketsSent)
	}
}

// TestLabCaptureMatchesLinkCounters: the client point sees what enters the
// uplink and leaves the downlink, the server point the other two ends. The
// seed keeps the handshake whole: with 5% loss, about one seed in 150 loses
// it twice, and the flow then connects at 3 s, after the run's 2 s (seed
// 205; once under the race detector in CI).
func TestLabCaptureMatchesLinkCounters(t *testing.T) {
	dir := t.TempDir()
	sum, err := Run(context.Background(), mustPlan(t, `
seed: 1
duration: 2s
link: {loss: 5%, delay: 5ms}
capture: [client, server]
flows: [{name: bulk, type: tcp, size: 300KB}, {name: probe, type: udp, interval: 2ms, count: 300}]
`), Options{OutDir: openOut(t, dir)})
	if err != nil {
		t.Fatal(err)
	}
	r := sum.Runs[0]
	up, down := r.Links[0], r.Links[1]
	if got, want := r.Captures["client"].Packets, up.PacketsIn+down.PacketsOut; got != want {
		t.Errorf("client capture %d packets, links say %d", got, want)
	}
	if got, want := r.Captures["server"].Packets, up.PacketsOut+down.PacketsIn; got != want {
		t.Errorf("server capture %d packets, links say %d", got, want)
	}
	for _, f := range []string{"client.pcap", "server.pcap"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() <= 24 {
			t.Errorf("%s: %v", f, err)
		}
	}
	if _, err := Run(context.Background(), mustPlan(t, "capture: [client]\n"), Options{}); err == nil {
		t.Error("a capture without an output folder was accepted")
	}
}

// requireTshark returns tshark's path, or skips the test without it
// (fails it when NETJAM_REQUIRE_TSHARK=1).
func requireTshark(t *testing.T) string {
	t.Helper()
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		if os.Getenv("NETJAM_REQUIRE_TSHARK") == "1" {
			t.Fatal("tshark is required (NETJAM_REQUIRE_TSHARK=1) but not installed")
		}
		t.Skip("tshark is not installed (apt-get install tshark)")
	}
	return tshark
}

// tsharkRetransmissions returns how many packets of the capture at path
// tshark's TCP analysis marks as sent again: retransmissions, fast ones,
// spurious ones, and those it calls out-of-order (sent again soon after
// the segment they follow). from, when not empty, is a display filter
// the packets must also pass (the sender's address).
func tsharkRetransmissions(t *testing.T, tshark, path, from string) uint64 {
	t.Helper()
	filter := "tcp.analysis.retransmission or tcp.analysis.fast_retransmission or tcp.analysis.out_of_order or tcp.analysis.spurious_retransmission"
	if from != "" {
		filter = from + " and (" + filter + ")"
	}
	out, err := exec.Command(tshark, "-r", path, "-Y", filter, "-T", "fields", "-e", "frame.number").Output()
	if err != nil {
		t.Fatalf("tshark: %v", err)
	}
	return uint64(strings.Count(string(out), "\n"))
}

// TestCaptureRetransmissionsSeenByTshark: tshark's TCP analysis of the
// client capture finds the retransmissions the sending stack counted. (A
// retransmission sent soon after its original is "out-of-order" to tshark.)
func TestCaptureRetransmissionsSeenByTshark(t *testing.T) {
	tshark := requireTshark(t)
	dir := t.TempDir()
	sum, err := Run(context.Background(), mustPlan(t, `
seed: 3
duration: 20s
link: {loss: 3%, delay: 10ms}
capture: [client]
flows: [{name: bulk, type: tcp, size: 2MB}]
`), Options{OutDir: openOut(t, dir)})
	if err != nil {
		t.Fatal(err)
	}
	f := flowByName(t, sum.Runs[0], "bulk")
	seen := tsharkRetransmissions(t, tshark, filepath.Join(dir, "client.pcap"), "")
	if f.Retransmissions == 0 {
		t.Fatal("no retransmissions over a lossy path")
	}
	diff := math.Abs(float64(seen) - float64(f.Retransmissions))
	if diff > math.Max(2, 0.1*float64(f.Retransmissions)) {
		t.Errorf("tshark sees %d retransmissions, the sender counted %d", seen, f.Retransmissions)
	}
}

// TestLabRunEndsWithinASecondOfItsDuration fills a 1000-packet queue at
// 1 Mbit/s (8 s of backlog) and checks that the run ends within a second of
// its duration, counting what the queue still held as flushed, and what
// arrived after the sender stopped apart.
func TestLabRunEndsWithinASecondOfItsDuration(t *testing.T) {
	// On the virtual clock: the throughput bound below is exact there;
	// on the wall clock a first datagram delivered late on a loaded
	// machine shortens the flow's interval (1.020 Mbit/s measured
	// against the bound of 0.983).
	sum := runPlan(t, `
clock: virtual
duration: 1s
link: {uplink: {rate: 1Mbps, queue: 1000}}
flows: [{name: flood, type: udp, rate: 10Mbps, packet_size: 1000, duration: 1s}]
`)
	r := sum.Runs[0]
	if r.DurationS > 2 {
		t.Errorf("run took %.2f s for a duration of 1 s, want at most 2", r.DurationS)
	}
	up := r.Links[0]
	if up.Drops["flushed"] == 0 {
		t.Errorf("no flushed packets with seconds of backlog at the end: %v", up.Drops)
	}
	f := flowByName(t, r, "flood")
	// The run cut the flow short: the datagrams after the highest one
	// received (queued, flushed at the end, or dropped by the full
	// queue: the receiver cannot tell) are in flight, not lost.
	if f.BytesAfterStop == 0 || f.InFlight == 0 || f.Lost+f.InFlight+f.PacketsReceived != f.PacketsSent {
		t.Errorf("%d bytes after the stop, %d lost + %d in flight + %d received of %d sent; want some after the stop and in flight, adding up to sent",
			f.BytesAfterStop, f.Lost, f.InFlight, f.PacketsReceived, f.PacketsSent)
	}
	// What arrived crossed the 1 Mbit/s link (1028 bytes per datagram
	// on the wire): the flow's figure cannot exceed the link's payload
	// rate by more than its interval's rounding.
	if payload := 1e6 * 1000 / 1028; f.ThroughputBps > payload*1.01 {
		t.Errorf("throughput %.3f Mbit/s above the link's payload rate %.3f", f.ThroughputBps/1e6, payload/1e6)
	}
}

// TestLabCleanPathLosesNothing runs one TCP flow at full speed for 5 s on
// a path with no impairment: whatever the machine's speed, nothing may be
// lost inside netjam (a full inbox waits, see inbox).
func TestLabCleanPathLosesNothing(t *testing.T) {
	sum := runPlan(t, `
duration: 5s
flows: [{name: bulk, type: tcp, duration: 5s}]
`)
	r := sum.Runs[0]
	f := flowByName(t, r, "bulk")
	for _, l := range r.Links {
		var n uint64
		for reason, d := range l.Drops {
			if reason != "flushed" { // what was in flight at the end
				n += d
			}
		}
		if n > 0 || l.DeliveryDrops > 0 {
			t.Errorf("%s: drops %v, %d delivery drops; want none on a clean path", l.Name, l.Drops, l.DeliveryDrops)
		}
	}
	// Retransmissions are not checked: on a loaded machine the receiving
	// host can be descheduled for longer than the sender's tail loss
	// probe timeout (2 SRTT, a few ms here), and the sender then probes
	// though nothing was lost (captured: every segment arrived in order,
	// no SACK block was ever sent, the probe followed an ACK 19 ms late).
	// See docs/measurements.md.
	t.Logf("%.0f Mbit/s, %d retransmissions (spurious: nothing was dropped)", f.ThroughputBps/1e6, f.Retransmissions)
}

// TestLabFlowsAddUpToWhatThePathCarried runs ten TCP flows through one
// 20 Mbit/s bottleneck: their throughputs, each over its own arrival
// interval, must not add up to more than the link carried in those
// intervals. The intervals differ: the flows' first data wait behind each
// other's first windows in the queue (ten of ten segments fill its 100
// packets, q = 60 ms), and their last arrivals spread as the queue drains
// (q again), so rates over intervals down to T - 2q may add up to
// T/(T-2q) of the link's, 4% over 3 s, with nothing wrong. The test had
// 1%, and failed on the wall clock about one run in six (by 1.1% to 1.6%,
// before and after session 13 alike), and at times on the virtual clock.
// Now on the virtual clock with a seed: the same run every time.
func TestLabFlowsAddUpToWhatThePathCarried(t *testing.T) {
	var b strings.Builder
	b.WriteString("clock: virtual\nseed: 1\nduration: 3s\nlink: {delay: 5ms, uplink: {rate: 20Mbps, queue: 100}}\nflows:\n")
	for i := range 10 {
		fmt.Fprintf(&b, "  - {name: f%d, type: tcp, duration: 3s}\n", i)
	}
	sum := runPlan(t, b.String())
	r := sum.Runs[0]
	total := 0.0
	for _, f := range r.Flows {
		total += f.ThroughputBps
	}
	// 1448 bytes of payload in each 1500-byte packet, at most 20 Mbit/s
	// of packets, over intervals at least T - 2q long.
	const T, q = 3.0, 100 * 1500 * 8 / 20e6
	if max := 20e6 * 1448 / 1500 * T / (T - 2*q); total > max {
		t.Errorf("the flows add up to %.2f Mbit/s, more than the %.2f the link could carry over their intervals", total/1e6, max/1e6)
	}
	t.Logf("flows add up to %.2f Mbit/s", total/1e6)
}

// TestLabBelowIPv6MTU: a lab whose mtu is below IPv6's minimum (576, the
// smallest the scenario takes) runs, its hosts without IPv6 as Linux
// leaves such an interface; it failed to start ("mtu: 576 is below
// IPv6's minimum of 1280"), though the scenario was valid.
func TestLabBelowIPv6MTU(t *testing.T) {
	r := runPlan(t, `
clock: virtual
duration: 2s
mtu: 576
link: {rate: 10Mbps, delay: 5ms}
flows:
  - {name: t, type: tcp, size: 100KB}
  - {name: u, type: udp, interval: 10ms, packet_size: 548, duration: 1s}
`).Runs[0]
	if f := flowByName(t, r, "t"); f.TCPSummary == nil || !f.TCPSummary.Completed {
		t.Errorf("flow t did not complete: %+v", f)
	}
	if f := flowByName(t, r, "u"); f.UDPSummary == nil || f.UDPSummary.PacketsReceived == 0 {
		t.Errorf("flow u received nothing: %+v", f)
	}
}

// TestLabSetupWithinDuration: a flow that cannot connect (the path loses
// every packet) fails the run within the run's duration, saying so; it
// held a 2 s run for 30 s.
func TestLabSetupWithinDuration(t *testing.T) {
	start := time.Now()
	_, err := Run(context.Background(), mustPlan(t, `
duration: 2s
link: {loss: 100%}
flows: [{name: a, type: tcp, duration: 2s}]
`), Options{})
	if err == nil || !strings.Contains(err.Error(), "flow a did not connect within 2s") || time.Since(start) > 10*time.Second {
		t.Errorf("after %s: %v; want the flow not connected within 2s", time.Since(start).Round(time.Millisecond), err)
	}
}
