package emulator

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/netjam/netjam/internal/testenv"
)

// The peers the benchmarks run beside netjam, built from the Go module
// proxy at their first run into the user's cache directory (about 20 s
// each), unless an environment variable names a binary; without either
// the rows skip and say why. None of their code is in this repository.
var (
	// tun2socks: gVisor's netstack behind a TUN device, relaying to real
	// sockets, which is what TUN mode does with no impairment
	// (BenchmarkTUNIperf3). NETJAM_TUN2SOCKS, or tun2socks on PATH.
	tun2socksPeer = &peer{name: "tun2socks", env: "NETJAM_TUN2SOCKS",
		module: "github.com/xjasonlyu/tun2socks/v2", version: "v2.6.0", pkg: "github.com/xjasonlyu/tun2socks/v2"}
	// ooni/netem: gVisor netstack hosts joined by a link in userspace,
	// which is what the lab does (BenchmarkLabCeiling). The module has
	// no tagged version; the proxy serves this commit's. The program is
	// ooniNetemMain, a client of its library: the calibrate command it
	// ships does the same but always writes a capture of every packet.
	// NETJAM_OONI_NETEM names a binary built from ooniNetemMain.
	ooniNetemPeer = &peer{name: "ooni/netem", env: "NETJAM_OONI_NETEM",
		module: "github.com/ooni/netem", version: "v0.0.0-20240208095707-608dcbcd82b8", main: ooniNetemMain}
)

// peer is a program to compare with, built once per process.
type peer struct {
	name, env       string
	module, version string
	pkg             string // the package to build, or
	main            string // the source of a main package that uses module

	once sync.Once
	bin  string
	err  error
}

// binary returns the peer's binary, or skips b with the reason.
func (p *peer) binary(b *testing.B) string {
	b.Helper()
	if v := os.Getenv(p.env); v != "" {
		return v
	}
	if p.pkg != "" {
		if v, err := exec.LookPath(filepath.Base(p.name)); err == nil {
			return v
		}
	}
	p.once.Do(func() { p.bin, p.err = p.build() })
	if p.err != nil {
		b.Skipf("no %s to compare with: %v (set %s to a binary)", p.name, p.err, p.env)
	}
	return p.bin
}

// build builds the peer into the user's cache directory, once per
// version (and source of its main): in a module of its own that requires the exact version (go
// install module@version also asks the proxy for the module's version
// list, which it refuses for both where it serves the version itself).
func (p *peer) build() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	name := strings.ReplaceAll(p.name, "/", "-") + "-" + p.version
	if p.main != "" { // a binary of an older main is not this one
		sum := sha256.Sum256([]byte(p.main))
		name += fmt.Sprintf("-%x", sum[:4])
	}
	bin := filepath.Join(cache, "netjam-bench", name)
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "netjam-peer-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	mod := fmt.Sprintf("module netjambench\n\ngo 1.26\n\nrequire %s %s\n", p.module, p.version)
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(mod), 0o644); err != nil {
		return "", err
	}
	pkg := p.pkg
	if p.main != "" {
		if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(p.main), 0o644); err != nil {
			return "", err
		}
		pkg = "."
	}
	cmd := exec.Command(goBin, "build", "-mod=mod", "-o", bin, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building %s@%s: %v: %s", p.module, p.version, err, strings.TrimSpace(string(out)))
	}
	return bin, nil
}

// ooniNetemMain moves data over one TCP connection between two of
// ooni/netem's netstack hosts (its PPP topology, MTU 1500) across a link
// of -rtt (half each way, no loss) for -duration, with ooni/netem's own
// NDT0 client and server, and prints the bytes received and the seconds
// they took.
const ooniNetemMain = `package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/apex/log"
	"github.com/ooni/netem"
)

func main() {
	rtt := flag.Duration("rtt", 2*time.Millisecond, "round-trip delay")
	dur := flag.Duration("duration", 3*time.Second, "how long")
	plr := flag.Float64("plr", 0, "packet loss rate each way")
	flag.Parse()
	log.SetLevel(log.ErrorLevel)
	topo := netem.MustNewPPPTopology("10.0.0.2", "10.0.0.1", log.Log, &netem.LinkConfig{
		LeftToRightDelay: *rtt / 2,
		LeftToRightPLR:   *plr,
		RightToLeftDelay: *rtt / 2,
		RightToLeftPLR:   *plr,
	})
	defer topo.Close()
	ctx, cancel := context.WithTimeout(context.Background(), *dur)
	defer cancel()
	ready, serverErr := make(chan net.Listener, 1), make(chan error, 1)
	go netem.RunNDT0Server(ctx, topo.Server, net.ParseIP("10.0.0.1"), 54321, log.Log, ready, serverErr, false)
	var l net.Listener
	select {
	case l = <-ready:
	case err := <-serverErr:
		fmt.Fprintln(os.Stderr, "server:", err)
		os.Exit(1)
	}
	clientErr, perf := make(chan error, 1), make(chan *netem.NDT0PerformanceSample)
	go netem.RunNDT0Client(ctx, topo.Client, "10.0.0.1:54321", log.Log, false, clientErr, perf)
	var last *netem.NDT0PerformanceSample
	for s := range perf {
		last = s
	}
	<-clientErr
	l.Close()
	if last == nil {
		fmt.Fprintln(os.Stderr, "no sample")
		os.Exit(1)
	}
	fmt.Println(last.ReceivedTotal, last.ElapsedSeconds())
}
`

// benchTun2socks runs iperf3 with args from a namespace through
// tun2socks: the client's namespace routes 10.96.0.0/24 into a TUN device
// whose other end tun2socks holds (fd://3, its default MTU of 1500 and
// TCP buffers, as a user starts it), in a namespace of its own where it
// relays every connection directly (direct://) to an iperf3 server on
// that namespace's loopback (10.96.0.1 on lo), as netjam's relay reaches
// its forward's target on loopback. It reports what BenchmarkTUNIperf3
// reports for netjam, tun2socks's own CPU seconds per second included.
// -tcp-auto-tuning, tun2socks's option for its netstack's receive
// buffers, made no difference (1.10 to 1.17 Gbit/s up and 0.57 to 0.68
// down, with and without, 2 runs each). A larger MTU would make it
// faster, but the path would then be another network than the 1500-byte
// one netjam's device has.
func benchTun2socks(b *testing.B, name string, args []string, udp bool, secs string, got map[string]float64) {
	b.Run(name, func(b *testing.B) {
		bin := tun2socksPeer.binary(b)
		iperf := testenv.RequireTool(b, "iperf3", "iperf3")
		client, relay := testNetns(b), testNetns(b)
		const dev, dst = "nj-t2s", "10.96.0.1"

		tunFile, err := plainTUNInto(relay, client, dev)
		if err != nil {
			b.Fatal(err)
		}
		defer tunFile.Close()
		err = client.Do(func() error {
			l, err := netlink.LinkByName(dev)
			if err != nil {
				return err
			}
			addr, _ := netlink.ParseAddr("10.97.0.2/24")
			if err := netlink.AddrAdd(l, addr); err != nil {
				return err
			}
			if err := netlink.LinkSetUp(l); err != nil {
				return err
			}
			to, _ := netlink.ParseIPNet("10.96.0.0/24")
			return netlink.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: to})
		})
		if err == nil {
			err = relay.Do(func() error {
				lo, err := netlink.LinkByName("lo")
				if err != nil {
					return err
				}
				addr, _ := netlink.ParseAddr(dst + "/32")
				return netlink.AddrAdd(lo, addr)
			})
		}
		if err != nil {
			b.Fatal(err)
		}

		srv := exec.Command(iperf, "-s", "-B", dst)
		if err := relay.Do(srv.Start); err != nil {
			b.Fatal(err)
		}
		defer func() {
			srv.Process.Kill()
			srv.Wait()
		}()
		peer := exec.Command(bin, "-device", "fd://3", "-proxy", "direct://", "-loglevel", "error")
		peer.ExtraFiles = []*os.File{tunFile}
		var peerErr strings.Builder
		peer.Stderr = &peerErr
		if err := relay.Do(peer.Start); err != nil {
			b.Fatal(err)
		}
		defer func() {
			peer.Process.Kill()
			peer.Wait()
		}()
		tunFile.Close() // tun2socks holds the device now

		var bps, cpu float64
		for b.Loop() {
			var out string
			var err error
			for range 50 { // until tun2socks and the server are up
				c0, w0 := procCPU(peer.Process.Pid), time.Now()
				out, err = runIn(context.Background(), client, "iperf3", append([]string{"-c", dst, "-t", secs, "-J"}, args...)...)
				if err == nil && !strings.Contains(out, `"error":`) {
					cpu += (procCPU(peer.Process.Pid) - c0).Seconds() / time.Since(w0).Seconds()
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if err != nil {
				b.Fatalf("%v (tun2socks: %s)", err, peerErr.String())
			}
			var r iperf3Result
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				b.Fatalf("iperf3: %v\n%s", err, out)
			}
			if r.bps(udp) == 0 {
				b.Fatalf("iperf3 measured nothing through tun2socks:\n%s\n%s", out, peerErr.String())
			}
			bps += r.bps(udp)
		}
		n := float64(b.N)
		b.ReportMetric(bps/n/1e9, "Gbit/s")
		b.ReportMetric(cpu/n, "cpu-s/s")
		got[name] = bps / n / 1e9
	})
}
