package emulator

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/netjam/netjam/hostnet"
	"github.com/netjam/netjam/internal/testenv"
)

// tun2socksModule and tun2socksVersion are the peer BenchmarkTUNIperf3
// runs beside netjam: tun2socks, gVisor's netstack behind a TUN device
// relaying to real sockets, which is what TUN mode does with no
// impairment. It is built from the Go module proxy at the first run
// (about 20 s) into the user's cache directory, unless NETJAM_TUN2SOCKS
// names a binary or one is on PATH; without either the rows skip and
// say why. None of its code is in this repository.
const (
	tun2socksModule  = "github.com/xjasonlyu/tun2socks/v2"
	tun2socksVersion = "v2.6.0"
)

var tun2socksBuild struct {
	once sync.Once
	bin  string
	err  error
}

// tun2socksBin returns a tun2socks binary, or skips b with the reason.
func tun2socksBin(b *testing.B) string {
	b.Helper()
	if p := os.Getenv("NETJAM_TUN2SOCKS"); p != "" {
		return p
	}
	if p, err := exec.LookPath("tun2socks"); err == nil {
		return p
	}
	tun2socksBuild.once.Do(func() {
		tun2socksBuild.bin, tun2socksBuild.err = buildTun2socks()
	})
	if tun2socksBuild.err != nil {
		b.Skipf("no tun2socks to compare with: %v (set NETJAM_TUN2SOCKS to a tun2socks binary)", tun2socksBuild.err)
	}
	return tun2socksBuild.bin
}

// buildTun2socks builds tun2socksVersion from the Go module proxy into
// the user's cache directory, once per version.
func buildTun2socks() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(cache, "netjam-bench", "tun2socks-"+tun2socksVersion)
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", err
	}
	// A module of its own that requires the exact version: go install
	// module@version also asks the proxy for the module's version list,
	// which it may refuse where it serves the version itself.
	dir, err := os.MkdirTemp("", "netjam-tun2socks-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	mod := fmt.Sprintf("module netjambench\n\ngo 1.26\n\nrequire %s %s\n", tun2socksModule, tun2socksVersion)
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(mod), 0o644); err != nil {
		return "", err
	}
	cmd := exec.Command(goBin, "build", "-mod=mod", "-o", bin, tun2socksModule)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building %s@%s: %v: %s", tun2socksModule, tun2socksVersion, err, strings.TrimSpace(string(out)))
	}
	return bin, nil
}

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
		bin := tun2socksBin(b)
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

// plainTUNInto opens a TUN device named name with no offload and no
// packet information (what tun2socks opens itself), in from's namespace,
// and moves it into to's: the returned file is its descriptor.
func plainTUNInto(from, to *hostnet.Netns, name string) (*os.File, error) {
	var f *os.File
	err := from.Do(func() error {
		fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		f = os.NewFile(uintptr(fd), "/dev/net/tun")
		ifr, err := unix.NewIfreq(name)
		if err != nil {
			return err
		}
		ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
		if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
			return fmt.Errorf("TUNSETIFF %s: %w", name, err)
		}
		l, err := netlink.LinkByName(name)
		if err != nil {
			return err
		}
		nsf, err := os.Open(to.Path())
		if err != nil {
			return err
		}
		defer nsf.Close()
		return netlink.LinkSetNsFd(l, int(nsf.Fd()))
	})
	if err != nil && f != nil {
		f.Close()
		return nil, err
	}
	return f, err
}

// procCPU returns the CPU time process pid has used (user and system).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command's name, which is in parentheses and
	// may hold spaces: utime and stime are the 12th and 13th of them.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / clockTicks
}

// clockTicks is USER_HZ, the unit of /proc's CPU times: 100 on every
// Linux architecture Go supports.
const clockTicks = 100
