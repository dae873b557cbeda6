package topology

import (
	"errors"
	"os"
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

// udpOffloader is a DeviceWriter that may also take runs of UDP
// datagrams as one packet (hostnet.TUN.UDPOffload).
type udpOffloader interface{ UDPOffload() bool }

// Device is a TUN device's write side as a node: the kernel behind it
// takes what it is pushed. A device with offload takes large segments
// (best merged, as a NIC's GRO would pass them) and partial checksums,
// completed by the kernel; one without takes MTU-sized packets with final
// checksums. Push and PushBatch run on one goroutine at a time: the
// device's queue's.
//
// A device with offload merges what its queue hands it together itself
// (PushBatch): a run of segments of one connection goes into the device
// as one GSO packet in one gathered write, straight from the segments'
// memory, instead of being copied into a merged packet first.
type Device struct {
	name   string
	dev    DeviceWriter
	uso    bool     // dev takes UDP runs
	vec    [][]byte // Push's and PushBatch's own: no allocation per packet
	errors atomic.Uint64
	// closed counts the packets that reached the device after it was
	// closed, at the run's end (not errors: nothing was there to take them).
	closed atomic.Uint64
	// writes counts the writes into the device, packets the MTU-sized
	// packets they carried (a merged segment's each).
	writes, packets atomic.Uint64
}

// NewDevice returns dev's write side as a node.
func NewDevice(name string, dev DeviceWriter) *Device {
	uo, ok := dev.(udpOffloader)
	return &Device{name: name, dev: dev, uso: ok && uo.UDPOffload(), vec: make([][]byte, 1, MaxBatch)}
}

// Node returns the device as a node of a graph; feed it through a Queue.
func (d *Device) Node() Node {
	acc := Accepts{GSO: No}
	if d.dev.Offload() {
		acc = Accepts{GSO: Yes, Partial: true, Merged: true}
	}
	return Node{Name: d.name, In: d, Accepts: acc}
}

// WriteErrors returns how many packets the device refused while open.
func (d *Device) WriteErrors() uint64 { return d.errors.Load() }

// AfterClose returns how many packets reached the device once it was
// closed: those still crossing the path when the run ended.
func (d *Device) AfterClose() uint64 { return d.closed.Load() }

// Writes returns how many writes the device took and how many MTU-sized
// packets they carried: their ratio is how well segments merged.
func (d *Device) Writes() (writes, packets uint64) { return d.writes.Load(), d.packets.Load() }

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
	d.vec = append(d.vec[:0], p.Data)
	d.write(g, p.Segments())
	p.Release()
}

// PushBatch writes ps, packets that reached the device's queue together,
// in order: each run of segments of one connection (impair.Run) as one
// GSO packet gathered from the segments (impair.JoinHeaders), each run of
// UDP datagrams of one flow (impair.UDPRun) as one UDP GSO packet where
// the device takes them, anything else as Push does. A device without
// offload takes each as Push does.
func (d *Device) PushBatch(ps []*impair.Packet) {
	for len(ps) > 0 {
		n, segs, mss, total := 1, 1, 0, 0
		gather := impair.Gather
		if d.dev.Offload() {
			n, segs, mss, total = impair.Run(ps, netif.MaxGSOPacket)
		}
		if n < 2 && d.uso {
			n, mss, total = impair.UDPRun(ps, netif.MaxGSOPacket)
			segs, gather = n, impair.UDPGather
		}
		if n < 2 {
			d.Push(time.Time{}, ps[0])
			ps = ps[1:]
			continue
		}
		run := ps[:n]
		d.vec = gather(d.vec[:0], run, total)
		d.write(netif.GSO{MSS: mss, NeedsCsum: true}, segs)
		for _, p := range run {
			p.Release()
		}
		ps = ps[n:]
	}
}

// write writes d.vec, a packet that stands for segs MTU-sized ones, and
// counts it.
func (d *Device) write(g netif.GSO, segs int) {
	switch _, err := d.dev.WritePacket(d.vec, g); {
	case errors.Is(err, os.ErrClosed):
		d.closed.Add(1)
	case err != nil:
		d.errors.Add(1)
	default:
		d.writes.Add(1)
		d.packets.Add(uint64(segs))
	}
	clear(d.vec)
}
