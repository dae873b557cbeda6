package stack

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

// KernelTCPConn is a TCP connection of the host kernel.
type KernelTCPConn struct {
	*net.TCPConn
}

// DialKernelTCP connects to addr with the kernel's TCP using congestion
// control cc ("" for the system default). The algorithm is set before the
// connection is made, so it governs the whole connection, handshake and
// slow start included.
func DialKernelTCP(ctx context.Context, addr netip.AddrPort, cc string) (*KernelTCPConn, error) {
	if cc != "" {
		avail, err := KernelCongestionControls()
		if err != nil {
			return nil, err
		}
		if !slices.Contains(avail, cc) {
			return nil, fmt.Errorf("congestion control %q is not available in this kernel (available: %s)", cc, strings.Join(avail, ", "))
		}
	}
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return setCC(rc, cc)
	}}
	c, err := d.DialContext(ctx, "tcp", addr.String())
	if err != nil {
		return nil, err
	}
	return &KernelTCPConn{c.(*net.TCPConn)}, nil
}

// ListenKernelTCP listens on addr with the kernel's TCP; accepted
// connections use congestion control cc ("" for the default) for what
// they send.
func ListenKernelTCP(addr netip.AddrPort, cc string) (*net.TCPListener, error) {
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		return setCC(rc, cc)
	}}
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
// already closed reads as the zero TCPInfo.
func (c *KernelTCPConn) Info() TCPInfo {
	var info TCPInfo
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
		info = TCPInfo{
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
