package control

import (
	"fmt"
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
