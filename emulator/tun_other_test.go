//go:build !linux

package emulator

import (
	"errors"
	"os"
	"syscall"
	"time"

	"github.com/netjam/netjam/hostnet"
)

// plainTUNInto, procCPU and setMSS are Linux's (tun_linux_test.go);
// the tests and benchmarks that use them skip here first
// (testenv.RequireTUN).

func plainTUNInto(_, _ *hostnet.Netns, _ string) (*os.File, error) {
	_, err := hostnet.OpenTUN(hostnet.TUNConfig{})
	return nil, err
}

func procCPU(int) time.Duration { return 0 }

func setMSS(syscall.RawConn, int) error { return errors.ErrUnsupported }
