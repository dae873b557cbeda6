//go:build !linux

package hostnet

import (
	"os"

	"github.com/netjam/netjam/netif"
)

// TUN is an open TUN device; on this system there is none: OpenTUN and
// TUNFromFile return a *NotLinuxError. See tun_linux.go.
type TUN struct{}

// OpenTUN returns a *NotLinuxError: TUN devices need Linux.
func OpenTUN(TUNConfig) (*TUN, error) { return nil, notLinux("opening a TUN device") }

// TUNFromFile closes f and returns a *NotLinuxError: TUN devices need
// Linux.
func TUNFromFile(f *os.File, _ string, _ int, _, _ bool) (*TUN, error) {
	f.Close()
	return nil, notLinux("opening a TUN device")
}

// Name returns "".
func (t *TUN) Name() string { return "" }

// Index returns 0.
func (t *TUN) Index() int { return 0 }

// MTU returns 0.
func (t *TUN) MTU() int { return 0 }

// File returns nil.
func (t *TUN) File() *os.File { return nil }

// Offload reports false.
func (t *TUN) Offload() bool { return false }

// UDPOffload reports false.
func (t *TUN) UDPOffload() bool { return false }

// Dropped reports that nothing is known.
func (t *TUN) Dropped() (uint64, bool) { return 0, false }

// Read returns a *NotLinuxError.
func (t *TUN) Read([]byte) (int, error) { return 0, notLinux("reading a TUN device") }

// Write returns a *NotLinuxError.
func (t *TUN) Write([]byte) (int, error) { return 0, notLinux("writing a TUN device") }

// WriteVec returns a *NotLinuxError.
func (t *TUN) WriteVec([][]byte) (int, error) { return 0, notLinux("writing a TUN device") }

// ReadPacket returns a *NotLinuxError.
func (t *TUN) ReadPacket([]byte) (int, netif.GSO, error) {
	return 0, netif.GSO{}, notLinux("reading a TUN device")
}

// WritePacket returns a *NotLinuxError.
func (t *TUN) WritePacket([][]byte, netif.GSO) (int, error) {
	return 0, notLinux("writing a TUN device")
}

// Close does nothing.
func (t *TUN) Close() error { return nil }
