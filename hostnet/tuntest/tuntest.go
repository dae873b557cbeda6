// Package tuntest is a TUN device in memory (hostnet.Device), for tests
// of TUN mode without root: what the test's "kernel" sends with Send,
// ReadPacket returns; what is written into the device goes to the
// kernel's function. It imports no gVisor: the kernel is whatever the
// test makes of it (a netstack host, a channel).
package tuntest

import (
	"bytes"
	"errors"
	"os"
	"sync"

	"github.com/netjam/netjam/hostnet"
	"github.com/netjam/netjam/netif"
)

// Device is an in-memory TUN device without offload. Its methods are safe
// for concurrent use.
type Device struct {
	name   string
	in     chan []byte
	out    func([]byte)
	closed chan struct{}
	once   sync.Once
}

var _ hostnet.Device = (*Device)(nil)

// queue is how many packets Send may hand over before ReadPacket takes
// them; Send blocks beyond.
const queue = 256

// New returns an open device named name whose written packets are handed
// to out (the kernel receiving them), each in a buffer of its own that
// out may keep. out may be nil: written packets are then discarded.
func New(name string, out func(pkt []byte)) *Device {
	return &Device{name: name, in: make(chan []byte, queue), out: out, closed: make(chan struct{})}
}

// Send hands the device's reader a packet as the kernel would, waiting
// while the queue is full; false once the device is closed.
func (d *Device) Send(pkt []byte) bool {
	select {
	case <-d.closed:
		return false // not left to the next select's random choice
	default:
	}
	select {
	case d.in <- pkt:
		return true
	case <-d.closed:
		return false
	}
}

// ReadPacket returns the next packet Send handed over, copied into buf
// (cut to its length); after Close an error wrapping os.ErrClosed.
func (d *Device) ReadPacket(buf []byte) (int, netif.GSO, error) {
	select {
	case b := <-d.in:
		return copy(buf, b), netif.GSO{}, nil
	case <-d.closed:
		return 0, netif.GSO{}, os.ErrClosed
	}
}

// ErrOffload is WritePacket's error for a packet with a GSO description:
// the device has no offload.
var ErrOffload = errors.New("tuntest: the device has no offload")

// WritePacket joins pkt's slices and hands the packet to the kernel's
// function, on the caller's goroutine.
func (d *Device) WritePacket(pkt [][]byte, g netif.GSO) (int, error) {
	select {
	case <-d.closed:
		return 0, os.ErrClosed
	default:
	}
	if g != (netif.GSO{}) {
		return 0, ErrOffload
	}
	b := bytes.Join(pkt, nil)
	if d.out != nil {
		d.out(b)
	}
	return len(b), nil
}

// Name returns the name New was given.
func (d *Device) Name() string { return d.name }

// Offload is false: packets carry no GSO description.
func (d *Device) Offload() bool { return false }

// Dropped cannot be known: a full queue makes Send wait, not drop.
func (d *Device) Dropped() (uint64, bool) { return 0, false }

// Close wakes a blocked ReadPacket and Send; idempotent.
func (d *Device) Close() error {
	d.once.Do(func() { close(d.closed) })
	return nil
}
