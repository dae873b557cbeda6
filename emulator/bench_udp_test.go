package emulator

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/netjam/netjam/hostnet"
	"github.com/netjam/netjam/internal/testenv"
)

// iperf3UDPResult is what BenchmarkTUNUDP reads from iperf3 -u -J: what
// the client sent and what arrived.
type iperf3UDPResult struct {
	Error string `json:"error"`
	End   struct {
		Sum struct {
			BitsPerSecond float64 `json:"bits_per_second"`
			LostPackets   int64   `json:"lost_packets"`
			Packets       int64   `json:"packets"`
			LostPercent   float64 `json:"lost_percent"`
		} `json:"sum"`
	} `json:"end"`
}

// arrived returns the bit rate that reached the server.
func (r iperf3UDPResult) arrived() float64 {
	return r.End.Sum.BitsPerSecond * (1 - r.End.Sum.LostPercent/100)
}

// iperf3UDP runs an iperf3 UDP client in ns against server for secs
// seconds at rate, retrying while the server does not answer yet; with
// down, the server sends (-R).
func iperf3UDP(ctx context.Context, ns *hostnet.Netns, server, rate, secs, window string, down bool) (iperf3UDPResult, error) {
	var r iperf3UDPResult
	var out string
	var err error
	// Bounded: a client that hangs (its server gone) is killed, not left
	// behind (one spun for an hour after an interrupted benchmark).
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for range 50 { // until the server listens
		args := []string{"-c", server, "-t", secs, "-J", "-u", "-b", rate, "-l", "1400"}
		if down {
			args = append(args, "-R")
		}
		if window != "" {
			args = append(args, "-w", window)
		}
		out, err = runIn(ctx, ns, "iperf3", args...)
		if err == nil && !strings.Contains(out, `"error":`) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		return r, fmt.Errorf("iperf3: %v\n%s", err, out)
	}
	if r.arrived() == 0 {
		return r, fmt.Errorf("iperf3 measured nothing:\n%s", out)
	}
	return r, nil
}

// rcvbufErrors returns the UDP datagrams the kernel of ns (nil: netjam's
// own namespace) dropped at a full socket: what reached the iperf3 server's
// machine but not the server.
func rcvbufErrors(b *testing.B, ns *hostnet.Netns) float64 {
	var n float64
	err := ns.Do(func() error {
		data, err := os.ReadFile("/proc/thread-self/net/snmp")
		if err != nil {
			return err
		}
		var names []string
		for line := range strings.Lines(string(data)) {
			f := strings.Fields(line)
			if len(f) == 0 || f[0] != "Udp:" {
				continue
			}
			if names == nil {
				names = f
				continue
			}
			for i, name := range names {
				if name == "RcvbufErrors" && i < len(f) {
					n, err = strconv.ParseFloat(f[i], 64)
					return err
				}
			}
		}
		return fmt.Errorf("no Udp RcvbufErrors in /proc/net/snmp")
	})
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// BenchmarkTUNUDP offers iperf3 UDP (1400-byte datagrams, 5 s) at 1 and
// at 3 Gbit/s, with the default socket buffers and with 4 MiB (w=4M), through
// a forward of TUN mode with no impairment, from the
// client's namespace to the server (up) and back (down, iperf3 -R), and, in
// the same iteration, through a plain veth pair between two namespaces,
// so that both see the same load of the machine. It reports what arrived
// through each (Gbit/s), their ratio, and netjam's drops per run by
// where they happened: the relay's (datagrams netjam dropped inside the
// path's ends), the kernel's at the device (tx_dropped: the read loop
// fell behind), what the path's directions dropped or could not deliver
// and, outside netjam, the receiver's socket (sink-drops: the iperf3
// receiver's socket was full, counted by the kernel of its namespace; the
// veth row's sink drops are veth-sink-drops); lost is what iperf3's
// receiver missed of what its sender sent. cpu-µs/datagram is netjam's CPU time
// over the datagrams it carried. Needs root.
//
//	go test -run XXX -bench TUNUDP -benchtime 1x -count 5 ./emulator/
func BenchmarkTUNUDP(b *testing.B) {
	for _, dir := range []string{"up", "down"} {
		for _, rate := range []string{"1G", "3G"} {
			b.Run(dir+"/rate="+rate, func(b *testing.B) { benchTUNUDP(b, rate, "", dir == "down") })
		}
		// The receiver's socket with 4 MiB of buffer (iperf3 -w, both
		// ends' sockets): most of what the default 208 KiB loses
		// behind netjam is a burst the receiver, sharing 2 cores with
		// netjam and the sender, did not read in time.
		for _, rate := range []string{"1G", "3G"} {
			b.Run(dir+"/rate="+rate+"/w=4M", func(b *testing.B) { benchTUNUDP(b, rate, "4M", dir == "down") })
		}
	}
}

// benchTUNUDP is one case of BenchmarkTUNUDP: iperf3 UDP at rate, from
// the client's namespace (up) or to it (down, -R).
func benchTUNUDP(b *testing.B, rate, window string, down bool) {
	const secs = "5"
	vc, vs := vethPair(b)
	bin := testenv.RequireTool(b, "iperf3", "iperf3")
	srv := exec.Command(bin, "-s", "-B", "10.98.0.2")
	if err := vs.Do(srv.Start); err != nil {
		b.Fatal(err)
	}
	defer func() {
		srv.Process.Kill()
		srv.Wait()
	}()
	ns := testNetns(b)
	port := iperf3Server(b)
	y := fmt.Sprintf(`
duration: 60s
tun:
  netns: %s
  forward:
    - {proto: udp, listen: 5201, to: 127.0.0.1:%d}
    - {proto: tcp, listen: 5201, to: 127.0.0.1:%d}
`, ns.Path(), port, port)
	var veth, nj, ratio, relay, kernel, path, lost, sink, vsink, cpu float64
	for b.Loop() {
		// The receiving end's namespace: the server's up, the
		// client's down (nil: netjam's own).
		vsinkNS, sinkNS := vs, (*hostnet.Netns)(nil)
		if down {
			vsinkNS, sinkNS = vc, ns
		}
		vs0 := rcvbufErrors(b, vsinkNS)
		v, err := iperf3UDP(context.Background(), vc, "10.98.0.2", rate, secs, window, down)
		if err != nil {
			b.Fatal(err)
		}
		vsd := rcvbufErrors(b, vsinkNS) - vs0
		var r iperf3UDPResult
		s0 := rcvbufErrors(b, sinkNS)
		var c time.Duration
		sum := runTUNIn(b, y, func(ctx context.Context) error {
			c0 := cpuTime()
			r, err = iperf3UDP(ctx, ns, "10.99.0.2", rate, secs, window, down)
			c = cpuTime() - c0
			return err
		})
		sd := rcvbufErrors(b, sinkNS) - s0
		run := sum.Runs[0]
		var pd uint64
		var where []string // the path's drops by direction and reason
		for _, l := range run.Links {
			pd += l.DeliveryDrops
			if l.DeliveryDrops > 0 {
				where = append(where, fmt.Sprintf("%s delivery %d", l.Name, l.DeliveryDrops))
			}
			for why, n := range l.Drops {
				pd += n
				where = append(where, fmt.Sprintf("%s %s %d", l.Name, why, n))
			}
		}
		veth += v.arrived() / 1e9
		nj += r.arrived() / 1e9
		ratio += r.arrived() / v.arrived()
		relay += float64(run.TUN.Relay.UDP.Dropped)
		kernel += float64(run.TUN.KernelDrops)
		path += float64(pd)
		lost += float64(r.End.Sum.LostPackets)
		sink += sd
		// netjam's CPU per datagram it carried (of 1400 bytes):
		// what its work costs, which the machine's load does not
		// change as much as the throughput.
		carried := run.TUN.Relay.UDP.BytesUp
		if down {
			carried = run.TUN.Relay.UDP.BytesDown
		}
		cpu += c.Seconds() * 1e6 / (float64(carried) / 1400)
		vsink += vsd
		b.Logf("veth %.3f Gbit/s (lost %d of %d, %.0f at the receiver's socket); netjam %.3f Gbit/s (lost %d of %d): relay drops %d %v, relay waits %d, shed %d, kernel drops %d, path drops %d %v, at the receiver's socket %.0f",
			v.arrived()/1e9, v.End.Sum.LostPackets, v.End.Sum.Packets, vsd, r.arrived()/1e9, r.End.Sum.LostPackets, r.End.Sum.Packets,
			run.TUN.Relay.UDP.Dropped, run.TUN.Relay.UDP.DroppedBy, run.TUN.Relay.UDP.Waits, run.TUN.Shed, run.TUN.KernelDrops, pd, where, sd)
	}
	n := float64(b.N)
	b.ReportMetric(nj/n, "Gbit/s")
	b.ReportMetric(veth/n, "veth-Gbit/s")
	b.ReportMetric(ratio/n, "ratio")
	b.ReportMetric(relay/n, "relay-drops")
	b.ReportMetric(kernel/n, "kernel-drops")
	b.ReportMetric(path/n, "path-drops")
	b.ReportMetric(lost/n, "lost")
	b.ReportMetric(sink/n, "sink-drops")
	b.ReportMetric(vsink/n, "veth-sink-drops")
	b.ReportMetric(cpu/n, "cpu-µs/datagram")
}
