package control

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/netjam/netjam/hostnet"
	"github.com/netjam/netjam/internal/testenv"
)

// TestMetricsOfTUN: in TUN mode /metrics has the device's and netjam's
// drops at the entrance, the relay's outcomes and the peer's TCP, live:
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
link: {rate: 20Mbps, delay: 5ms, queue: 100}
tun: {netns: %s}
flows: [{name: bulk, type: tcp, stack: kernel, duration: 4s}]
`, ns.Path()))
	var m string
	var missing []string
	for deadline := time.Now().Add(4 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		code, b := tr.do(t, "GET", "/metrics", "")
		if code != 200 || time.Now().After(deadline) {
			break
		}
		m, missing = string(b), nil
		for _, c := range []struct {
			metric string
			min    float64
		}{
			{`netjam_tun_kernel_drops_total`, 0},
			{`netjam_tun_shed_total`, 0},
			{`netjam_tun_malformed_total`, 0},
			{`netjam_tun_relay_total{outcome="relayed",proto="tcp"}`, 0},
			{`netjam_tun_relay_total{outcome="refused",proto="udp"}`, 0},
			{`netjam_tun_peer_tcp_segments_sent_total`, 10},
			{`netjam_tun_peer_tcp_retransmissions_total`, 0},
			{`netjam_tun_peer_tcp_timeouts_total`, 0},
		} {
			if v, ok := metricValue(m, c.metric); !ok || v < c.min {
				missing = append(missing, fmt.Sprintf("%s: %v (found: %v), want at least %v", c.metric, v, ok, c.min))
			}
		}
		if missing == nil {
			break
		}
	}
	for _, e := range missing {
		t.Error(e)
	}
	if t.Failed() {
		t.Log(m)
	}
	tr.wait(t)
	promtool := testenv.RequireTool(t, "promtool", "prometheus")
	check := exec.Command(promtool, "check", "metrics")
	check.Stdin = strings.NewReader(m)
	if out, err := check.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}
