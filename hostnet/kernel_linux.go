package hostnet

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netjam/netjam/netif"
)

// The host kernel's TCP, for flows that must run on it (BBR, or whatever
// the kernel offers) rather than on gVisor's: sockets with a chosen
// congestion control whose state is read from TCP_INFO, as ss(8) does.

const availableCCFile = "/proc/sys/net/ipv4/tcp_available_congestion_control"

// KernelCongestionControls returns the congestion controls the running
// kernel offers to sockets (tcp_available_congestion_control).
func KernelCongestionControls() ([]string, error) {
	b, err := os.ReadFile(availableCCFile)
	if err != nil {
		return nil, fmt.Errorf("reading the kernel's congestion controls: %w", err)
	}
	return strings.Fields(string(b)), nil
}

// control applies o to a socket before it connects or listens: the
// window scale is agreed in the handshake, so the receive buffer must be
// set by then, and the congestion control governs the whole connection,
// slow start included.
func (o KernelTCPOptions) control(_, _ string, rc syscall.RawConn) error {
	if err := setCC(rc, o.CC); err != nil {
		return err
	}
	var serr error
	err := rc.Control(func(fd uintptr) {
		if o.SendBuffer > 0 {
			if serr = setSockBuf(int(fd), sndBuf, o.SendBuffer); serr != nil {
				return
			}
		}
		if o.ReceiveBuffer > 0 {
			serr = setSockBuf(int(fd), rcvBuf, o.ReceiveBuffer)
		}
	})
	if err != nil {
		return err
	}
	return serr
}

// sockBufOpt names a socket buffer's options and the sysctl that caps it.
type sockBufOpt struct {
	name          string
	opt, force    int
	sysctl, limit string
}

var (
	sndBuf = sockBufOpt{"SO_SNDBUF", unix.SO_SNDBUF, unix.SO_SNDBUFFORCE, "net.core.wmem_max", "/proc/sys/net/core/wmem_max"}
	rcvBuf = sockBufOpt{"SO_RCVBUF", unix.SO_RCVBUF, unix.SO_RCVBUFFORCE, "net.core.rmem_max", "/proc/sys/net/core/rmem_max"}
)

// setSockBuf sets fd's buffer b to n bytes, which the kernel doubles, as
// the scenario asked: with the FORCE option, which passes the sysctl's
// cap, where the process may (CAP_NET_ADMIN), else with the plain one,
// and then it checks that the kernel took all of n, as it does not say
// when it caps it.
func setSockBuf(fd int, b sockBufOpt, n int) error {
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, b.force, n) == nil {
		return nil
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, b.opt, n); err != nil {
		return fmt.Errorf("setting %s to %d: %w", b.name, n, err)
	}
	got, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, b.opt)
	if err != nil {
		return fmt.Errorf("reading %s back: %w", b.name, err)
	}
	if got < 2*n {
		limit := "its limit"
		if v, err := os.ReadFile(b.limit); err == nil {
			limit = strings.TrimSpace(string(v)) + " bytes"
		}
		return fmt.Errorf("setting %s to %d bytes: the kernel capped it at %d (%s is %s); raise it (sysctl -w %s=%d) or run netjam with CAP_NET_ADMIN", b.name, n, got/2, b.sysctl, limit, b.sysctl, n)
	}
	return nil
}

// checkCC reports a congestion control the kernel does not offer.
func checkCC(cc string) error {
	if cc == "" {
		return nil
	}
	avail, err := KernelCongestionControls()
	if err != nil {
		return err
	}
	if !slices.Contains(avail, cc) {
		return fmt.Errorf("congestion control %q is not available in this kernel (available: %s)", cc, strings.Join(avail, ", "))
	}
	return nil
}

// DialKernelTCP connects to addr with the kernel's TCP and the options o.
func DialKernelTCP(ctx context.Context, addr netip.AddrPort, o KernelTCPOptions) (*KernelTCPConn, error) {
	if err := checkCC(o.CC); err != nil {
		return nil, err
	}
	d := net.Dialer{Control: o.control}
	if o.Local.IsValid() {
		d.LocalAddr = net.TCPAddrFromAddrPort(netip.AddrPortFrom(o.Local, 0))
	}
	c, err := d.DialContext(ctx, "tcp", addr.String())
	if err != nil {
		return nil, err
	}
	return &KernelTCPConn{c.(*net.TCPConn)}, nil
}

// ListenKernelTCP listens on addr with the kernel's TCP; accepted
// connections have the options o (a listener's socket options are
// inherited by the connections it accepts).
func ListenKernelTCP(addr netip.AddrPort, o KernelTCPOptions) (*net.TCPListener, error) {
	if err := checkCC(o.CC); err != nil {
		return nil, err
	}
	lc := net.ListenConfig{Control: o.control}
	ln, err := lc.Listen(context.Background(), "tcp", addr.String())
	if err != nil {
		return nil, err
	}
	return ln.(*net.TCPListener), nil
}

func setCC(rc syscall.RawConn, cc string) error {
	if cc == "" {
		return nil
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION, cc)
	}); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("setting TCP_CONGESTION to %q: %w", cc, serr)
	}
	return nil
}

// Info reads the connection's TCP_INFO and TCP_CONGESTION, as ss(8) shows
// them: SRTT, RTTVar and RTO from tcpi_rtt, tcpi_rttvar and tcpi_rto; Cwnd
// and Ssthresh in segments; Retransmits from tcpi_total_retrans (segments
// resent over the connection's life); Timeouts from tcpi_total_rto (RTO
// expiries; 0 on kernels before 6.7, which do not fill it). TCP_INFO has
// no count of fast retransmits: FastRetransmits stays 0. A connection
// already closed reads as the zero netif.TCPInfo.
func (c *KernelTCPConn) Info() netif.TCPInfo {
	var info netif.TCPInfo
	rc, err := c.SyscallConn()
	if err != nil {
		return info
	}
	rc.Control(func(fd uintptr) {
		ti, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		if err != nil {
			return
		}
		cc, _ := unix.GetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION)
		info = netif.TCPInfo{
			State:        tcpStateName(ti.State),
			CC:           strings.TrimRight(cc, "\x00"),
			CCState:      caStateName(ti.Ca_state),
			SRTT:         time.Duration(ti.Rtt) * time.Microsecond,
			RTTVar:       time.Duration(ti.Rttvar) * time.Microsecond,
			RTO:          time.Duration(ti.Rto) * time.Microsecond,
			Cwnd:         ti.Snd_cwnd,
			Ssthresh:     ti.Snd_ssthresh,
			ReorderSeen:  ti.Reord_seen > 0,
			SegmentsSent: uint64(ti.Segs_out),
			Retransmits:  uint64(ti.Total_retrans),
			Timeouts:     uint64(ti.Total_rto),
		}
		info.SegmentsReceived = uint64(ti.Segs_in)
	})
	return info
}

func tcpStateName(s uint8) string {
	names := []string{"", "ESTABLISHED", "SYN-SENT", "SYN-RECV", "FIN-WAIT1", "FIN-WAIT2", "TIME-WAIT", "CLOSE", "CLOSE-WAIT", "LAST-ACK", "LISTEN", "CLOSING"}
	if int(s) < len(names) {
		return names[s]
	}
	return fmt.Sprint(s)
}

func caStateName(s uint8) string {
	names := []string{"open", "disorder", "cwr", "recovery", "loss"}
	if int(s) < len(names) {
		return names[s]
	}
	return fmt.Sprint(s)
}
