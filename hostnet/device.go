package hostnet

import "github.com/netjam/netjam/netif"

// Device is a TUN device as netjam's emulator uses it: IP packets in and
// out, each with its GSO description. *TUN is the real one; package
// hostnet/tuntest has one in memory, for tests without root.
//
// ReadPacket blocks until the kernel sends a packet into the device, and
// returns an error wrapping os.ErrClosed once the device is closed;
// WritePacket never blocks. Both may be called concurrently with each
// other and with Close, which is idempotent.
type Device interface {
	// ReadPacket reads one packet the kernel sent into the device and
	// its GSO description (zero without offload): see TUN.ReadPacket.
	ReadPacket(buf []byte) (int, netif.GSO, error)
	// WritePacket hands the kernel one packet given as slices whose
	// concatenation is the packet, with its GSO description (zero
	// without offload): see TUN.WritePacket.
	WritePacket(pkt [][]byte, g netif.GSO) (int, error)
	// Offload reports whether the device takes and gives GSO packets.
	Offload() bool
	// Dropped returns what the kernel dropped at the device's queue
	// before it was read; ok is false when that cannot be known.
	Dropped() (n uint64, ok bool)
	// Name is the device's name.
	Name() string
	// Close closes the device and undoes what opening it set up.
	Close() error
}

var _ Device = (*TUN)(nil)
