package emulator

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/netjam/netjam/internal/testenv"
)

// nodeModes are the iperf3 runs of BenchmarkNodesIperf3: TCP as in
// iperf3Modes, and UDP at 1 Gbit/s with 4 MiB socket buffers at both
// ends (iperf3 passes -w to the server): with the default 208 KiB the
// node's receiving iperf3, sharing two cores with the sender and netjam,
// drops most of what it loses at its socket (UdpRcvbufErrors).
var nodeModes = []struct {
	name string
	args []string
	udp  bool
}{
	{"tcp-up", nil, false},
	{"tcp-down", []string{"-R"}, false},
	{"tcp-up-P4", []string{"-P", "4"}, false},
	{"udp-up-1G-w4M", []string{"-u", "-b", "1G", "-l", "1400", "-w", "4M"}, true},
}

// BenchmarkNodesIperf3 measures a clean path between the client's kernel
// and a node's (kernel to kernel, nothing terminated: see docs/nodes.md)
// against a plain veth pair between two namespaces, in the same sitting:
// iperf3 for 5 s each (TCP both ways, four TCP streams, UDP at 1 Gbit/s
// of 1400-byte datagrams); Gbit/s received, the UDP loss, netjam's CPU
// seconds per second. At the end it prints the node path's throughput
// over the veth pair's for each mode. Needs root.
//
//	go test -run XXX -bench NodesIperf3 -benchtime 1x ./emulator/
func BenchmarkNodesIperf3(b *testing.B) {
	const secs = "5"
	got := map[string]float64{}
	for _, m := range nodeModes {
		b.Run("nodes/"+m.name, func(b *testing.B) {
			ns := testNetns(b)
			testenv.RequireTool(b, "iperf3", "iperf3")
			y := fmt.Sprintf("duration: 60s\ntun: {netns: %s}\nnodes: [{name: server, run: iperf3 -s}]\n", ns.Path())
			var bps, lost, cpu float64
			for b.Loop() {
				var out string
				sum, err := Run(context.Background(), mustPlan(b, y), Options{NodeOutput: io.Discard, Attached: func(ctx context.Context) error {
					c0, w0 := cpuTime(), time.Now()
					var err error
					out, err = runWithHosts(ctx, ns, "iperf3", append([]string{"-c", "server", "-t", secs, "-J"}, m.args...)...)
					cpu += (cpuTime() - c0).Seconds() / time.Since(w0).Seconds()
					return err
				}})
				if err != nil {
					b.Fatal(err)
				}
				r := parseIperf3(b, out)
				bps += r.bps(m.udp)
				lost += r.End.Sum.LostPercent
				ts := sum.Runs[0].TUN
				b.Logf("the client's device: %d dropped by the kernel before netjam read them, %d shed; the node's device: %d writes for %d packets",
					ts.KernelDrops, ts.Shed, ts.Nodes[0].Writes, ts.Nodes[0].WrittenPackets)
			}
			n := float64(b.N)
			b.ReportMetric(bps/n/1e9, "Gbit/s")
			b.ReportMetric(cpu/n, "cpu-s/s")
			if m.udp {
				b.ReportMetric(lost/n, "lost-%")
			}
			got["nodes/"+m.name] = bps / n / 1e9
		})
		b.Run("veth/"+m.name, func(b *testing.B) {
			client := vethIperf3(b)
			var bps, lost float64
			for b.Loop() {
				r := iperf3Veth(b, client, secs, m.args)
				bps += r.bps(m.udp)
				lost += r.End.Sum.LostPercent
			}
			n := float64(b.N)
			b.ReportMetric(bps/n/1e9, "Gbit/s")
			if m.udp {
				b.ReportMetric(lost/n, "lost-%")
			}
			got["veth/"+m.name] = bps / n / 1e9
		})
	}
	for _, m := range nodeModes {
		if v := got["veth/"+m.name]; v > 0 {
			fmt.Printf("ratio: nodes %s: %.2f Gbit/s, %.2f of the veth pair (%.2f)\n", m.name, got["nodes/"+m.name], got["nodes/"+m.name]/v, v)
		}
	}
}

// parseIperf3 decodes iperf3's JSON report.
func parseIperf3(b *testing.B, out string) iperf3Result {
	var r iperf3Result
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		b.Fatalf("iperf3: %v\n%s", err, out)
	}
	return r
}
