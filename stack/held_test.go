package stack

import (
	"bytes"
	"context"
	"net/netip"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/netjam/netjam/clock"
	"github.com/netjam/netjam/hostcfg"
	"github.com/netjam/netjam/netif"
)

// goid returns the calling goroutine's number, read from its stack's
// first line ("goroutine 7 [running]:"): tests only.
func goid() int64 {
	var b [64]byte
	f := bytes.Fields(b[:runtime.Stack(b[:], false)])
	n, _ := strconv.ParseInt(string(f[1]), 10, 64)
	return n
}

// heldWire is one direction between two hosts as the lab has it: a
// bounded channel into the far host, injected on a goroutine of its own
// (the far host's inbox). Held packets wait for room in it; the others
// are dropped when it is full, counted.
type heldWire struct {
	to       *Host
	ch       chan []byte
	inbox    atomic.Int64 // the goroutine injecting into to
	from     *heldWire    // the wire into the sending host: its inbox must never be held
	held     atomic.Uint64
	tcp      atomic.Uint64 // TCP packets not held
	resets   atomic.Uint64 // of which resets
	full     atomic.Uint64
	onInbox  atomic.Uint64 // held packets sent on the sender's own inbox goroutine
	stop     chan struct{}
	finished chan struct{}
}

func newHeldWire(n int) *heldWire {
	return &heldWire{ch: make(chan []byte, n), stop: make(chan struct{}), finished: make(chan struct{})}
}

func (w *heldWire) run() {
	defer close(w.finished)
	w.inbox.Store(goid())
	for {
		select {
		case b := <-w.ch:
			w.to.Inject(b)
		case <-w.stop:
			return
		}
	}
}

func (w *heldWire) output(pkt [][]byte) {
	b := bytes.Join(pkt, nil)
	if tcpHeadersLen(b, len(b)) > 0 {
		w.tcp.Add(1)
		if ipLen := int(b[0]&0x0f) * 4; b[ipLen+13]&0x04 != 0 {
			w.resets.Add(1)
		}
	}
	select {
	case w.ch <- b:
	default:
		w.full.Add(1)
	}
}

func (w *heldWire) outputHeld(pkt [][]byte, _ netif.GSO) {
	w.held.Add(1)
	if goid() == w.from.inbox.Load() {
		w.onInbox.Add(1)
	}
	b := bytes.Join(pkt, nil)
	select {
	case w.ch <- b:
	case <-w.stop:
	}
}

// TestHostHoldsBackOnlyItsConnections: with OutputHeld, a host's TCP
// segments wait for room on a wire of 8 packets instead of being dropped,
// and a 4 MiB transfer arrives whole with nothing dropped; none is ever
// sent on the goroutine that injects into the host (where a wait could
// close a cycle). A reset, which gVisor sends from Inject, goes to
// Output.
func TestHostHoldsBackOnlyItsConnections(t *testing.T) {
	ab, ba := newHeldWire(8), newHeldWire(8)
	ab.from, ba.from = ba, ab
	mk := func(name string, addr netip.Prefix, out *heldWire) *Host {
		h, err := NewHost(HostConfig{Name: name, Addrs: []netip.Prefix{addr}, MTU: 1500, Clock: clock.Real{},
			Seed: 1, SACK: true, Output: out.output, OutputHeld: out.outputHeld})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	a, b := mk("a", v4.a, ab), mk("b", v4.b, ba)
	ab.to, ba.to = b, a
	go ab.run()
	go ba.run()
	defer func() {
		// The wires first: a held sender waits for them, and a host's
		// Close for its senders.
		close(ab.stop)
		close(ba.stop)
		<-ab.finished
		<-ba.finished
		a.Close()
		b.Close()
	}()
	for ab.inbox.Load() == 0 || ba.inbox.Load() == 0 {
		runtime.Gosched()
	}
	transfer(t, a, b, netip.AddrPortFrom(v4.b.Addr(), 5001), payload(4<<20, 5), hostcfg.TCPOptions{})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if c, err := a.DialTCP(ctx, netip.AddrPortFrom(v4.b.Addr(), 5999), hostcfg.TCPOptions{}); err == nil {
		c.Close()
		t.Error("a dial to a closed port succeeded")
	}
	for _, w := range []*heldWire{ab, ba} {
		if w.full.Load() > 0 || w.onInbox.Load() > 0 {
			t.Errorf("%d packets dropped on a full wire, %d held on the sender's inbox goroutine; want none", w.full.Load(), w.onInbox.Load())
		}
		if w.held.Load() == 0 {
			t.Error("no TCP segment went to OutputHeld")
		}
		if w.tcp.Load() != w.resets.Load() {
			t.Errorf("%d TCP packets not held, of which %d resets; want resets only", w.tcp.Load(), w.resets.Load())
		}
	}
	if ba.resets.Load() == 0 {
		t.Error("no reset for the closed port went to Output")
	}
}
