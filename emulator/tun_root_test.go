package emulator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/netjam/netjam/hostnet"
	"github.com/netjam/netjam/impair"
	"github.com/netjam/netjam/summary"

	"github.com/netjam/netjam/internal/testenv"
)

// Tests of TUN mode over real TUN devices: each makes a network namespace
// of its own, puts the device in it, and runs real clients (iperf3, ping,
// curl) and kernel flows there; netjam's relay sockets and the test's
// servers stay on loopback in the test's namespace. They need root and
// /dev/net/tun, and skip without (fail with NETJAM_REQUIRE_TUN=1).

// dialIn connects to a TCP address from inside ns.
func dialIn(ctx context.Context, ns *hostnet.Netns, addr string) (conn net.Conn, err error) {
	err = ns.Do(func() error {
		var d net.Dialer
		conn, err = d.DialContext(ctx, "tcp", addr)
		return err
	})
	return conn, err
}

// testNetns makes a namespace for the test's device and clients.
func testNetns(t testing.TB) *hostnet.Netns {
	t.Helper()
	testenv.RequireTUN(t)
	ns, err := hostnet.NewNetns()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	return ns
}

// runIn runs a program in ns and returns its standard output; a failure
// includes its standard error.
func runIn(ctx context.Context, ns *hostnet.Netns, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cmd.WaitDelay = 5 * time.Second
	if err := ns.Do(cmd.Start); err != nil {
		return "", err
	}
	if err := cmd.Wait(); err != nil {
		return out.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, errOut.String())
	}
	return out.String(), nil
}

// runTUNIn runs plan y with its device in ns; attached runs once the path
// is up.
func runTUNIn(t testing.TB, y string, attached func(ctx context.Context) error) *summary.Summary {
	t.Helper()
	sum, err := Run(context.Background(), mustPlan(t, y), Options{Attached: attached})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return sum
}

// iperf3Server starts iperf3 -s on loopback; it returns the port.
func iperf3Server(t testing.TB) int {
	t.Helper()
	bin := testenv.RequireTool(t, "iperf3", "iperf3")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, "-s", "-B", "127.0.0.1", "-p", strconv.Itoa(port))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	for range 100 { // until it listens
		if c, err := net.Dial("tcp", l.Addr().String()); err == nil {
			c.Close()
			return port
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("iperf3 -s does not listen")
	return 0
}

// TestTUNIperf3UDPCutToTheUplink offers 20 Mbit/s of iperf3 UDP into a
// 10 Mbit/s uplink: what arrives is the uplink's rate less the IP and UDP
// headers, within 3%.
func TestTUNIperf3UDPCutToTheUplink(t *testing.T) {
	ns := testNetns(t)
	port := iperf3Server(t)
	const payload = 1400
	var report string
	runTUNIn(t, fmt.Sprintf(`
duration: 60s
link: {uplink: {rate: 10Mbps, queue: 100}}
tun:
  netns: %s
  forward:
    - {proto: tcp, listen: 5201, to: 127.0.0.1:%d}
    - {proto: udp, listen: 5201, to: 127.0.0.1:%d}
`, ns.Path(), port, port), func(ctx context.Context) error {
		var err error
		report, err = runIn(ctx, ns, "iperf3", "-c", "10.99.0.2", "-u", "-b", "20M", "-l", strconv.Itoa(payload), "-t", "4", "-J")
		return err
	})
	var r struct {
		End struct {
			Sum struct {
				Seconds     float64 `json:"seconds"`
				Bytes       float64 `json:"bytes"`
				LostPackets int     `json:"lost_packets"`
				Packets     int     `json:"packets"`
			} `json:"sum"`
		} `json:"end"`
	}
	if err := json.Unmarshal([]byte(report), &r); err != nil {
		t.Fatalf("iperf3 report: %v\n%s", err, report)
	}
	s := r.End.Sum
	received := float64(s.Packets-s.LostPackets) * payload * 8 / s.Seconds
	want := 10e6 * payload / (payload + 28)
	t.Logf("iperf3: %d sent, %d lost in %.2f s: %.3f Mbit/s received, want %.3f", s.Packets, s.LostPackets, s.Seconds, received/1e6, want/1e6)
	if math.Abs(received-want)/want > 0.03 {
		t.Errorf("received %.3f Mbit/s, want %.3f within 3%%", received/1e6, want/1e6)
	}
}

// TestTUNUDPDownHeldAtTheDownlink offers iperf3 UDP out of the path (-R)
// at 1 Gbit/s into a downlink whose input holds 16 packets: the relay's
// datagrams toward the client wait at that input with the peer's TCP
// (held senders), so the downlink drops none, and what the machine cannot
// carry is lost at the relay's socket toward the target (from_target)
// before any work. Before, they were not held: each batch the relay read
// while the input had a few places left lost the rest there, thousands a
// run.
func TestTUNUDPDownHeldAtTheDownlink(t *testing.T) {
	ns := testNetns(t)
	port := iperf3Server(t)
	p := mustPlan(t, fmt.Sprintf(`
duration: 60s
link: {delay: 1ms}
tun:
  netns: %s
  forward:
    - {proto: tcp, listen: 5201, to: 127.0.0.1:%d}
    - {proto: udp, listen: 5201, to: 127.0.0.1:%d}
`, ns.Path(), port, port))
	for i := range p.Runs[0].Links {
		p.Runs[0].Links[i].Downlink.InputLimit = 16
	}
	sum, err := Run(context.Background(), p, Options{Attached: func(ctx context.Context) error {
		_, err := runIn(ctx, ns, "iperf3", "-c", "10.99.0.2", "-u", "-R", "-b", "1G", "-l", "1400", "-t", "2")
		return err
	}})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	down := sum.Runs[0].Links[1]
	udp := sum.Runs[0].TUN.Relay.UDP
	t.Logf("downlink: %d packets out, drops %v, delivery drops %d; relay: %d bytes down, drops %v, waits %d",
		down.PacketsOut, down.Drops, down.DeliveryDrops, udp.BytesDown, udp.DroppedBy, udp.Waits)
	if udp.BytesDown == 0 {
		t.Fatal("nothing relayed toward the client")
	}
	if n := down.Drops[impair.DropInput.String()]; n != 0 {
		t.Errorf("the downlink's input dropped %d packets: want the relay held back there", n)
	}
}

// TestTUNIperf3TCPCongestionControls: iperf3 TCP with the kernel's cubic
// and bbr completes through a lossy, delayed, rate-limited link.
func TestTUNIperf3TCPCongestionControls(t *testing.T) {
	ns := testNetns(t)
	port := iperf3Server(t)
	for _, cc := range []string{"cubic", "bbr"} {
		t.Run(cc, func(t *testing.T) {
			avail, _ := hostnet.KernelCongestionControls()
			if !slices.Contains(avail, cc) {
				testenv.Missing(t, fmt.Sprintf("the kernel does not offer %s (modprobe tcp_%s)", cc, cc))
			}
			var report string
			sum := runTUNIn(t, fmt.Sprintf(`
duration: 60s
link: {rate: 20Mbps, delay: 10ms, loss: 1%%, queue: 200}
tun:
  netns: %s
  forward: [{proto: tcp, listen: 5201, to: 127.0.0.1:%d}]
`, ns.Path(), port), func(ctx context.Context) error {
				var err error
				report, err = runIn(ctx, ns, "iperf3", "-c", "10.99.0.2", "-C", cc, "-t", "3", "-J")
				return err
			})
			var r struct {
				End struct {
					SumSent struct {
						Bytes       float64 `json:"bytes"`
						Retransmits int     `json:"retransmits"`
					} `json:"sum_sent"`
					SumReceived struct {
						BitsPerSecond float64 `json:"bits_per_second"`
					} `json:"sum_received"`
					CC string `json:"sender_tcp_congestion"`
				} `json:"end"`
			}
			if err := json.Unmarshal([]byte(report), &r); err != nil {
				t.Fatalf("iperf3 report: %v\n%s", err, report)
			}
			e := r.End
			t.Logf("%s: %.2f Mbit/s received, %d retransmits; uplink loss drops %d", e.CC, e.SumReceived.BitsPerSecond/1e6, e.SumSent.Retransmits,
				sum.Runs[0].Links[0].Drops["loss"])
			if e.CC != cc || e.SumSent.Bytes == 0 || e.SumReceived.BitsPerSecond == 0 || e.SumSent.Retransmits == 0 {
				t.Errorf("iperf3 -C %s: %+v", cc, e)
			}
			// The control and the data connection were relayed; the
			// server's close of the data connection while the client's
			// last data were on their way is a reset passed on, not a
			// failure of the relay.
			if r := sum.Runs[0].TUN.Relay.TCP; r.Relayed != 2 || r.Errors != 0 || r.DialErrors != 0 {
				t.Errorf("relay: %+v, want 2 connections relayed and no failure", r)
			}
		})
	}
}

// TestTUNPingRTT: 20 ms of delay each way gives ping a 40 ms RTT: no
// reply before 40 ms, the fastest of 40 within 1 ms of it and the median
// within 3 ms (a loaded machine delays some replies, it speeds none up).
func TestTUNPingRTT(t *testing.T) {
	ns := testNetns(t)
	testenv.RequireTool(t, "ping", "iputils-ping")
	var out string
	runTUNIn(t, fmt.Sprintf(`
duration: 60s
link: {delay: 20ms}
tun: {netns: %s}
`, ns.Path()), func(ctx context.Context) error {
		var err error
		out, err = runIn(ctx, ns, "ping", "-n", "-c", "40", "-i", "0.05", "-w", "10", "10.99.0.2")
		return err
	})
	var rtts []float64
	for _, m := range regexp.MustCompile(`time=([0-9.]+) ms`).FindAllStringSubmatch(out, -1) {
		v, _ := strconv.ParseFloat(m[1], 64)
		rtts = append(rtts, v)
	}
	if len(rtts) != 40 {
		t.Fatalf("%d replies, want 40:\n%s", len(rtts), out)
	}
	sort.Float64s(rtts)
	p50, p99 := rtts[20], rtts[39]
	t.Logf("ping RTT p50 %.3f ms, p99 %.3f ms, min %.3f (40 ms configured)", p50, p99, rtts[0])
	if rtts[0] < 40 || rtts[0] > 41 || p50 > 43 {
		t.Errorf("ping RTT min %.3f ms, p50 %.3f ms: want the min in [40, 41] and the p50 at most 43", rtts[0], p50)
	}
}

// TestTUNTransparentRefusesOutsideAllow: curl to a destination routed into
// the device but not in allow is reset at once, and counted as refused.
func TestTUNTransparentRefusesOutsideAllow(t *testing.T) {
	ns := testNetns(t)
	testenv.RequireTool(t, "curl", "curl")
	var curlErr error
	sum := runTUNIn(t, fmt.Sprintf(`
duration: 60s
tun:
  netns: %s
  routes: [192.0.2.0/24]
  transparent: {allow: [198.51.100.0/24]}
`, ns.Path()), func(ctx context.Context) error {
		_, curlErr = runIn(ctx, ns, "curl", "-sS", "--max-time", "10", "http://192.0.2.1/")
		return nil
	})
	var ee *exec.ExitError
	if !errors.As(curlErr, &ee) || ee.ExitCode() != 7 {
		t.Errorf("curl to a destination outside allow: %v, want exit status 7 (failed to connect)", curlErr)
	}
	if r := sum.Runs[0].TUN.Relay.TCP; r.Refused == 0 || r.Relayed != 0 {
		t.Errorf("relay %+v, want refused and nothing relayed", r)
	}
}

// TestTUNKernelFlows runs kernel flows (reno, cubic and bbr: whatever the
// kernel offers) through a lossy path against the peer: each byte arrives
// (the flow checks), retransmissions are read from TCP_INFO, and a kernel
// UDP flow loses exactly what the uplink's loss dropped. A kernel TCP flow
// down (variant down) has the peer's netstack send, with its congestion
// control and its retransmissions, across a lossy downlink to the
// kernel's receiver.
func TestTUNKernelFlows(t *testing.T) {
	ns := testNetns(t)
	avail, err := hostnet.KernelCongestionControls()
	if err != nil {
		t.Fatal(err)
	}
	var variants []string
	for _, cc := range []string{"reno", "cubic", "bbr"} {
		if slices.Contains(avail, cc) {
			variants = append(variants, fmt.Sprintf("  - {name: %s, set: {flows.bulk.cc: %s}}", cc, cc))
		}
	}
	variants = append(variants, "  - {name: down, set: {flows.bulk.direction: down, flows.bulk.cc: reno, link.uplink.loss: 0%, link.downlink.loss: 2%}}")
	sum := runTUNIn(t, fmt.Sprintf(`
seed: 3
duration: 60s
link: {rate: 20Mbps, delay: 10ms, queue: 200, uplink: {loss: 2%%}}
tun: {netns: %s}
flows:
  - {name: bulk, type: tcp, stack: kernel, size: 2MB}
variants:
%s
`, ns.Path(), strings.Join(variants, "\n")), nil)
	for _, r := range sum.Runs {
		f := flowByName(t, r, "bulk")
		t.Logf("%s: %.2f Mbit/s, %d retransmissions, srtt p50 %.1f ms, loss drops up %d down %d", r.Variant, f.ThroughputBps/1e6, f.Retransmissions, f.RTTMs.P50,
			r.Links[0].Drops["loss"], r.Links[1].Drops["loss"])
		cc, lossy := r.Variant, 0
		if r.Variant == "down" {
			cc, lossy = "reno", 1
		}
		if f.BytesReceived != 2e6 || f.Retransmissions == 0 || f.CC != cc || f.Stack != "kernel" {
			t.Errorf("%s: received %d of 2000000 bytes, %d retransmissions, cc %q, stack %q", r.Variant, f.BytesReceived, f.Retransmissions, f.CC, f.Stack)
		}
		if r.Links[lossy].Drops["loss"] == 0 || r.Links[1-lossy].Drops["loss"] != 0 {
			t.Errorf("%s: loss drops up %d, down %d; want the %s's only", r.Variant, r.Links[0].Drops["loss"], r.Links[1].Drops["loss"], r.Links[lossy].Name)
		}
		// The sender's round trip is the path's 20 ms at least.
		if f.RTTMs.P50 < 20 {
			t.Errorf("%s: srtt p50 %.1f ms, want at least the path's 20", r.Variant, f.RTTMs.P50)
		}
	}

	// The runs reset their kernel sockets: none is left in the
	// namespace (a TIME_WAIT, or a FIN retransmitted into the next run's
	// device, which once shifted that run's loss draws by a packet).
	if out, err := runIn(context.Background(), ns, "ss", "-Htan"); err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("kernel TCP sockets left in the namespace after the runs (%v):\n%s", err, out)
	}

	udp := runTUNIn(t, fmt.Sprintf(`
seed: 5
duration: 60s
link: {uplink: {loss: 5%%, delay: 5ms}}
tun: {netns: %s}
flows:
  - {name: probe, type: udp, stack: kernel, interval: 1ms, count: 3000, packet_size: 200}
  - {name: back, type: udp, stack: kernel, direction: down, interval: 1ms, count: 1000, packet_size: 200}
`, ns.Path()), nil).Runs[0]
	probe, back := flowByName(t, udp, "probe"), flowByName(t, udp, "back")
	if lost, drops := probe.PacketsSent-probe.PacketsReceived, udp.Links[0].Drops["loss"]; lost != drops {
		t.Errorf("kernel UDP flow lost %d datagrams, the uplink's loss dropped %d", lost, drops)
	}
	// 3000 at 5%: sd of the ratio sqrt(.05*.95/3000) = 0.004; 4.5 sd.
	if math.Abs(probe.LossRatio-0.05) > 0.018 {
		t.Errorf("loss ratio %.4f, want 0.05 +- 0.018", probe.LossRatio)
	}
	if back.PacketsReceived+back.ReceiverDrops != 1000 {
		t.Errorf("the downlink flow received %d of 1000 (%d dropped by its socket)", back.PacketsReceived, back.ReceiverDrops)
	}
}

// TestTUNKernelStations puts the kernel behind two stations of a Wi-Fi
// cell, told apart by source address, next to a netstack station: each
// kernel flow's frames are its own station's, and every datagram of each
// arrives (the cell and the link have room for all).
func TestTUNKernelStations(t *testing.T) {
	ns := testNetns(t)
	sum := runTUNIn(t, fmt.Sprintf(`
duration: 30s
wifi: {standard: 802.11g, stations: [{name: a}, {name: b}, {name: c}]}
link: {rate: 20Mbps, delay: 5ms}
tun: {netns: %s, station: [b, a]}
flows:
  - {name: from-a, type: udp, stack: kernel, station: a, interval: 2ms, count: 500, packet_size: 1000}
  - {name: from-b, type: udp, stack: kernel, station: b, interval: 1ms, count: 1000, packet_size: 1000}
  - {name: to-a, type: udp, stack: kernel, station: a, direction: down, interval: 4ms, count: 250, packet_size: 500}
  - {name: from-c, type: udp, station: c, interval: 4ms, count: 250, packet_size: 1000}
`, ns.Path()), nil).Runs[0]
	// The path drops nothing. What the machine could not keep up with is
	// netjam's own and counted apart: a receiving socket's full buffer
	// (CI saw 53 of from-b's 1000 before the buffers grew to 4 MiB), and
	// the device's queue when netjam read it late (the kernel's drops, CI
	// saw 39 of from-a's 500), which only the kernel's uplink flows meet.
	kernelMissing := uint64(0)
	for name, want := range map[string]uint64{"from-a": 500, "from-b": 1000, "to-a": 250, "from-c": 250} {
		f := flowByName(t, sum, name)
		missing := want - min(f.PacketsReceived+f.ReceiverDrops, want)
		if name == "from-a" || name == "from-b" {
			kernelMissing += missing
		} else if missing > 0 {
			t.Errorf("%s: %d of %d datagrams arrived, %d dropped by the receiving socket", name, f.PacketsReceived, want, f.ReceiverDrops)
		}
		if f.ReceiverDrops > 0 {
			t.Logf("%s: %d datagrams dropped by the receiving socket (the machine was late)", name, f.ReceiverDrops)
		}
	}
	if kd := sum.TUN.KernelDrops; kernelMissing > kd {
		t.Errorf("the kernel's flows miss %d datagrams, the device's queue dropped %d: the rest was lost on the path", kernelMissing, kd)
	} else if kernelMissing > 0 {
		t.Logf("the kernel's flows miss %d datagrams, all dropped at the device's queue (%d kernel drops: the machine was late)", kernelMissing, kd)
	}
	// Each station's delivered uplink frames: its own flow's datagrams
	// (and nothing of the others').
	got := map[string]uint64{}
	for _, st := range sum.WiFi.Stations {
		got[st.Name] = st.Delivered
	}
	a, b := flowByName(t, sum, "from-a").PacketsReceived, flowByName(t, sum, "from-b").PacketsReceived
	if got["a"] < a || got["a"] > a+10 || got["b"] < b || got["b"] > b+10 || got["c"] != 250 {
		t.Errorf("frames delivered per station %v, want a ~%d, b ~%d, c 250 (their flows' datagrams)", got, a, b)
	}
	for _, st := range sum.WiFi.Stations {
		for reason, n := range st.Drops {
			if reason != "flushed" && n > 0 {
				t.Errorf("station %s dropped frames %v: the cell has room for all", st.Name, st.Drops)
			}
		}
	}
	if sum.WiFi.AP.Delivered < 250 {
		t.Errorf("the AP delivered %d frames, want the 250 of to-a at least", sum.WiFi.AP.Delivered)
	}
	t.Logf("stations %v, AP %d; TUN %v", got, sum.WiFi.AP.Delivered, sum.TUN.Stations)
}

// TestTUNOffload carries the kernel's large TCP segments (TSO) and the
// peer's (host GSO) across the path: whole when its stages decide on
// their segments inside (a delay, a loss, a rate of at least
// impair.WholeRate), split into MTU-sized segments in front of a stage
// that decides per packet only (a slower rate), gathered again into the
// device when due together, and not at all with offload off. Every byte must arrive as sent
// either way: a kernel flow up checks its own bytes, and 4 MB echoed by
// the peer's echo service come back to a kernel socket unchanged.
func TestTUNOffload(t *testing.T) {
	ns := testNetns(t)
	for _, c := range []struct {
		name, link, offload string
		whole               bool // expect whole GSO packets both ways
		// gathered: the peer's large segments reach the device in
		// writes of several segments each (whole, or parts of them).
		gathered bool
	}{
		{"whole", "{delay: 2ms}", "true", true, true},
		{"split", "{delay: 2ms, rate: 400Mbps, queue: 2000}", "true", false, false},
		{"loss", "{delay: 2ms, loss: 0.0001%}", "true", true, true},
		{"fast rate", "{delay: 2ms, rate: 10Gbps, loss: 0.0001%, queue: 2000}", "true", true, true},
		{"off", "{delay: 2ms}", "false", false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			echoed := make([]byte, 4<<20)
			sum := runTUNIn(t, fmt.Sprintf(`
duration: 60s
link: %s
tun: {netns: %s, offload: %s}
flows: [{name: up, type: tcp, stack: kernel, size: 20MB}]
`, c.link, ns.Path(), c.offload), func(ctx context.Context) error {
				conn, err := dialIn(ctx, ns, "10.99.0.2:7")
				if err != nil {
					return err
				}
				defer conn.Close()
				sent := make([]byte, len(echoed))
				for i := range sent {
					sent[i] = byte(i*31 + i>>12)
				}
				werr := make(chan error, 1)
				go func() {
					_, err := conn.Write(sent)
					werr <- err
				}()
				conn.SetReadDeadline(time.Now().Add(30 * time.Second))
				if _, err := io.ReadFull(conn, echoed); err != nil {
					return fmt.Errorf("echo: %w", err)
				}
				if err := <-werr; err != nil {
					return err
				}
				if !bytes.Equal(echoed, sent) {
					return errors.New("the echo differs from what was sent")
				}
				return nil
			}).Runs[0]
			f := flowByName(t, sum, "up")
			up, down := sum.Links[0], sum.Links[1]
			t.Logf("%s: kernel flow %.2f Gbit/s; whole GSO packets up %d, down %d; packets up %d, down %d",
				c.name, f.ThroughputBps/1e9, up.WholeGSO, down.WholeGSO, up.PacketsOut, down.PacketsOut)
			if f.BytesReceived != 20e6 {
				t.Errorf("the kernel flow delivered %d of 20000000 bytes", f.BytesReceived)
			}
			// Without the device's offload the kernel sends MTU-sized
			// packets; the peer's own GSO still crosses a delay-only
			// downlink whole, and is split before the device.
			switch {
			case c.whole && (up.WholeGSO == 0 || down.WholeGSO == 0):
				t.Errorf("whole GSO packets up %d, down %d; want both", up.WholeGSO, down.WholeGSO)
			case c.name == "split" && up.WholeGSO+down.WholeGSO > 0:
				t.Errorf("whole GSO packets up %d, down %d across a stage deciding per packet", up.WholeGSO, down.WholeGSO)
			case c.name == "off" && up.WholeGSO > 0:
				t.Errorf("%d whole GSO packets from a device without offload", up.WholeGSO)
			}
			// Whole, or cut into parts by the rate, the peer's
			// segments go into the device several at a time; the echo
			// above checks every byte.
			tun := sum.TUN
			t.Logf("%s: device writes %d for %d packets", c.name, tun.Writes, tun.WrittenPackets)
			if c.gathered && tun.Writes*2 > tun.WrittenPackets {
				t.Errorf("device writes %d for %d packets: no segments gathered", tun.Writes, tun.WrittenPackets)
			}
		})
	}
}

// TestTUNCaptureShowsTheWire: with captures on, the large segments of
// the kernel (up) and of the peer (down, echoed) are captured as the
// MTU-sized packets they stand for, each with its final checksum, while
// they cross a delay-only path whole; the captures count what the links
// counted.
func TestTUNCaptureShowsTheWire(t *testing.T) {
	tshark := requireTshark(t)
	ns := testNetns(t)
	dir := t.TempDir()
	sum, err := Run(context.Background(), mustPlan(t, fmt.Sprintf(`
duration: 60s
link: {delay: 2ms}
tun: {netns: %s}
capture: [client, server]
flows: [{name: up, type: tcp, stack: kernel, size: 2MB}]
`, ns.Path())), Options{OutDir: openOut(t, dir), Attached: func(ctx context.Context) error {
		conn, err := dialIn(ctx, ns, "10.99.0.2:7")
		if err != nil {
			return err
		}
		defer conn.Close()
		werr := make(chan error, 1)
		go func() {
			_, err := conn.Write(make([]byte, 1<<20))
			werr <- err
		}()
		conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		if _, err := io.ReadFull(conn, make([]byte, 1<<20)); err != nil {
			return err
		}
		return <-werr
	}})
	if err != nil {
		t.Fatal(err)
	}
	r := sum.Runs[0]
	up, down := r.Links[0], r.Links[1]
	// The captures show the wire without making the path split: the
	// segments still cross the delay-only path whole.
	if up.WholeGSO == 0 || down.WholeGSO == 0 {
		t.Errorf("whole GSO packets up %d, down %d with captures on; want both", up.WholeGSO, down.WholeGSO)
	}
	if got, want := r.Captures["client"].Packets, up.PacketsIn+down.PacketsOut; got != want {
		t.Errorf("client capture %d packets, links say %d", got, want)
	}
	if got, want := r.Captures["server"].Packets, up.PacketsOut+down.PacketsIn; got != want {
		t.Errorf("server capture %d packets, links say %d", got, want)
	}
	for _, f := range []string{"client.pcap", "server.pcap"} {
		out, err := exec.Command(tshark, "-r", filepath.Join(dir, f), "-o", "tcp.check_checksum:TRUE",
			"-Y", "frame.len > 1500 or tcp.checksum.status != 1", "-T", "fields", "-e", "frame.number").Output()
		if err != nil {
			t.Fatalf("tshark %s: %v", f, err)
		}
		if n := strings.Count(string(out), "\n"); n != 0 {
			t.Errorf("%s: %d packets larger than the MTU or without a good TCP checksum", f, n)
		}
	}
}

// TestTUNSmallMSSSplit sends 4 MB from kernel sockets whose MSS is set
// small (TCP_MAXSEG 88, Linux's smallest, 200 and 536) across a path with
// a rate, which needs every packet on its own: the kernel hands the device
// segments of up to 64 KiB standing for hundreds of MSS, and each must be
// split into packets of at most the MTU, as the capture of the client's
// side shows them. A limit on the segments of a GSO packet once let such
// segments cross whole (726 uplink packets of 9,990 bytes on average).
func TestTUNSmallMSSSplit(t *testing.T) {
	tshark := requireTshark(t)
	ns := testNetns(t)
	for _, mss := range []int{88, 200, 536} {
		t.Run(strconv.Itoa(mss), func(t *testing.T) {
			dir := t.TempDir()
			sum, err := Run(context.Background(), mustPlan(t, fmt.Sprintf(`
duration: 60s
link: {delay: 1ms, rate: 1Gbps, queue: 10000}
tun: {netns: %s, offload: true}
capture: [client]
`, ns.Path())), Options{OutDir: openOut(t, dir), Attached: func(ctx context.Context) error {
				var conn net.Conn
				err := ns.Do(func() (err error) {
					d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error { return setMSS(c, mss) }}
					conn, err = d.DialContext(ctx, "tcp", "10.99.0.2:9")
					return err
				})
				if err != nil {
					return err
				}
				defer conn.Close()
				if _, err := conn.Write(make([]byte, 4<<20)); err != nil {
					return err
				}
				// The discard service closes once it has read all.
				conn.(*net.TCPConn).CloseWrite()
				conn.SetReadDeadline(time.Now().Add(30 * time.Second))
				_, err = io.Copy(io.Discard, conn)
				return err
			}})
			if err != nil {
				t.Fatal(err)
			}
			up := sum.Runs[0].Links[0]
			t.Logf("MSS %d: %d packets, %d bytes up (%.0f bytes on average), whole GSO %d", mss, up.PacketsIn, up.BytesIn,
				float64(up.BytesIn)/float64(max(1, up.PacketsIn)), up.WholeGSO)
			if up.BytesIn < 4<<20 || up.BytesIn > up.PacketsIn*1500 || up.WholeGSO != 0 {
				t.Errorf("MSS %d: %d bytes in %d packets up, %d whole GSO; want at least 4 MiB in packets of at most 1500 bytes",
					mss, up.BytesIn, up.PacketsIn, up.WholeGSO)
			}
			out, err := exec.Command(tshark, "-r", filepath.Join(dir, "client.pcap"), "-Y", "frame.len > 1500",
				"-T", "fields", "-e", "frame.len").Output()
			if err != nil {
				t.Fatalf("tshark: %v", err)
			}
			if n := strings.Count(string(out), "\n"); n != 0 {
				t.Errorf("MSS %d: %d packets on the path larger than the MTU: %s", mss, n, firstLines(string(out), 5))
			}
		})
	}
}

// firstLines returns the first n lines of s.
func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], " ")
}

// TestTUNTCPIdle: tun.tcp_idle reaches the relay: a kernel connection to
// the echo service that stays silent is reset after it, and counted.
func TestTUNTCPIdle(t *testing.T) {
	ns := testNetns(t)
	sum := runTUNIn(t, fmt.Sprintf("duration: 60s\ntun: {netns: %s, tcp_idle: 300ms}\n", ns.Path()), func(ctx context.Context) error {
		// The relay's idle clock starts when it has the connection,
		// which may be before the dial returns here, not before it began.
		start := time.Now()
		conn, err := dialIn(ctx, ns, "10.99.0.2:7")
		if err != nil {
			return err
		}
		defer conn.Close()
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, err := conn.Read(make([]byte, 1))
		if !errors.Is(err, syscall.ECONNRESET) {
			return fmt.Errorf("a silent connection: read %d, %v after %v; want a reset after 300ms", n, err, time.Since(start))
		}
		if d := time.Since(start); d < 300*time.Millisecond {
			return fmt.Errorf("reset after %v, before tcp_idle", d)
		}
		return nil
	})
	if r := sum.Runs[0].TUN.Relay.TCP; r.Idle != 1 || r.Errors != 0 {
		t.Errorf("relay %+v, want one connection ended idle", r)
	}
}

// TestTUNIdlePathIsQuiet: a device with only IPv4 sends nothing into the
// path by itself (no IPv6 link-local traffic).
func TestTUNIdlePathIsQuiet(t *testing.T) {
	ns := testNetns(t)
	sum := runTUNIn(t, fmt.Sprintf("duration: 60s\ntun: {netns: %s}\n", ns.Path()), func(ctx context.Context) error {
		time.Sleep(1500 * time.Millisecond) // the kernel solicits routers within a second of a link going up
		return nil
	})
	if n := sum.Runs[0].Links[0].PacketsIn; n != 0 {
		t.Errorf("an idle IPv4-only device sent %d packets into the path", n)
	}
}

// TestTUNPathsPingTwoDelays: in TUN mode the kernel's packets take the
// path their destination matches: ping to the peer's address on to-us
// sees that path's RTT, ping to the peer's own address the default
// path's, in one namespace and one run (a delay matrix for any
// application); a kernel TCP flow on to-us crosses its links, and so
// does a lab flow, whose server host has the path's next address (the
// peer has its first). The pings start once the flows are done (1 s
// covers 100 KB at these RTTs), so as not to share the CPU with them.
func TestTUNPathsPingTwoDelays(t *testing.T) {
	ns := testNetns(t)
	testenv.RequireTool(t, "ping", "iputils-ping")
	outs := map[string]string{}
	sum := runTUNIn(t, fmt.Sprintf(`
duration: 60s
links:
  - {name: access, delay: 5ms}
  - {name: us, delay: 35ms}
paths:
  - {name: to-us, via: [access, us], match: {dst: 10.30.0.0/16}}
  - {name: direct, via: [access]}
tun: {netns: %s}
flows:
  - {name: k, type: tcp, stack: kernel, size: 100KB, path: to-us}
  - {name: n, type: tcp, size: 100KB, path: to-us, direction: down}
`, ns.Path()), func(ctx context.Context) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
		// -w: ping waits for every reply up to 10 s; without it, it
		// waits two round trips for the last one, which a loaded
		// machine can delay past that (CI's load once lost the 20th).
		for _, dst := range []string{"10.99.0.2", "10.30.0.1"} {
			out, err := runIn(ctx, ns, "ping", "-n", "-c", "20", "-i", "0.05", "-w", "10", dst)
			if err != nil {
				return err
			}
			outs[dst] = out
		}
		return nil
	})
	for dst, want := range map[string]float64{"10.99.0.2": 10, "10.30.0.1": 80} {
		var rtts []float64
		for _, m := range regexp.MustCompile(`time=([0-9.]+) ms`).FindAllStringSubmatch(outs[dst], -1) {
			v, _ := strconv.ParseFloat(m[1], 64)
			rtts = append(rtts, v)
		}
		if len(rtts) != 20 {
			t.Fatalf("ping %s: %d replies, want 20:\n%s", dst, len(rtts), outs[dst])
		}
		sort.Float64s(rtts)
		t.Logf("ping %s: RTT min %.3f ms, p50 %.3f (%.0f ms configured)", dst, rtts[0], rtts[10], want)
		// The fastest reply shows the path taken: a loaded machine
		// delays some replies, it speeds none up (the median is
		// TestTUNPingRTT's to check, on one path: here, at a load of
		// 14 on 2 cores, it was 31 ms late while the fastest was
		// within 0.5 ms). Each direction a packet crosses on the wall
		// clock adds its scheduling: CI measured the fastest 1.0 ms over
		// on the path of 2 directions, 1.4 ms on the one of 4. 3 ms of
		// room still tells 10 from 80 ms, the path taken.
		if rtts[0] < want || rtts[0] > want+3 {
			t.Errorf("ping %s: RTT min %.3f ms, p50 %.3f: want the min in [%.0f, %.0f]", dst, rtts[0], rtts[10], want, want+3)
		}
	}
	for _, f := range sum.Runs[0].Flows {
		if f.Path != "to-us" || f.TCPSummary == nil || !f.TCPSummary.Completed || f.RTTMs.Min < 80 {
			t.Errorf("flow %s: path %q, %+v", f.Name, f.Path, f.TCPSummary)
		}
	}
}

// TestTUNPathsForward: a forward of the peer is reached across each
// path by the peer's address on it: curl to 10.30.0.1:8080 connects
// across to-us (80 ms of round trip), to 10.99.0.2:8080 across the
// default path (10 ms), both relayed to one server on loopback.
func TestTUNPathsForward(t *testing.T) {
	ns := testNetns(t)
	testenv.RequireTool(t, "curl", "curl")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "hello\n") })}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	connect := map[string]float64{}
	runTUNIn(t, fmt.Sprintf(`
duration: 60s
links:
  - {name: access, delay: 5ms}
  - {name: us, delay: 35ms}
paths:
  - {name: to-us, via: [access, us], match: {dst: 10.30.0.0/16}}
  - {name: direct, via: [access]}
tun:
  netns: %s
  forward: [{proto: tcp, listen: 8080, to: %s}]
`, ns.Path(), ln.Addr()), func(ctx context.Context) error {
		for _, dst := range []string{"10.99.0.2", "10.30.0.1"} {
			for range 3 {
				out, err := runIn(ctx, ns, "curl", "-sS", "--max-time", "10", "-o", "/dev/null", "-w", "%{time_connect}", "http://"+dst+":8080/")
				if err != nil {
					return err
				}
				v, err := strconv.ParseFloat(strings.TrimSpace(out), 64)
				if err != nil {
					return err
				}
				if old, ok := connect[dst]; !ok || v*1000 < old {
					connect[dst] = v * 1000
				}
			}
		}
		return nil
	})
	// A connect is one round trip of its path: never shorter; and the
	// default path's far shorter than to-us's (below the midpoint of the
	// two, 45 ms: measured 11 to 16 ms at a load of 10 on 2 cores, curl
	// timing its own process).
	for dst, want := range map[string]float64{"10.99.0.2": 10, "10.30.0.1": 80} {
		t.Logf("curl %s:8080: fastest connect of 3 %.3f ms (%.0f ms of round trip)", dst, connect[dst], want)
		if connect[dst] < want {
			t.Errorf("curl %s:8080: connect %.3f ms, shorter than its path's %.0f", dst, connect[dst], want)
		}
	}
	if c := connect["10.99.0.2"]; c >= 45 {
		t.Errorf("curl 10.99.0.2:8080: connect %.3f ms, want the default path's 10 (below 45)", c)
	}
}

// TestTUNForwardOnAPath: forwards that name a path answer at the peer's
// address on that path alone, so one port reaches a different server per
// path (curl through each), and a port forwarded on one path is refused
// at another path's address.
func TestTUNForwardOnAPath(t *testing.T) {
	ns := testNetns(t)
	testenv.RequireTool(t, "curl", "curl")
	serve := func(body string) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, body) })}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		return ln.Addr().String()
	}
	us, near := serve("us"), serve("near")
	got := map[string]string{}
	sum := runTUNIn(t, fmt.Sprintf(`
duration: 60s
links:
  - {name: access, delay: 1ms}
  - {name: us, delay: 20ms}
paths:
  - {name: to-us, via: [access, us], match: {dst: 10.30.0.0/16}}
  - {name: direct, via: [access]}
tun:
  netns: %s
  forward:
    - {proto: tcp, listen: 8080, to: %s, path: to-us}
    - {proto: tcp, listen: 8080, to: %s, path: direct}
    - {proto: tcp, listen: 8081, to: %s, path: to-us}
`, ns.Path(), us, near, us), func(ctx context.Context) error {
		for _, url := range []string{"10.30.0.1:8080", "10.99.0.2:8080", "10.30.0.1:8081", "10.99.0.2:8081"} {
			out, err := runIn(ctx, ns, "curl", "-sS", "--max-time", "10", "http://"+url+"/")
			if err != nil {
				out = "error"
			}
			got[url] = strings.TrimSpace(out)
		}
		return nil
	}).Runs[0]
	want := map[string]string{"10.30.0.1:8080": "us", "10.99.0.2:8080": "near", "10.30.0.1:8081": "us", "10.99.0.2:8081": "error"}
	for url, w := range want {
		if got[url] != w {
			t.Errorf("curl %s: %q, want %q", url, got[url], w)
		}
	}
	if fw := sum.TUN.Forwards; len(fw) != 3 || !strings.HasPrefix(fw[0], "tcp 10.30.0.1:8080 -> ") || !strings.HasPrefix(fw[1], "tcp 10.99.0.2:8080 -> ") {
		t.Errorf("forwards in the summary %q, want each at its path's address", fw)
	}
}

// TestTUNPeerSenderHeldBack: the peer's TCP (iperf3 -R through a forward:
// the peer sends what the target sends it) outruns a direction whose
// input holds 16 packets. It is held back there, as a lab host's TCP is,
// instead of losing packets the scenario never asked to lose.
func TestTUNPeerSenderHeldBack(t *testing.T) {
	ns := testNetns(t)
	port := iperf3Server(t)
	sum, err := runPeerHeld(context.Background(), t, ns, port, "2")
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	down := sum.Runs[0].Links[1]
	t.Logf("down: drops %v, senders held back %d times", down.Drops, down.InputWaits)
	if n := down.Drops["input"]; n > 0 {
		t.Errorf("%d input drops down; want none", n)
	}
}

// TestTUNPeerHeldSenderLetGoWhenInterrupted: the run is interrupted
// while the peer's TCP is held back at the downlink; it must still end,
// its held senders let go.
func TestTUNPeerHeldSenderLetGoWhenInterrupted(t *testing.T) {
	ns := testNetns(t)
	port := iperf3Server(t)
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runPeerHeld(ctx, t, ns, port, "20") // its error is the interruption's
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		buf := make([]byte, 1<<20)
		t.Fatalf("the run did not end: a held sender not let go?\n%s", buf[:runtime.Stack(buf, true)])
	}
}

// runPeerHeld runs iperf3 -R for secs seconds from ns through a forward to
// the iperf3 server at port, over a 10 Gbit/s link whose downlink's input
// holds 16 packets, until it ends or ctx does.
func runPeerHeld(ctx context.Context, t *testing.T, ns *hostnet.Netns, port int, secs string) (*summary.Summary, error) {
	p := mustPlan(t, fmt.Sprintf(`
duration: 60s
link: {rate: 10Gbps, delay: 1ms, queue: 10000}
tun:
  netns: %s
  forward: [{proto: tcp, listen: 5201, to: 127.0.0.1:%d}]
`, ns.Path(), port))
	for i := range p.Runs[0].Links {
		p.Runs[0].Links[i].Downlink.InputLimit = 16
	}
	return Run(ctx, p, Options{Attached: func(ctx context.Context) error {
		_, err := runIn(ctx, ns, "iperf3", "-c", "10.99.0.2", "-t", secs, "-R")
		return err
	}})
}

// TestTUNPeerRetransmissionsCounted: in iperf3 -R through a forward the
// sender across the path is the peer's TCP (iperf3's own sender is on
// loopback and retransmits nothing), so the summary counts the peer's
// retransmissions: as many as the downlink lost, give or take what was
// resent whole or found lost twice.
func TestTUNPeerRetransmissionsCounted(t *testing.T) {
	ns := testNetns(t)
	port := iperf3Server(t)
	p := mustPlan(t, fmt.Sprintf(`
duration: 60s
seed: 3
link: {delay: 2ms, downlink: {loss: 1%%}}
tun:
  netns: %s
  forward: [{proto: tcp, listen: 5201, to: 127.0.0.1:%d}]
`, ns.Path(), port))
	sum, err := Run(context.Background(), p, Options{Attached: func(ctx context.Context) error {
		_, err := runIn(ctx, ns, "iperf3", "-c", "10.99.0.2", "-t", "2", "-R", "-b", "200M")
		return err
	}})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	pt, lost := sum.Runs[0].TUN.PeerTCP, sum.Runs[0].Links[1].Drops["loss"]
	t.Logf("the peer's TCP: %+v; lost down: %d", pt, lost)
	if lost == 0 {
		t.Fatal("the downlink lost nothing")
	}
	if pt.Retransmits < lost/2 || pt.Retransmits > 2*lost+10 {
		t.Errorf("the peer's TCP retransmitted %d segments for %d lost down", pt.Retransmits, lost)
	}
	if pt.SegmentsSent == 0 {
		t.Error("the peer's TCP sent no segment")
	}
}

// TestTUNPeerChecksumDropsCounted: what a corrupt stage spoils on the
// uplink the peer drops for its checksum, and the summary says so (the
// path delivered those packets; nothing behind the peer saw them).
func TestTUNPeerChecksumDropsCounted(t *testing.T) {
	ns := testNetns(t)
	p := mustPlan(t, fmt.Sprintf(`
duration: 2s
seed: 5
link: {rate: 50Mbps, delay: 2ms, uplink: {corrupt: 2%%}}
tun: {netns: %s}
flows: [{name: bulk, type: tcp, stack: kernel, duration: 2s}]
`, ns.Path()))
	sum, err := Run(context.Background(), p, Options{})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	tun, corrupted := sum.Runs[0].TUN, sum.Runs[0].Links[0].Corrupted
	t.Logf("corrupted up %d; the peer dropped %d for a checksum, %d malformed", corrupted, tun.PeerChecksumErrors, tun.PeerMalformed)
	if corrupted == 0 {
		t.Fatal("the uplink corrupted nothing")
	}
	// All of them but those the queue after the corrupt stage dropped,
	// and those still on the path when the run ended (2 ms of it).
	if got := tun.PeerChecksumErrors + tun.PeerMalformed; got > corrupted || got < corrupted*9/10 {
		t.Errorf("the peer dropped %d packets for a checksum and %d malformed; the uplink corrupted %d", tun.PeerChecksumErrors, tun.PeerMalformed, corrupted)
	}
}

// TestTUNWindowBesideKernel runs a TCP flow held back by a 64 KB send
// buffer (100 Mbit/s, 10 ms each way) from the kernel through TUN mode,
// then from a netstack host in the lab. Neither grows a congestion window
// it does not use: Linux's stays within about twice its flight (204 to
// 250 segments at 42 Mbit/s, about 76 in flight), gVisor's too (192 at
// 34); before gVisor patch 0007, gVisor's grew to 4790, twenty times the
// kernel's. And the same send_buffer carries about as much in both: the
// netstack host takes the buffer as Linux does (twice the size given),
// and wakes its writer as Linux does (patch 0008); before, it carried 13
// Mbit/s against the kernel's 42 (0.31 of it), now 34 (0.82).
func TestTUNWindowBesideKernel(t *testing.T) {
	ns := testNetns(t)
	sum := runTUNIn(t, fmt.Sprintf(`
duration: 30s
link: {rate: 100Mbps, delay: 10ms, queue: 100}
tun: {netns: %s}
flows:
  - {name: capped, type: tcp, cc: cubic, send_buffer: 64KB, duration: 4s}
variants:
  - {name: kernel, set: {flows.capped.stack: kernel}}
  - {name: netstack, set: {flows.capped.stack: netstack}}
`, ns.Path()), nil)
	cwnd, bps := map[string]uint32{}, map[string]float64{}
	for _, r := range sum.Runs {
		f := flowByName(t, r, "capped")
		cwnd[r.Variant], bps[r.Variant] = f.CwndMax, f.ThroughputBps
		t.Logf("%s: %.1f Mbit/s, window up to %d segments", r.Variant, f.ThroughputBps/1e6, f.CwndMax)
	}
	if cwnd["kernel"] == 0 || cwnd["netstack"] > 2*cwnd["kernel"] {
		t.Errorf("windows up to %d segments (netstack) and %d (kernel) with as small a send buffer: want the netstack's at most twice the kernel's", cwnd["netstack"], cwnd["kernel"])
	}
	// Linux keeps between two thirds of its buffer and all of it in
	// flight, so a stack that does the same carries at least two thirds of
	// what the kernel does, whatever the kernel's exact share. Not under
	// the race detector, which slows the netstack host (in this process)
	// and not the kernel: with other packages' tests beside it (go test
	// -race ./...), 25.1 Mbit/s against 38.7, where it carries 34 alone.
	// TestVirtualSendBufferStaysInFlight checks the same on every run.
	if !raceEnabled && bps["netstack"] < 2.0/3*bps["kernel"] {
		t.Errorf("with send_buffer 64KB the netstack host carried %.1f Mbit/s, the kernel %.1f: want at least two thirds of the kernel's", bps["netstack"]/1e6, bps["kernel"]/1e6)
	}
}

// TestTUNPeerTakesReorderingForReordering: across a path that sends 0.5% of
// its packets ahead of its 10 ms delay (both ways), the peer's TCP sending
// a download to the kernel learns that the path reorders and stops taking
// each reordering for a loss, and carries as much as the kernel's own TCP
// sending the other way in the same run, as Linux's does (gVisor patch
// 0013; the deterministic check is TestVirtualSpuriousRecoveryUndone).
// Before the patch every reordering began a recovery and most of what it
// overtook was sent again: 279 retransmissions and 21 recoveries for 59
// reordered packets (23.8 Mbit/s of 50); after, 2 to 14 for 98 to 107
// one day, 4 to 46 for 105 to 106 another (46.7 to 47.6 Mbit/s, the
// kernel 47 to 48). How many varies with the machine's timing: the test
// bounds them at one a reordered packet, a quarter of what came before
// or less.
func TestTUNPeerTakesReorderingForReordering(t *testing.T) {
	ns := testNetns(t)
	sum := runTUNIn(t, fmt.Sprintf(`
duration: 30s
seed: 3
link: {rate: 50Mbps, delay: 10ms, queue: 1000, reorder: 0.5%%}
tun: {netns: %s}
flows: [{name: bulk, type: tcp, stack: kernel, cc: cubic, duration: 4s}]
variants:
  - {name: kernel-sends, set: {flows.bulk.direction: up}}
  - {name: peer-sends, set: {flows.bulk.direction: down}}
`, ns.Path()), nil)
	bps := map[string]float64{}
	for _, r := range sum.Runs {
		bps[r.Variant] = flowByName(t, r, "bulk").ThroughputBps
		t.Logf("%s: %.1f Mbit/s, reordered up %d down %d", r.Variant, bps[r.Variant]/1e6, r.Links[0].Reordered, r.Links[1].Reordered)
		if r.Variant != "peer-sends" {
			continue
		}
		pt, reordered := r.TUN.PeerTCP, r.Links[1].Reordered
		t.Logf("the peer's TCP: %d retransmissions, %d SACK recoveries (%d spurious)", pt.Retransmits, pt.SACKRecoveries, pt.SpuriousRecoveries)
		if reordered < 20 {
			t.Fatalf("the downlink reordered %d packets: too few to tell", reordered)
		}
		// Before patch 0013 four to five retransmissions a reordered
		// packet (231 to 279 for 59). After it, each retransmission is a
		// recovery RACK's window did not yet cover, and how many
		// depends on the machine's timing: 2 to 14 for about 100 one
		// day, 4 to 46 another. Not under the race detector, whose peer
		// processes ACKs late by as much as the machine is busy: 21 for
		// 106 once, 361 for 88 in a CI run beside other packages' tests.
		// TestVirtualSpuriousRecoveryUndone checks the patch exactly on
		// every run.
		if !raceEnabled && pt.Retransmits > reordered {
			t.Errorf("%d retransmissions (%d recoveries) for %d reordered packets and no loss: want at most as many", pt.Retransmits, pt.SACKRecoveries, reordered)
		}
		// Every recovery here is reordering taken for loss, and the
		// ACK that ends it echoes the original's timestamp (the
		// counter TestTUNSpuriousRecoveriesNeedTimestamps keeps at 0
		// without timestamps).
		if pt.SACKRecoveries > 0 && pt.SpuriousRecoveries == 0 {
			t.Errorf("%d recoveries across a path that only reorders, none counted spurious", pt.SACKRecoveries)
		}
	}
	// Not under the race detector, which slows the peer (in this
	// process) and not the kernel.
	if !raceEnabled && bps["peer-sends"] < 0.8*bps["kernel-sends"] {
		t.Errorf("the peer's TCP carried %.1f Mbit/s, the kernel's %.1f across the same reordering: want at least 0.8 of it", bps["peer-sends"]/1e6, bps["kernel-sends"]/1e6)
	}
}

// TestTUNSpuriousRecoveriesNeedTimestamps: the peer's TCP tells a recovery
// was spurious by the timestamp the ACK that ends it echoes (RFC 3522):
// older than the recovery's first retransmission, the original arrived.
// With a kernel that sends no timestamps (net.ipv4.tcp_timestamps=0 in its
// namespace) there is nothing to tell it by, and across a path that loses
// packets and reorders none, no recovery is spurious. gVisor took the
// missing echo (0) for an old one and counted nearly every recovery of a
// transfer as spurious (patch 0015).
func TestTUNSpuriousRecoveriesNeedTimestamps(t *testing.T) {
	ns := testNetns(t)
	err := ns.Do(func() error {
		return os.WriteFile("/proc/sys/net/ipv4/tcp_timestamps", []byte("0"), 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	sum := runTUNIn(t, fmt.Sprintf(`
duration: 30s
seed: 2
link: {rate: 50Mbps, delay: 10ms, queue: 1000, loss: 1%%}
tun: {netns: %s}
flows: [{name: bulk, type: tcp, stack: kernel, cc: cubic, direction: down, duration: 4s}]
`, ns.Path()), nil)
	r := sum.Runs[0]
	pt := r.TUN.PeerTCP
	t.Logf("%.1f Mbit/s; the peer's TCP: %d retransmissions, %d SACK recoveries, %d spurious", flowByName(t, r, "bulk").ThroughputBps/1e6, pt.Retransmits, pt.SACKRecoveries, pt.SpuriousRecoveries)
	if pt.SACKRecoveries < 5 {
		t.Fatalf("%d recoveries: too few to tell", pt.SACKRecoveries)
	}
	if pt.SpuriousRecoveries != 0 {
		t.Errorf("%d of %d recoveries counted spurious on a path that reorders nothing, with no timestamps to tell by: want 0", pt.SpuriousRecoveries, pt.SACKRecoveries)
	}
}

// TestTUNPeerCountsSegmentsOnTheWire: the peer's TCP counters count what
// crossed the path, segment by segment, as Linux's segs_out and segs_in
// do: what the peer sends as one large segment (GSO) counts as the
// MSS-sized segments the downlink carries, and a run the uplink's segments
// merged into on the way in (receive offload) as the segments it was.
// gVisor counted a large segment once (patch 0016), and a merged run
// once: at 200 Mbit/s segments_sent was 13400 where the downlink took
// 37104, segments_received 22250 where the uplink delivered 34864, and
// retransmits over segments_sent nearly three times the retransmission
// rate.
func TestTUNPeerCountsSegmentsOnTheWire(t *testing.T) {
	ns := testNetns(t)
	sum := runTUNIn(t, fmt.Sprintf(`
duration: 30s
link: {rate: 200Mbps, delay: 2ms, queue: 1000}
tun: {netns: %s}
flows: [{name: bulk, type: tcp, stack: kernel, cc: cubic, duration: 2s}]
variants:
  - {name: up, set: {flows.bulk.direction: up}}
  - {name: down, set: {flows.bulk.direction: down}}
`, ns.Path()), nil)
	// Only the flow's TCP crosses the path; the kernel's own packets
	// (IPv6 neighbour discovery) are a few at most.
	near := func(got, want uint64) bool {
		d := math.Abs(float64(got) - float64(want))
		return d <= 10+0.01*float64(want)
	}
	for _, r := range sum.Runs {
		pt, up, down := r.TUN.PeerTCP, r.Links[0], r.Links[1]
		t.Logf("%s: the peer's TCP sent %d segments (the downlink took %d), received %d (the uplink delivered %d)", r.Variant, pt.SegmentsSent, down.PacketsIn, pt.SegmentsReceived, up.PacketsOut)
		if !near(pt.SegmentsSent, down.PacketsIn) {
			t.Errorf("%s: the peer's TCP counted %d segments sent, the downlink took %d", r.Variant, pt.SegmentsSent, down.PacketsIn)
		}
		if !near(pt.SegmentsReceived, up.PacketsOut) {
			t.Errorf("%s: the peer's TCP counted %d segments received, the uplink delivered %d", r.Variant, pt.SegmentsReceived, up.PacketsOut)
		}
	}
}

// TestTUNPeerRetransmitsSeenByTshark: the peer's TCP counts every segment
// it sends again, as tshark's analysis of a capture at the peer's end finds
// them (a retransmission sent soon after the segment it follows is
// "out-of-order" to tshark), also after a timeout, when it sends again
// segments of several MSS at once for the NIC to split. gVisor counted such
// a segment once (patch 0017): 683 retransmissions where tshark saw 930.
func TestTUNPeerRetransmitsSeenByTshark(t *testing.T) {
	tshark := requireTshark(t)
	ns := testNetns(t)
	dir := t.TempDir()
	sum, err := Run(context.Background(), mustPlan(t, fmt.Sprintf(`
duration: 30s
seed: 2
link: {rate: 200Mbps, delay: 5ms, queue: 1000}
tun: {netns: %s}
flows: [{name: bulk, type: tcp, stack: kernel, cc: cubic, direction: down, duration: 3s}]
timeline:
  - {at: 1500ms, for: 700ms, set: {link.downlink.loss: 100%%}}
capture: {points: [server], snaplen: 96}
`, ns.Path())), Options{OutDir: openOut(t, dir)})
	if err != nil {
		t.Fatal(err)
	}
	pt := sum.Runs[0].TUN.PeerTCP
	seen := tsharkRetransmissions(t, tshark, filepath.Join(dir, "server.pcap"), "ip.src == 10.99.0.2")
	t.Logf("the peer's TCP: %d retransmissions, %d timeouts; tshark sees %d", pt.Retransmits, pt.Timeouts, seen)
	if pt.Timeouts == 0 {
		t.Fatal("no timeout across a 700 ms outage")
	}
	diff := math.Abs(float64(seen) - float64(pt.Retransmits))
	if diff > math.Max(2, 0.02*float64(seen)) {
		t.Errorf("tshark sees %d retransmissions, the peer's TCP counted %d", seen, pt.Retransmits)
	}
}
