package emulator

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/netjam/netjam/hostnet"
	"github.com/netjam/netjam/impair"
	"github.com/netjam/netjam/netif"
	"github.com/netjam/netjam/summary"
	"github.com/netjam/netjam/topology"
)

// devEnd is a TUN device netjam serves, a kernel's end of the path: the
// client side's, or a node's. A loop reads what the kernel sends into the
// path; what the path delivers to the kernel reaches the device through
// its inbox, whose goroutine writes it.
type devEnd struct {
	dev hostnet.Device
	ns  *hostnet.Netns // the device's namespace; nil: netjam's own
	// in is the device's inbox.
	in       *topology.Queue
	writer   *topology.Device // the device's write side
	readDone chan struct{}    // closed when the read loop ends; nil before start
	closing  atomic.Bool      // close has begun: the read loop stops pausing

	malformed atomic.Uint64 // packets from the device that are not IPv4 or IPv6
	shed      atomic.Uint64 // packets read while the first direction's input was full

	dropsMu     sync.Mutex // orders reading the device's drops with its close
	kernelDrops uint64     // the device's drops when last read; guarded by dropsMu
	devClosed   bool       // close has read the drops a last time; guarded by dropsMu
}

// deviceDrops returns the packets the kernel dropped at the device's
// queue so far: read from the device while it is open (a request to the
// kernel: for the summary and a scrape of the metrics, not the packet
// path), then the last count read before it closed.
func (d *devEnd) deviceDrops() uint64 { return d.readDeviceDrops(false) }

// readDeviceDrops is deviceDrops; last reads the device a last time, before
// its close, and never again.
func (d *devEnd) readDeviceDrops(last bool) uint64 {
	d.dropsMu.Lock()
	defer d.dropsMu.Unlock()
	if !d.devClosed {
		if n, ok := d.dev.Dropped(); ok {
			d.kernelDrops = max(d.kernelDrops, n)
		}
		d.devClosed = last
	}
	return d.kernelDrops
}

// inbox adds the device's inbox and the device behind it (see
// topology.Device for what it takes) to the graph, and returns the inbox.
func (d *devEnd) inbox(l *lab, b *pathBuilder, name string) topology.ID {
	d.in = topology.NewQueue(name+" inbox", inboxLen, inboxBytes, putWait)
	l.lives = append(l.lives, d.in)
	d.writer = topology.NewDevice(name, d.dev)
	q := b.g.Add(d.in.Node())
	b.g.Link(q, b.g.Add(d.writer.Node()))
	return q
}

// startReading starts the device's read loop: each well-formed packet
// goes to put (which reports whether it kept the buffer, see
// topology.Source.Take), the rest is counted as malformed. While full
// reports the first direction's input full, the loop sheds (see
// lab.shedding). Buffers come from src.
func (d *devEnd) startReading(src *topology.Source, full func() bool, put func(buf *impair.Packet, n int, g netif.GSO) bool) {
	d.readDone = make(chan struct{})
	go func() {
		defer close(d.readDone)
		// The read buffer is a pooled packet as large as a segment
		// with offload can be. A large segment goes into the path in
		// it, and the next read gets a new one; anything else is
		// copied into a pooled packet of its size, so that an ACK
		// does not hold 64 KiB while it crosses the path.
		buf := src.ReadBuffer()
		defer func() { buf.Release() }()
		for {
			n, g, err := d.dev.ReadPacket(buf.Data)
			if err != nil {
				return
			}
			if full != nil && d.shedding(full) {
				continue
			}
			if !wellFormed(buf.Data[:n]) {
				d.malformed.Add(1)
				continue
			}
			if put(buf, n, g) {
				buf = src.ReadBuffer()
			}
		}
	}()
}

// shedding drops the packet just read, counted as shed, when the first
// direction's input is full: the path behind it is held up by
// backpressure (a host, the relay's sockets, the other device, fell
// behind), and the packet would be dropped at the direction's input after
// its copy. Then it leaves the device unread until the input has room, so
// that the kernel drops at the device's queue (kernel_drops), which costs
// netjam nothing: when more arrives than the machine carries, the load is
// shed at the entrance before any work is done on it, and the cores go to
// the packets already inside (no receive livelock).
func (d *devEnd) shedding(full func() bool) bool {
	if !full() {
		return false
	}
	d.shed.Add(1)
	for full() && !d.closing.Load() {
		time.Sleep(shedPause)
	}
	return true
}

// shedPause is how long the read loop leaves the device unread, at a
// time, while the first direction's input is full.
const shedPause = 50 * time.Microsecond

// close closes the device, which ends the read loop, and waits for it.
func (d *devEnd) close() error {
	if d.dev == nil {
		return nil
	}
	d.closing.Store(true)
	d.readDeviceDrops(true) // the device goes with Close
	err := d.dev.Close()
	if d.readDone != nil {
		<-d.readDone
	}
	return err
}

// stats returns the device's counters.
func (d *devEnd) stats() summary.DeviceStats {
	st := summary.DeviceStats{Malformed: d.malformed.Load(), WriteErrors: d.writer.WriteErrors(), AfterClose: d.writer.AfterClose(), KernelDrops: d.deviceDrops(), Shed: d.shed.Load()}
	st.Writes, st.WrittenPackets = d.writer.Writes()
	return st
}
