package emulator

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/netjam/netjam/hostnet"
	"github.com/netjam/netjam/internal/testenv"
	"github.com/netjam/netjam/summary"
)

// Tests of nodes over real TUN devices: the client's device in a
// namespace of the test's, the node's in one netjam makes, real programs
// on both sides. They need root and /dev/net/tun, as the TUN tests do.

// lockedBuffer is a strings.Builder safe for the node's output writer
// and the test together.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// runWithHosts runs a program in ns with the run's hosts file (see
// NodesEtc) and returns its standard output.
func runWithHosts(ctx context.Context, ns *hostnet.Netns, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cmd.WaitDelay = 5 * time.Second
	if err := ns.Start(cmd, NodesEtc(ctx)); err != nil {
		return "", err
	}
	if err := cmd.Wait(); err != nil {
		return out.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, errOut.String())
	}
	return out.String(), nil
}

// TestNodeIperf3DownloadSentByTheNodesKernel downloads with iperf3 -R
// from a node across 10 Mbit/s and 10 ms each way: the sender is the
// node's kernel with the congestion control the client asked for (bbr,
// then cubic), as ss -ti in the node shows and iperf3 reports; the
// client finds the node by name; netjam terminated nothing (no relay,
// no peer TCP); the download fills the rate.
func TestNodeIperf3DownloadSentByTheNodesKernel(t *testing.T) {
	ns := testNetns(t)
	testenv.RequireTool(t, "iperf3", "iperf3")
	testenv.RequireTool(t, "ss", "iproute2")
	avail, _ := hostnet.KernelCongestionControls()
	for _, cc := range []string{"bbr", "cubic"} {
		t.Run(cc, func(t *testing.T) {
			if !slices.Contains(avail, cc) {
				testenv.Missing(t, fmt.Sprintf("the kernel does not offer %s (modprobe tcp_%s)", cc, cc))
			}
			var nodeOut lockedBuffer
			var report string
			y := fmt.Sprintf(`
duration: 60s
link: {rate: 10Mbps, delay: 10ms, queue: 1000}
tun: {netns: %s}
nodes:
  - name: server
    run: iperf3 -s -1 & sleep 2.5; ss -tin state established; wait
`, ns.Path())
			sum, err := Run(context.Background(), mustPlan(t, y), Options{NodeOutput: &nodeOut, Attached: func(ctx context.Context) error {
				var err error
				report, err = runWithHosts(ctx, ns, "iperf3", "-c", "server", "-R", "-C", cc, "-t", "4", "-J")
				return err
			}})
			if err != nil {
				t.Fatalf("run: %v\nnode's output:\n%s", err, nodeOut.String())
			}
			var r iperf3Result
			if err := json.Unmarshal([]byte(report), &r); err != nil {
				t.Fatalf("iperf3 report: %v\n%s", err, report)
			}
			out := nodeOut.String()
			t.Logf("%s: %.2f Mbit/s received; the node's ss -ti:\n%s", r.End.CC, r.End.SumReceived.BitsPerSecond/1e6, out)
			// The data connection's line: its congestion control is
			// the node's kernel's, and it has sent.
			if !strings.Contains(out, " "+cc+" ") || !strings.Contains(out, "bytes_sent:") {
				t.Errorf("ss -ti in the node shows no %s connection that sent", cc)
			}
			if r.End.CC != cc {
				t.Errorf("iperf3 reports the sender's congestion control %q, want %s", r.End.CC, cc)
			}
			// 10 Mbit/s of IP less TCP/IP headers (1448 of 1500 bytes
			// carry data) is 9.65; slow start and the last RTT's
			// drain take a little of 4 s.
			if got := r.End.SumReceived.BitsPerSecond / 1e6; got < 0.9*9.65 || got > 10 {
				t.Errorf("received %.2f Mbit/s, want at least 90%% of 9.65 and no more than the rate", got)
			}
			ts := sum.Runs[0].TUN
			if ts.Relay.TCP.Served+ts.Relay.TCP.Relayed+ts.Relay.UDP.Served != 0 || ts.PeerTCP.SegmentsReceived != 0 {
				t.Errorf("netjam terminated something: relay %+v, peer TCP %+v", ts.Relay, ts.PeerTCP)
			}
			// iperf3 -s -1 ends after its test, or netjam ends it
			// when the client's command ends first.
			if len(ts.Nodes) != 1 {
				t.Fatalf("nodes %+v, want one", ts.Nodes)
			}
			if n := ts.Nodes[0]; n.ExitStatus == nil || !n.EndedByNetjam && *n.ExitStatus != 0 || n.WriteErrors+ts.WriteErrors != 0 {
				t.Errorf("node: %+v, want its command ended (by itself with status 0, or by netjam), no write errors", n)
			}
		})
	}
}

// TestNodeKernelFlowsFillTheSeedPath runs kernel flows kernel to kernel
// on the seeds' path (10 Mbit/s, 10 ms each way, 1000-packet droptail
// queue), both directions: Reno and CUBIC fill at least 95% of what the
// rate carries as payload, and fill the queue (their RTT grows far past
// 20 ms: 1.2 s for Reno, 0.19 s for CUBIC within 5 s); BBR fills it too
// with no loss and its RTT within three times the path's 20 ms (35 and
// 50 ms measured: BBR keeps up to its cwnd gain of 2 BDPs in flight, one
// of them queued), the seed-004 shape. Down, the sender is the node's
// kernel, with the flow's congestion control.
func TestNodeKernelFlowsFillTheSeedPath(t *testing.T) {
	ns := testNetns(t)
	avail, _ := hostnet.KernelCongestionControls()
	var variants []string
	for _, cc := range []string{"reno", "cubic", "bbr"} {
		if !slices.Contains(avail, cc) {
			continue
		}
		for _, dir := range []string{"up", "down"} {
			variants = append(variants, fmt.Sprintf("  - {name: %s-%s, set: {flows.bulk.cc: %s, flows.bulk.direction: %s}}", cc, dir, cc, dir))
		}
	}
	sum := runTUNIn(t, fmt.Sprintf(`
duration: 60s
link: {rate: 10Mbps, delay: 10ms, queue: 1000}
tun: {netns: %s}
nodes: [{name: server}]
flows:
  - {name: bulk, type: tcp, stack: kernel, duration: 5s}
variants:
%s
`, ns.Path(), strings.Join(variants, "\n")), nil)
	// 1448 of each 1500 bytes on the wire are payload.
	const payload = 10e6 * 1448 / 1500
	for _, r := range sum.Runs {
		f := flowByName(t, r, "bulk")
		cc, _, _ := strings.Cut(r.Variant, "-")
		drops := r.Links[0].Drops["queue"] + r.Links[1].Drops["queue"]
		t.Logf("%s: %.2f Mbit/s (%.1f%% of the payload rate), srtt p50 %.1f ms, %d retransmissions, %d queue drops",
			r.Variant, f.ThroughputBps/1e6, 100*f.ThroughputBps/payload, f.RTTMs.P50, f.Retransmissions, drops)
		if f.ThroughputBps < 0.95*payload {
			t.Errorf("%s: %.2f Mbit/s, want at least 95%% of %.2f", r.Variant, f.ThroughputBps/1e6, payload/1e6)
		}
		switch cc {
		case "bbr":
			if f.RTTMs.P50 > 60 || drops != 0 {
				t.Errorf("%s: srtt p50 %.1f ms, %d queue drops; want within 3 times the path's 20 ms, and none", r.Variant, f.RTTMs.P50, drops)
			}
		default:
			if f.RTTMs.P50 < 100 {
				t.Errorf("%s: srtt p50 %.1f ms; a loss-based flow fills the 1000-packet queue (up to 1.2 s)", r.Variant, f.RTTMs.P50)
			}
		}
		if ts := r.TUN; len(ts.Nodes) != 1 || ts.PeerTCP.SegmentsSent != 0 {
			t.Errorf("%s: nodes %+v, peer TCP %+v: want the node's kernel at the far end and no peer", r.Variant, ts.Nodes, ts.PeerTCP)
		}
	}
}

// TestNodeECNReachesTheKernels: with ECN on in both namespaces
// (net.ipv4.tcp_ecn=1) and a CoDel queue that marks (ecn: true), a
// download from the node's kernel negotiates ECN, CoDel marks CE instead
// of dropping, and the node's kernel sees the echoes (ss -ti: ecn,
// ecnseen): the marks pass through netjam to a kernel untouched.
func TestNodeECNReachesTheKernels(t *testing.T) {
	ns := testNetns(t)
	testenv.RequireTool(t, "iperf3", "iperf3")
	testenv.RequireTool(t, "ss", "iproute2")
	if _, err := runIn(context.Background(), ns, "sysctl", "-qw", "net.ipv4.tcp_ecn=1"); err != nil {
		t.Skipf("cannot turn ECN on in the namespace: %v", err)
	}
	var nodeOut lockedBuffer
	y := fmt.Sprintf(`
duration: 60s
link: {rate: 10Mbps, delay: 10ms, queue: {limit: 1000, discipline: codel, ecn: true}}
tun: {netns: %s}
nodes:
  - name: server
    run: sysctl -qw net.ipv4.tcp_ecn=1; iperf3 -s -1 & sleep 3; ss -tin state established; wait
`, ns.Path())
	sum, err := Run(context.Background(), mustPlan(t, y), Options{NodeOutput: &nodeOut, Attached: func(ctx context.Context) error {
		_, err := runWithHosts(ctx, ns, "iperf3", "-c", "server", "-R", "-C", "cubic", "-t", "4")
		return err
	}})
	if err != nil {
		t.Fatalf("run: %v\nnode's output:\n%s", err, nodeOut.String())
	}
	down := sum.Runs[0].Links[1]
	out := nodeOut.String()
	t.Logf("downlink: %d packets marked CE, %d queue drops; the node's ss -ti:\n%s", down.ECNMarked, down.Drops["queue"], out)
	if down.ECNMarked == 0 || down.Drops["queue"] != 0 {
		t.Errorf("the downlink's CoDel marked %d packets and dropped %d: want marks, no drops", down.ECNMarked, down.Drops["queue"])
	}
	if !regexp.MustCompile(`\bcubic\b.*\bdelivered_ce:[1-9]`).MatchString(out) {
		t.Errorf("the node's sender counted no delivery marked CE (ss -ti: delivered_ce)")
	}
}

// pingRTTs returns the min and avg RTT ping printed after "label:" in
// out, as "label: rtt min/avg/max/mdev = ..." lines.
func pingRTTs(t *testing.T, out, label string) (minMs, avgMs float64) {
	t.Helper()
	m := regexp.MustCompile(regexp.QuoteMeta(label) + `: rtt min/avg/max/mdev = ([0-9.]+)/([0-9.]+)/`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no ping summary for %s in:\n%s", label, out)
	}
	fmt.Sscan(m[1], &minMs)
	fmt.Sscan(m[2], &avgMs)
	return minMs, avgMs
}

// rttWant is a ping summary's label in out and the round trip the path
// gives it, in ms.
type rttWant struct {
	out, label string
	want       float64
}

// checkFastest checks that the fastest of each ping is at least the path's
// round trip (its delays are a floor a busy machine cannot lower) and at
// most 5 ms more.
func checkFastest(t *testing.T, ws []rttWant) {
	t.Helper()
	for _, w := range ws {
		minMs, _ := pingRTTs(t, w.out, w.label)
		if minMs < w.want || minMs > w.want+5 {
			t.Errorf("%s: fastest RTT %.2f ms, want %.0f ms (at most 5 more)", w.label, minMs, w.want)
		}
	}
}

// runNodes runs scenario y with cmd (sh -c, the names resolving) in the
// client's namespace ns, the nodes' output into nodeOut, until the
// command has ended and done holds of the nodes' output (or the run
// ends). It returns the run's summary, the command's output and the
// run's error (the command's, when it failed).
func runNodes(t *testing.T, ns *hostnet.Netns, y string, nodeOut *lockedBuffer, cmd string, done func(nodes string) bool) (*summary.Summary, string, error) {
	var client string
	sum, err := Run(context.Background(), mustPlan(t, y), Options{NodeOutput: nodeOut, Attached: func(ctx context.Context) error {
		out, err := runWithHosts(ctx, ns, "sh", "-c", cmd)
		client = out
		for !done(nodeOut.String()) && ctx.Err() == nil {
			time.Sleep(100 * time.Millisecond)
		}
		return err
	}})
	return sum, client, err
}

// TestNodesStar runs three nodes, each behind a link of its own (5, 10
// and 20 ms each way): ping between two nodes crosses both their links
// (the hub on the client's side turns it round), ping from the client
// crosses one, and every name resolves in every node.
func TestNodesStar(t *testing.T) {
	ns := testNetns(t)
	ping := testenv.RequireTool(t, "ping", "iputils-ping")
	var nodeOut lockedBuffer
	const pings = "-n -q -c 5 -i 0.2 -W 5"
	y := fmt.Sprintf(`
duration: 60s
links:
  - {name: la, delay: 5ms}
  - {name: lb, delay: 10ms}
  - {name: lc, delay: 20ms}
tun: {netns: %s}
nodes:
  - {name: a, link: la, run: "sleep 0.5; %[2]s %[3]s b | sed -n 's/^rtt/a-b: rtt/p'; %[2]s %[3]s c | sed -n 's/^rtt/a-c: rtt/p'"}
  - {name: b, link: lb, run: sleep 30}
  - {name: c, link: lc, run: sleep 30}
`, ns.Path(), ping, pings)
	_, client, err := runNodes(t, ns, y, &nodeOut, fmt.Sprintf("%s %s c | sed -n 's/^rtt/client-c: rtt/p'; getent hosts a b c", ping, pings), func(nodes string) bool { return strings.Contains(nodes, "a-c: rtt") })
	if err != nil {
		t.Fatalf("run: %v\nnodes' output:\n%s", err, nodeOut.String())
	}
	out := nodeOut.String()
	t.Logf("client:\n%s\nnodes:\n%s", client, out)
	// The path's delays are a floor a busy machine cannot lower; the
	// fastest of five is near it.
	checkFastest(t, []rttWant{{out, "a-b", 30}, {out, "a-c", 50}, {client, "client-c", 40}})
	if !strings.Contains(client, "10.99.0.2       a") || !strings.Contains(client, "10.99.0.3       b") || !strings.Contains(client, "10.99.0.4       c") {
		t.Errorf("the client's names: %q", client)
	}
}

// TestNodesLinksBetween joins nodes directly (links[].between) beside
// the star of their links to the client's side: a to b crosses ab (2 ms
// each way), b to c crosses cb's downlink (7 ms) and c's answers its
// uplink (3 ms), a to c, without a link between them, the star (5 + 20
// ms each way). traceroute shows the one router in front of each
// direction crossed (.248 before ab's uplink, .245 before cb's
// downlink: its ICMP errors reach the sender). A partition drops
// what crosses a link between nodes too.
func TestNodesLinksBetween(t *testing.T) {
	ns := testNetns(t)
	ping := testenv.RequireTool(t, "ping", "iputils-ping")
	traceroute := testenv.RequireTool(t, "traceroute", "traceroute")
	var nodeOut lockedBuffer
	const pings = "-n -q -c 5 -i 0.2 -W 5"
	y := fmt.Sprintf(`
duration: 60s
links:
  - {name: la, delay: 5ms}
  - {name: lb, delay: 10ms}
  - {name: lc, delay: 20ms}
  - {name: ab, between: [a, b], delay: 2ms}
  - {name: cb, between: [c, b], uplink: {delay: 3ms}, downlink: {delay: 7ms}}
tun: {netns: %[1]s}
nodes:
  - name: a
    link: la
    run: >-
      sleep 0.5; %[2]s %[3]s b | sed -n 's/^rtt/a-b: rtt/p'; %[2]s %[3]s c | sed -n 's/^rtt/a-c: rtt/p';
      %[4]s -n -q 1 -w 1 b | sed 's/^/a-b trace: /';
      sleep 3; %[2]s -n -q -c 5 -i 0.2 -W 1 b | sed -n 's/^\([0-9]*\) packets transmitted, \([0-9]*\) received.*/a-b partitioned: \1 sent \2 received/p'
  - name: b
    link: lb
    run: >-
      sleep 0.5; %[2]s %[3]s c | sed -n 's/^rtt/b-c: rtt/p'; %[4]s -n -q 1 -w 1 c | sed 's/^/b-c trace: /'
  - {name: c, link: lc, run: sleep 30}
timeline:
  - {at: 4s, partition: [[a], [b]]}
`, ns.Path(), ping, pings, traceroute)
	sum, client, err := runNodes(t, ns, y, &nodeOut, fmt.Sprintf("%s %s b | sed -n 's/^rtt/client-b: rtt/p'", ping, pings), func(nodes string) bool { return strings.Contains(nodes, "a-b partitioned") })
	if err != nil {
		t.Fatalf("run: %v\nnodes' output:\n%s", err, nodeOut.String())
	}
	out := nodeOut.String()
	r := sum.Runs[0]
	t.Logf("client:\n%s\nnodes:\n%s\npartition drops %d", client, out, r.TUN.PartitionDrops)
	checkFastest(t, []rttWant{{out, "a-b", 4}, {out, "b-c", 10}, {out, "a-c", 50}, {client, "client-b", 20}})
	if !regexp.MustCompile(`(?s)a-b trace:  1  10\.99\.0\.248 .*a-b trace:  2  10\.99\.0\.3 `).MatchString(out) {
		t.Errorf("traceroute from a to b: want the router before ab's uplink, then b")
	}
	if !regexp.MustCompile(`(?s)b-c trace:  1  10\.99\.0\.245 .*b-c trace:  2  10\.99\.0\.4 `).MatchString(out) {
		t.Errorf("traceroute from b to c: want the router before cb's downlink, then c")
	}
	if !strings.Contains(out, "a-b partitioned: 5 sent 0 received") || r.TUN.PartitionDrops < 5 {
		t.Errorf("a partition [a] | [b] did not drop a's pings across ab (%d partition drops)", r.TUN.PartitionDrops)
	}
}

// TestNodesPartition partitions three nodes on the timeline, [[a], [b,
// c]] from 1 s to 3 s: a's pings to b are lost while it holds (about
// half of 4 s) and answered before and after; b and c, in one group, and
// the client, in none, lose nothing; the drops are counted and the
// changes recorded.
func TestNodesPartition(t *testing.T) {
	ns := testNetns(t)
	ping := testenv.RequireTool(t, "ping", "iputils-ping")
	var nodeOut lockedBuffer
	const pings = "-n -q -c 40 -i 0.1 -W 1"
	y := fmt.Sprintf(`
duration: 60s
link: {delay: 1ms}
tun: {netns: %s}
nodes:
  - {name: a, run: "%[2]s %[3]s b | sed -n 's/^\\([0-9]*\\) packets transmitted, \\([0-9]*\\) received.*/a-b: \\1 sent \\2 received/p'"}
  - {name: b, run: "%[2]s %[3]s c | sed -n 's/^\\([0-9]*\\) packets transmitted, \\([0-9]*\\) received.*/b-c: \\1 sent \\2 received/p'"}
  - {name: c, run: sleep 30}
timeline:
  - {at: 1s, for: 2s, partition: [[a], [b, c]]}
`, ns.Path(), ping, pings)
	sum, client, err := runNodes(t, ns, y, &nodeOut, fmt.Sprintf("%s %s a | grep transmitted", ping, pings), func(nodes string) bool { return strings.Count(nodes, "received") >= 2 })
	if err != nil {
		t.Fatalf("run: %v\nnodes' output:\n%s", err, nodeOut.String())
	}
	out := nodeOut.String()
	r := sum.Runs[0]
	t.Logf("client: %s\nnodes:\n%s\npartition drops %d, events %+v", client, out, r.TUN.PartitionDrops, r.Timeline)
	var sent, received int
	if _, err := fmt.Sscanf(out[strings.Index(out, "a-b: "):], "a-b: %d sent %d received", &sent, &received); err != nil {
		t.Fatalf("a's pings: %v", err)
	}
	// 2 s of 4 partitioned: 20 of 40 lost, give or take the machine's
	// timing of the first ping and the partition's edges.
	if lost := sent - received; lost < 15 || lost > 25 {
		t.Errorf("a's pings to b: %d of %d lost, want about 20 (the 2 s of the partition)", lost, sent)
	}
	if !strings.Contains(out, "b-c: 40 sent 40 received") || !strings.Contains(client, "40 packets transmitted, 40 received") {
		t.Errorf("b to c or the client to a lost pings: %q, %q", out, client)
	}
	if r.TUN.PartitionDrops == 0 {
		t.Error("no partition drops counted")
	}
	var keys []string
	for _, e := range r.Timeline {
		keys = append(keys, e.Key+" "+e.New)
	}
	if want := []string{"partition [a] | [b c]", "partition healed"}; !slices.Equal(keys, want) {
		t.Errorf("timeline events %q, want %q", keys, want)
	}
}

// TestNodesRouteAsRouters: netjam answers as the routers in front of
// each link would. ping with DF across a 1400-byte link gets
// "fragmentation needed" with the link's MTU from the router in front of
// it, and tracepath finds the path MTU; traceroute from one node to
// another shows two routers (one in front of each link) and then the
// node.
func TestNodesRouteAsRouters(t *testing.T) {
	ns := testNetns(t)
	ping := testenv.RequireTool(t, "ping", "iputils-ping")
	testenv.RequireTool(t, "tracepath", "iputils-tracepath")
	traceroute := testenv.RequireTool(t, "traceroute", "traceroute")
	var nodeOut lockedBuffer
	y := fmt.Sprintf(`
duration: 60s
links:
  - {name: la, delay: 5ms, mtu: 1400}
  - {name: lb, delay: 10ms}
tun: {netns: %s}
nodes:
  - {name: a, link: la, run: "%s -n -q 1 -w 1 b"}
  - {name: b, link: lb, run: sleep 30}
`, ns.Path(), traceroute)
	sum, client, err := runNodes(t, ns, y, &nodeOut, ping+" -n -c 1 -M do -s 1472 -W 2 a; tracepath -n a", func(nodes string) bool { return strings.Contains(nodes, " 10.99.0.3 ") })
	// ping exits 1 when no reply came: the run's error is the client's.
	if err != nil && !strings.Contains(err.Error(), "exit status 1") {
		t.Fatalf("run: %v", err)
	}
	out := nodeOut.String()
	t.Logf("client:\n%s\nnode a:\n%s\nrouters: %+v", client, out, sum.Runs[0].TUN.Routers)
	if !strings.Contains(client, "From 10.99.0.254 icmp_seq=1 Frag needed and DF set (mtu = 1400)") {
		t.Errorf("ping -M do -s 1472 across the 1400-byte link: no fragmentation needed from the router in front of it")
	}
	if !regexp.MustCompile(`(?m)Resume: pmtu 1400`).MatchString(client) {
		t.Errorf("tracepath did not find the path MTU of 1400")
	}
	if !regexp.MustCompile(`(?s) 1  10\.99\.0\.253 .* 2  10\.99\.0\.252 .* 3  10\.99\.0\.3 `).MatchString(out) {
		t.Errorf("traceroute from a to b: want the router before la's downlink, the one before lb's uplink, then b")
	}
}

// TestNodesRoutersOnAPathOfTwoLinks: on a path of two links (access, 5
// ms, then far, 10 ms and 1400 bytes), a router's ICMP error crosses
// back the links before it on the sender's way: traceroute from the
// client shows the router before far's uplink 10 ms away (5 ms each way
// across access; its error used to skip access's downlink), and from the
// node, the router before access's downlink 20 ms away (across far both
// ways); path MTU discovery gets "fragmentation needed" across access.
func TestNodesRoutersOnAPathOfTwoLinks(t *testing.T) {
	ns := testNetns(t)
	ping := testenv.RequireTool(t, "ping", "iputils-ping")
	traceroute := testenv.RequireTool(t, "traceroute", "traceroute")
	var nodeOut lockedBuffer
	y := fmt.Sprintf(`
duration: 60s
links:
  - {name: access, delay: 5ms}
  - {name: far, delay: 10ms, mtu: 1400}
tun: {netns: %s}
nodes:
  - {name: a, run: "sleep 0.5; %s -n -q 1 -w 2 client | sed 's/^/a trace: /'"}
`, ns.Path(), traceroute)
	_, client, err := runNodes(t, ns, y, &nodeOut, ping+" -n -c 1 -M do -s 1472 -W 2 a; "+traceroute+" -n -q 1 -w 2 a", func(nodes string) bool { return strings.Contains(nodes, " 10.99.0.1 ") })
	if err != nil && !strings.Contains(err.Error(), "exit status 1") {
		t.Fatalf("run: %v", err)
	}
	out := nodeOut.String()
	t.Logf("client:\n%s\nnode a:\n%s", client, out)
	if !strings.Contains(client, "From 10.99.0.252 icmp_seq=1 Frag needed and DF set (mtu = 1400)") {
		t.Errorf("ping -M do -s 1472: no fragmentation needed from the router before far")
	}
	hopMs := func(out, prefix, addr string) float64 {
		m := regexp.MustCompile(prefix + `\s*\d+\s+` + regexp.QuoteMeta(addr) + `\s+([0-9.]+) ms`).FindStringSubmatch(out)
		if m == nil {
			t.Errorf("traceroute: no hop %s in\n%s", addr, out)
			return 0
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		return v
	}
	// The links' delays are a floor a busy machine cannot lower.
	if ms := hopMs(client, "(?m)^", "10.99.0.252"); ms < 10 || ms > 25 {
		t.Errorf("the client's traceroute: the router before far's uplink %.2f ms away, want 10 (5 each way across access)", ms)
	}
	if ms := hopMs(out, "a trace: ", "10.99.0.253"); ms < 20 || ms > 35 {
		t.Errorf("a's traceroute: the router before access's downlink %.2f ms away, want 20 (10 each way across far)", ms)
	}
}

// TestNodesKernelFlowToEachNode runs a kernel flow to each of two nodes
// behind links of 5 and 20 ms each way (flows[].node): each one's RTT is
// its node's link's (the smallest srtt sample at least the link's
// round trip, and below the other's), and its data reach that node.
func TestNodesKernelFlowToEachNode(t *testing.T) {
	ns := testNetns(t)
	sum := runTUNIn(t, fmt.Sprintf(`
duration: 60s
links:
  - {name: near, delay: 5ms, rate: 20Mbps}
  - {name: far, delay: 20ms, rate: 20Mbps}
tun: {netns: %s}
nodes: [{name: a, link: near}, {name: b, link: far}]
flows:
  - {name: to-a, type: tcp, stack: kernel, size: 1MB}
  - {name: to-b, type: tcp, stack: kernel, node: b, direction: down, cc: bbr, size: 1MB}
`, ns.Path()), nil)
	r := sum.Runs[0]
	a, b := flowByName(t, r, "to-a"), flowByName(t, r, "to-b")
	t.Logf("to a: srtt min %.1f p50 %.1f ms; to b: min %.1f p50 %.1f ms", a.RTTMs.Min, a.RTTMs.P50, b.RTTMs.Min, b.RTTMs.P50)
	if a.BytesReceived != 1e6 || b.BytesReceived != 1e6 || a.RTTMs.Min < 10 || a.RTTMs.Min >= 40 || b.RTTMs.Min < 40 {
		t.Errorf("to a: %d bytes, srtt min %.1f ms (want 10 to 40); to b: %d bytes, %.1f ms (want 40+)", a.BytesReceived, a.RTTMs.Min, b.BytesReceived, b.RTTMs.Min)
	}
	for _, l := range r.Links {
		if l.PacketsOut == 0 {
			t.Errorf("link %s carried nothing", l.Name)
		}
	}
}
