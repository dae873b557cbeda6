package topology

import (
	"sync/atomic"
	"time"

	"github.com/netjam/netjam/impair"
	"github.com/netjam/netjam/netif"
)

// DeviceWriter is the write side of a TUN device (hostnet.Device).
type DeviceWriter interface {
	WritePacket(pkt [][]byte, g netif.GSO) (int, error)
	// Offload reports whether the device takes GSO packets.
	Offload() bool
}

// Device is a TUN device's write side as a node: the kernel behind it
// takes what it is pushed. A device with offload takes large segments
// (best merged, as a NIC's GRO would pass them) and partial checksums,
// completed by the kernel; one without takes MTU-sized packets with final
// checksums. Push runs on one goroutine at a time: the device's queue's.
type Device struct {
	name   string
	dev    DeviceWriter
	vec    [][]byte // Push's own: no allocation per packet
	errors atomic.Uint64
}

// NewDevice returns dev's write side as a node.
func NewDevice(name string, dev DeviceWriter) *Device {
	return &Device{name: name, dev: dev, vec: make([][]byte, 1)}
}

// Node returns the device as a node of a graph; feed it through a Queue.
func (d *Device) Node() Node {
	acc := Accepts{GSO: No}
	if d.dev.Offload() {
		acc = Accepts{GSO: Yes, Partial: true, Merged: true}
	}
	return Node{Name: d.name, In: d, Accepts: acc}
}

// WriteErrors returns how many packets the device refused.
func (d *Device) WriteErrors() uint64 { return d.errors.Load() }

// Push writes p into the device.
func (d *Device) Push(_ time.Time, p *impair.Packet) {
	var g netif.GSO
	switch mss, _, ok := p.GSO(); {
	case ok:
		// A large segment (that crossed the path whole, or merged
		// after it): the kernel takes it as its segments, completing
		// the checksum.
		impair.PseudoChecksum(p.Data)
		g = netif.GSO{MSS: mss, NeedsCsum: true}
	case p.Partial():
		impair.PseudoChecksum(p.Data)
		g = netif.GSO{NeedsCsum: true}
	default:
		p.FinishChecksum()
	}
	d.vec[0] = p.Data
	if _, err := d.dev.WritePacket(d.vec, g); err != nil {
		d.errors.Add(1)
	}
	d.vec[0] = nil
	p.Release()
}
