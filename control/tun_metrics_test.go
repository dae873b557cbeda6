package control

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/netjam/netjam/hostnet"
	"github.com/netjam/netjam/internal/testenv"
)

// TestMetricsOfTUN: in TUN mode /metrics has the device's and netjam's
// drops at the entrance, the relay's outcomes, the peer's TCP and what it
// dropped on arrival (the uplink corrupts 1%), live:
// a kernel TCP flow's receiver is the peer, whose ACKs its TCP sends.
// Needs root (a namespace and a TUN device).
func TestMetricsOfTUN(t *testing.T) {
	testenv.RequireTUN(t)
	ns, err := hostnet.NewNetns()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	tr := startRun(t, fmt.Sprintf(`name: tun
duration: 4s
link: {rate: 20Mbps, delay: 5ms, queue: 100, uplink: {corrupt: 1%%}}
tun: {netns: %s}
flows: [{name: bulk, type: tcp, stack: kernel, duration: 4s}]
`, ns.Path()))
	m := scrapeUntil(t, tr, 4*time.Second, []minMetric{
		{`netjam_tun_kernel_drops_total`, 0},
		{`netjam_tun_shed_total`, 0},
		{`netjam_tun_malformed_total`, 0},
		{`netjam_tun_relay_total{outcome="relayed",proto="tcp"}`, 0},
		{`netjam_tun_relay_total{outcome="refused",proto="udp"}`, 0},
		{`netjam_tun_peer_tcp_segments_sent_total`, 10},
		{`netjam_tun_peer_tcp_retransmissions_total`, 0},
		{`netjam_tun_peer_tcp_timeouts_total`, 0},
		{`netjam_tun_peer_drops_total{reason="checksum"}`, 1},
		{`netjam_tun_peer_drops_total{reason="malformed"}`, 0},
	})
	tr.wait(t)
	promtoolCheck(t, m)
}

// TestMetricsOfNodes: with nodes /metrics has each node's device drops,
// the partition's drops (the client cut off from node a for 1 s of a
// kernel flow to it) and the routers' outcomes. Needs root.
func TestMetricsOfNodes(t *testing.T) {
	testenv.RequireTUN(t)
	ns, err := hostnet.NewNetns()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	tr := startRun(t, fmt.Sprintf(`name: nodes
duration: 4s
link: {rate: 20Mbps, delay: 5ms}
tun: {netns: %s}
nodes: [{name: a}, {name: b}]
flows: [{name: bulk, type: tcp, stack: kernel, duration: 4s}]
timeline:
  - {at: 1s, for: 1s, partition: [[client], [a]]}
`, ns.Path()))
	m := scrapeUntil(t, tr, 4*time.Second, []minMetric{
		{`netjam_tun_node_drops_total{node="a",reason="kernel"}`, 0},
		{`netjam_tun_node_drops_total{node="b",reason="shed"}`, 0},
		{`netjam_tun_partition_drops_total`, 1},
		{`netjam_tun_router_packets_total{outcome="ttl_expired",router="router before uplink"}`, 0},
		{`netjam_tun_router_packets_total{outcome="icmp_sent",router="router before downlink"}`, 0},
	})
	tr.wait(t)
	promtoolCheck(t, m)
}

// TestLivePartition partitions a run's nodes through the API while a
// kernel flow runs to node a: the partition cuts it off from the client,
// counted; heal ends it; both are recorded in the timeline and in the
// resolved scenario; a bad group is refused with the scenario's message.
// Needs root.
func TestLivePartition(t *testing.T) {
	testenv.RequireTUN(t)
	ns, err := hostnet.NewNetns()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	tr := startRun(t, fmt.Sprintf(`name: live-partition
duration: 3s
link: {rate: 20Mbps, delay: 5ms}
tun: {netns: %s}
nodes: [{name: a}, {name: b}]
flows: [{name: bulk, type: tcp, stack: kernel, duration: 3s}]
`, ns.Path()))
	if code, body := tr.do(t, "POST", "/v1/partition", `{"groups": [["a"], ["x"]]}`); code != 400 || !strings.Contains(string(body), `\"x\" is not a node (expected one of: client, a, b)`) {
		t.Errorf("a bad group: %d %s", code, body)
	}
	code, body := tr.do(t, "POST", "/v1/partition", `{"groups": [["client"], ["a", "b"]]}`)
	if code != 200 || !strings.Contains(string(body), `"old":"healed","new":"[client] | [a b]"`) {
		t.Fatalf("partition: %d %s", code, body)
	}
	time.Sleep(500 * time.Millisecond)
	if code, body := tr.do(t, "POST", "/v1/heal", ""); code != 200 || !strings.Contains(string(body), `"old":"[client] | [a b]","new":"healed"`) {
		t.Errorf("heal: %d %s", code, body)
	}
	sum := tr.wait(t)
	r := sum.Runs[0]
	if r.TUN.PartitionDrops == 0 {
		t.Error("no packets dropped while the client was cut off from a")
	}
	var keys []string
	for _, e := range r.Timeline {
		keys = append(keys, e.Key+" "+e.New)
	}
	if !slices.Equal(keys, []string{"partition [client] | [a b]", "partition healed"}) {
		t.Errorf("timeline %q", keys)
	}
	y, err := tr.plan.Runs[0].YAML()
	if err != nil || !regexp.MustCompile(`partition: \[\[client\], \[a, b\]\]\}`).Match(y) || !strings.Contains(string(y), "heal: true") {
		t.Errorf("the resolved scenario (%v):\n%s", err, y)
	}
}
