package hostnet

import (
	"context"
	"io"
	"net/netip"
	"slices"
	"strings"
	"testing"
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
