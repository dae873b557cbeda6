package flows

import (
	"net"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/netjam/netjam/clock"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fate is what a fakePath does to one written datagram.
type fate struct {
	drop     bool
	dup      bool          // deliver a second copy right after the first
	truncate int           // > 0: deliver only this many bytes
	delay    time.Duration // on the manual clock
	// mutate, if set, changes the delivered copy; foreign, if set, is
	// delivered in addition, right after.
	mutate  func([]byte)
	foreign func([]byte) []byte
}

// written is a datagram as the sender wrote it.
type written struct {
	at   time.Time
	data []byte
}

type inflight struct {
	at   time.Time
	data []byte
}

// fakePath is a one-way, in-memory datagram path on a manual clock, for UDP
// tests: the sending side is a net.Conn, the receiving side a
// net.PacketConn. Its plan decides the fate of each datagram by its write
// index; deliveries are in order of due time, ties in order of writing,
// so what it does is exact and known to the test.
type fakePath struct {
	clk  *clock.Manual
	plan func(i int) fate

	mu      sync.Mutex // guards the fields below; taken before clk's
	cond    *sync.Cond // signalled on writes, deadlines and kicks
	queue   []inflight // sorted by at, stable
	writes  []written
	entered int  // ReadFrom calls
	popped  int  // datagrams returned by ReadFrom
	stopped bool // a read deadline in the past was set
}

func newFakePath(clk *clock.Manual, plan func(i int) fate) *fakePath {
	p := &fakePath{clk: clk, plan: plan}
	if p.plan == nil {
		p.plan = func(int) fate { return fate{} }
	}
	p.cond = sync.NewCond(&p.mu)
	return p
}

func (p *fakePath) enqueue(at time.Time, data []byte) {
	i, _ := slices.BinarySearchFunc(p.queue, at, func(x inflight, t time.Time) int {
		if x.at.After(t) {
			return 1
		}
		return -1 // equal times sort before: stable
	})
	p.queue = slices.Insert(p.queue, i, inflight{at, data})
}

func (p *fakePath) write(b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clk.Now()
	i := len(p.writes)
	p.writes = append(p.writes, written{now, slices.Clone(b)})
	f := p.plan(i)
	if f.drop {
		return
	}
	d := slices.Clone(b)
	if f.truncate > 0 {
		d = d[:f.truncate]
	}
	if f.mutate != nil {
		f.mutate(d)
	}
	at := now.Add(f.delay)
	p.enqueue(at, d)
	if f.dup {
		p.enqueue(at, slices.Clone(d))
	}
	if f.foreign != nil {
		p.enqueue(at, f.foreign(slices.Clone(b)))
	}
	p.cond.Broadcast()
}

// deliverable reports whether a datagram is due. p.mu is held.
func (p *fakePath) deliverable() bool {
	return len(p.queue) > 0 && !p.queue[0].at.After(p.clk.Now())
}

func (p *fakePath) readFrom(b []byte) (int, net.Addr, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.entered++
	for {
		if p.stopped {
			return 0, nil, os.ErrDeadlineExceeded
		}
		if p.deliverable() {
			d := p.queue[0].data
			p.queue = p.queue[1:]
			p.popped++
			return copy(b, d), fakeAddr{}, nil
		}
		p.cond.Wait()
	}
}

// next returns the time of the next event once the simulation is quiet: the
// receiver has handled every datagram it was given and none is due, and the
// flow waits on a timer. It returns false while anything is in progress.
func (p *fakePath) next() (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.deliverable() || (p.popped > 0 && p.entered <= p.popped) {
		return time.Time{}, false
	}
	t, ok := p.clk.Next()
	if !ok {
		return time.Time{}, false
	}
	if len(p.queue) > 0 && p.queue[0].at.Before(t) {
		t = p.queue[0].at
	}
	return t, true
}

// drive runs the simulation, moving the clock from event to event, until
// stop returns true. The wall-clock bound only catches a hung test.
func (p *fakePath) drive(t *testing.T, stop func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !stop() {
		if at, ok := p.next(); ok {
			p.clk.Set(at)
			p.mu.Lock()
			p.cond.Broadcast()
			p.mu.Unlock()
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("simulation stuck at %v", p.clk.Since())
		}
		time.Sleep(20 * time.Microsecond)
	}
}

// sent returns copies of what the sender wrote.
func (p *fakePath) sent() []written {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.writes)
}

type fakeAddr struct{}

func (fakeAddr) Network() string { return "fake" }
func (fakeAddr) String() string  { return "fake" }

// fakeSender is the sending side of a fakePath.
type fakeSender struct{ p *fakePath }

func (s fakeSender) Write(b []byte) (int, error) {
	s.p.write(b)
	return len(b), nil
}
func (fakeSender) Read([]byte) (int, error)         { return 0, os.ErrDeadlineExceeded }
func (fakeSender) Close() error                     { return nil }
func (fakeSender) LocalAddr() net.Addr              { return fakeAddr{} }
func (fakeSender) RemoteAddr() net.Addr             { return fakeAddr{} }
func (fakeSender) SetDeadline(time.Time) error      { return nil }
func (fakeSender) SetReadDeadline(time.Time) error  { return nil }
func (fakeSender) SetWriteDeadline(time.Time) error { return nil }

// fakeReceiver is the receiving side of a fakePath. Only deadlines in the
// past matter, which is all a flow sets.
type fakeReceiver struct{ p *fakePath }

func (r fakeReceiver) ReadFrom(b []byte) (int, net.Addr, error) { return r.p.readFrom(b) }
func (fakeReceiver) WriteTo([]byte, net.Addr) (int, error)      { return 0, net.ErrClosed }
func (fakeReceiver) Close() error                               { return nil }
func (fakeReceiver) LocalAddr() net.Addr                        { return fakeAddr{} }
func (r fakeReceiver) SetDeadline(t time.Time) error            { return r.SetReadDeadline(t) }
func (fakeReceiver) SetWriteDeadline(time.Time) error           { return nil }
func (r fakeReceiver) SetReadDeadline(t time.Time) error {
	r.p.mu.Lock()
	defer r.p.mu.Unlock()
	r.p.stopped = !t.IsZero() && t.Before(time.Now())
	r.p.cond.Broadcast()
	return nil
}

// waitFor polls cond; it fails the test if cond does not hold within a
// generous bound. It synchronizes with the flow's goroutines; it asserts
// nothing about speed.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Microsecond)
	}
}
