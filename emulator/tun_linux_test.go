package emulator

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netjam/netjam/hostnet"
)

// What the TUN tests and benchTun2socks need of Linux beside package
// hostnet: a plain TUN device moved into a namespace, a process's CPU time
// from /proc, a socket's MSS.

// setMSS sets the MSS of the TCP socket c (TCP_MAXSEG) before it connects.
func setMSS(c syscall.RawConn, mss int) error {
	var serr error
	if err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_MAXSEG, mss)
	}); err != nil {
		return err
	}
	return serr
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
		return moveLink(name, to)
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
