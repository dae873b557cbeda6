package hostnet

import (
	"context"
	"io"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestKernelTCPCongestionControlAndInfo sends 4 MiB over loopback with each
// congestion control the kernel offers: the socket must report the
// algorithm asked for, and TCP_INFO a live connection.
func TestKernelTCPCongestionControlAndInfo(t *testing.T) {
	ccs, err := KernelCongestionControls()
	if err != nil {
		t.Skipf("no %s: %v", availableCCFile, err)
	}
	for _, cc := range ccs {
		t.Run(cc, func(t *testing.T) {
			ln, err := ListenKernelTCP(netip.MustParseAddrPort("127.0.0.1:0"), KernelTCPOptions{CC: cc})
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			done := make(chan int64, 1)
			go func() {
				c, err := ln.Accept()
				if err != nil {
					done <- -1
					return
				}
				defer c.Close()
				n, _ := io.Copy(io.Discard, c)
				done <- n
			}()
			c, err := DialKernelTCP(context.Background(), netip.MustParseAddrPort(ln.Addr().String()), KernelTCPOptions{CC: cc})
			if err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 1<<20)
			for range 4 {
				if _, err := c.Write(buf); err != nil {
					t.Fatal(err)
				}
			}
			info := c.Info()
			c.Close()
			if n := <-done; n != 4<<20 {
				t.Fatalf("received %d bytes", n)
			}
			if info.CC != cc || info.State != "ESTABLISHED" || info.Cwnd == 0 || info.SegmentsSent == 0 {
				t.Fatalf("info %+v", info)
			}
		})
	}
}

func TestKernelTCPUnknownCongestionControl(t *testing.T) {
	if _, err := KernelCongestionControls(); err != nil {
		t.Skip(err)
	}
	_, err := DialKernelTCP(context.Background(), netip.MustParseAddrPort("127.0.0.1:9"), KernelTCPOptions{CC: "vegas-nope"})
	if err == nil || !strings.Contains(err.Error(), `congestion control "vegas-nope" is not available in this kernel (available: `) {
		t.Fatalf("got %v", err)
	}
	ccs, _ := KernelCongestionControls()
	if !slices.Contains(ccs, "reno") {
		t.Errorf("reno, always built in, is missing from %v", ccs)
	}
}

// TestKernelSocketBufferNotCapped sets a send and a receive buffer twice
// net.core.wmem_max and rmem_max: with CAP_NET_ADMIN the kernel takes
// them whole (doubled, as always), and on a thread without it, where
// plain SO_SNDBUF would be capped in silence at the sysctl, setSockBuf
// says so and how to fix it. Sizes within the limits need no privilege.
// Before, a kernel flow's send_buffer above the sysctl was capped without
// a word: 8 MB asked on a machine with the default 208 KB cap gave 416 KB.
func TestKernelSocketBufferNotCapped(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (CAP_NET_ADMIN) to set a buffer above the sysctl's cap")
	}
	for _, b := range []sockBufOpt{sndBuf, rcvBuf} {
		v, err := os.ReadFile(b.limit)
		if err != nil {
			t.Skip(err)
		}
		limit, err := strconv.Atoi(strings.TrimSpace(string(v)))
		if err != nil {
			t.Fatal(err)
		}
		over := min(2*limit, 256<<20)
		got, err := sockBufIn(t, b, over, false)
		if err != nil || got != 2*over {
			t.Errorf("%s of %d bytes (%s %d) as root: took %d, %v; want %d", b.name, over, b.sysctl, limit, got, err, 2*over)
		}
		if _, err := sockBufIn(t, b, over, true); err == nil || !strings.Contains(err.Error(), b.sysctl) {
			t.Errorf("%s of %d bytes (%s %d) without CAP_NET_ADMIN: %v; want an error naming %s", b.name, over, b.sysctl, limit, err, b.sysctl)
		}
		if got, err := sockBufIn(t, b, 64<<10, true); err != nil || got != 128<<10 {
			t.Errorf("%s of 64 KiB without CAP_NET_ADMIN: took %d, %v; want %d", b.name, got, err, 128<<10)
		}
	}
}

// sockBufIn sets buffer b of a new TCP socket to n bytes and returns what
// the kernel took, on a thread of its own that, if unprivileged, first
// drops CAP_NET_ADMIN from its effective set (capabilities are a
// thread's; the thread ends with the goroutine, never reused).
func sockBufIn(t *testing.T, b sockBufOpt, n int, unprivileged bool) (int, error) {
	type result struct {
		got int
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		var r result
		defer func() { done <- r }()
		if unprivileged {
			hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
			var data [2]unix.CapUserData
			if r.err = unix.Capget(&hdr, &data[0]); r.err != nil {
				return
			}
			data[unix.CAP_NET_ADMIN/32].Effective &^= 1 << (unix.CAP_NET_ADMIN % 32)
			if r.err = unix.Capset(&hdr, &data[0]); r.err != nil {
				return
			}
		}
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			r.err = err
			return
		}
		defer unix.Close(fd)
		if r.err = setSockBuf(fd, b, n); r.err != nil {
			return
		}
		r.got, r.err = unix.GetsockoptInt(fd, unix.SOL_SOCKET, b.opt)
	}()
	r := <-done
	t.Logf("%s %d (unprivileged %v): %d, %v", b.name, n, unprivileged, r.got, r.err)
	return r.got, r.err
}
