package stack

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/netjam/netjam/clock"
	"github.com/netjam/netjam/hostcfg"
	"github.com/netjam/netjam/impair"
	"github.com/netjam/netjam/netif"
	"go.uber.org/goleak"
)

// TestMain checks that no goroutine outlives the tests: every Host's
// Close must have stopped gVisor's processors and our own goroutines.
// Nothing is ignored. gVisor's log lines (martian packets the tests send
// on purpose) are discarded, as the command routes them.
func TestMain(m *testing.M) {
	RouteGVisorLog(nil)
	goleak.VerifyTestMain(m)
}

// family describes the addresses of a test pair.
type family struct {
	name string
	a, b netip.Prefix
}

var (
	v4 = family{"ipv4", netip.MustParsePrefix("10.0.0.1/24"), netip.MustParsePrefix("10.0.0.2/24")}
	v6 = family{"ipv6", netip.MustParsePrefix("fd00::1/64"), netip.MustParsePrefix("fd00::2/64")}
)

// wire is one direction of an in-memory link: it concatenates the slices
// of each packet into a buffer (the slices are only valid during Output)
// and injects the packet into the far host, on the sending goroutine.
// drop, if set, sees every packet first and may drop it.
type wire struct {
	to   atomic.Pointer[Host]
	drop func(pkt []byte) bool
	pool sync.Pool

	ch     chan *[]byte // set by async
	mu     sync.RWMutex // guards sends on ch against its close
	closed atomic.Bool
	full   atomic.Int64 // packets dropped on a full ch
}

func newWire(drop func([]byte) bool) *wire {
	w := &wire{drop: drop}
	w.pool.New = func() any { b := make([]byte, 0, 65536); return &b }
	return w
}

// async makes the wire deliver on a goroutine of its own, through a
// bounded channel, as the emulator's Runners do; a full channel drops. It
// returns the function that stops the goroutine.
func (w *wire) async(n int) (stop func()) {
	ch := make(chan *[]byte, n)
	done := make(chan struct{})
	w.ch = ch
	go func() {
		defer close(done)
		for bp := range ch {
			w.to.Load().Inject(*bp)
			w.pool.Put(bp)
		}
	}()
	return func() { w.closed.Store(true); w.mu.Lock(); close(ch); w.mu.Unlock(); <-done }
}

// copyOf returns pkt's bytes in a buffer of w's pool.
func (w *wire) copyOf(pkt [][]byte) *[]byte {
	bp := w.pool.Get().(*[]byte)
	b := (*bp)[:0]
	for _, s := range pkt {
		b = append(b, s...)
	}
	*bp = b
	return bp
}

func (w *wire) output(pkt [][]byte) {
	if w.ch != nil {
		bp := w.copyOf(pkt)
		b := *bp
		if w.drop != nil && w.drop(b) {
			w.pool.Put(bp)
			return
		}
		w.mu.RLock()
		defer w.mu.RUnlock()
		if w.closed.Load() {
			return
		}
		select {
		case w.ch <- bp:
		default:
			w.full.Add(1)
		}
		return
	}
	bp := w.copyOf(pkt)
	if b := *bp; (w.drop == nil || !w.drop(b)) && w.to.Load() != nil {
		w.to.Load().Inject(b)
	}
	w.pool.Put(bp)
}

// outputHeld is output for a sender that may be held back (a host's
// OutputHeld): on a full channel it waits for room instead of dropping,
// as a direction's held sender does.
func (w *wire) outputHeld(pkt [][]byte, _ netif.GSO) {
	if w.ch == nil {
		w.output(pkt)
		return
	}
	bp := w.copyOf(pkt)
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed.Load() {
		w.pool.Put(bp)
		return
	}
	w.ch <- bp
}

// pairConfig is what varies between test pairs.
type pairConfig struct {
	fam    family
	mtu    int
	sack   bool
	clk    clock.Clock
	dropAB func([]byte) bool // on packets from a to b
	dropBA func([]byte) bool // on packets from b to a
	async  int               // >0: deliver on a goroutine per direction, through a channel this long
}

// newPair returns two hosts wired back to back, closed at the end of the
// test.
func newPair(t testing.TB, pc pairConfig) (a, b *Host) {
	t.Helper()
	if pc.mtu == 0 {
		pc.mtu = 1500
	}
	if pc.clk == nil {
		pc.clk = clock.Real{}
	}
	ab, ba := newWire(pc.dropAB), newWire(pc.dropBA)
	mk := func(name string, addr netip.Prefix, out *wire, seed uint64) *Host {
		h, err := NewHost(HostConfig{
			Name: name, Addrs: []netip.Prefix{addr}, MTU: pc.mtu, Clock: pc.clk,
			Seed: seed, SACK: pc.sack, Output: out.output,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		return h
	}
	a = mk("a", pc.fam.a, ab, 1)
	b = mk("b", pc.fam.b, ba, 2)
	ab.to.Store(b)
	ba.to.Store(a)
	if pc.async > 0 {
		// Registered after the hosts' cleanups, so run before them.
		t.Cleanup(ab.async(pc.async))
		t.Cleanup(ba.async(pc.async))
	}
	return a, b
}

// payload returns n deterministic pseudo-random bytes.
func payload(n int, seed uint64) []byte {
	b := make([]byte, n)
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	rand.NewChaCha8(key).Read(b)
	return b
}

// result is what the receiving side of a transfer saw.
type result struct {
	sum  [32]byte
	n    int64
	info netif.TCPInfo
	err  error
}

// transfer sends data from a to b over one TCP connection (a dials b on
// port) and checks that b receives exactly data. It returns the sender's
// and the receiver's connection info once the receiver has seen the end of
// the stream.
func transfer(t *testing.T, a, b *Host, raddr netip.AddrPort, data []byte, o hostcfg.TCPOptions) (sender, receiver netif.TCPInfo) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := b.ListenTCP(raddr.Port(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	done := make(chan result, 1)
	go func() {
		c, err := l.Accept(ctx)
		if err != nil {
			done <- result{err: err}
			return
		}
		defer c.Close()
		h := sha256.New()
		n, err := io.Copy(h, c)
		var r result
		copy(r.sum[:], h.Sum(nil))
		r.n, r.err, r.info = n, err, c.Info()
		done <- r
	}()
	c, err := a.DialTCP(ctx, raddr, o)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Write in a goroutine so a stalled connection fails the test with
	// its state rather than hanging it; Host.Close in the cleanup ends
	// the Write.
	wrote := make(chan error, 1)
	go func() {
		_, err := c.Write(data)
		if err == nil {
			err = c.CloseWrite()
		}
		wrote <- err
	}()
	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
		t.Fatalf("transfer did not finish: sender %+v; host %+v", c.Info(), a.Stats())
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	if want := sha256.Sum256(data); r.n != int64(len(data)) || r.sum != want {
		t.Fatalf("received %d bytes with sha256 %x, want %d bytes with %x", r.n, r.sum, len(data), want)
	}
	return c.Info(), r.info
}

// acceptAndDrain accepts one connection on l and copies all it receives
// into w; the channel gets the number of bytes, or -1 when Accept failed.
func acceptAndDrain(ctx context.Context, l *TCPListener, w io.Writer) <-chan int64 {
	n := make(chan int64, 1)
	go func() {
		c, err := l.Accept(ctx)
		if err != nil {
			n <- -1
			return
		}
		defer c.Close()
		got, _ := io.CopyBuffer(w, c, make([]byte, 256<<10))
		n <- got
	}()
	return n
}

// waitFor polls cond until it holds or a generous bound passes; it
// synchronizes with gVisor's goroutines and asserts nothing about speed.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

var realClock clock.Clock = clock.Real{}

// runnerPair is two hosts joined by an uplink and a downlink Runner, as
// the emulator joins them.
type runnerPair struct {
	a, b     *Host
	up, down *impair.Runner
	stop     func() // closes the hosts, then the runners; idempotent
}

// newRunnerPair joins a client (v4.a, seed hostSeed) and a server (v4.b,
// hostSeed+1) of mtu on clk through Runners of the configs up and down.
func newRunnerPair(t *testing.T, clk clock.Clock, mtu int, hostSeed uint64, up, down impair.Config) *runnerPair {
	t.Helper()
	pool := impair.NewPool(mtu)
	rp := &runnerPair{}
	direction := func(cfg impair.Config, to **Host) *impair.Runner {
		r, err := impair.NewRunner(cfg, clk, func(_ time.Time, p *impair.Packet) {
			(*to).Inject(p.Data)
			p.Release()
		})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	rp.up, rp.down = direction(up, &rp.b), direction(down, &rp.a)
	output := func(r *impair.Runner) func([][]byte) {
		return func(pkt [][]byte) {
			n := 0
			for _, s := range pkt {
				n += len(s)
			}
			p := pool.Get(n)
			n = 0
			for _, s := range pkt {
				n += copy(p.Data[n:], s)
			}
			r.Send(p)
		}
	}
	mk := func(name string, addr netip.Prefix, out func([][]byte), seed uint64) *Host {
		h, err := NewHost(HostConfig{Name: name, Addrs: []netip.Prefix{addr}, MTU: mtu, Clock: clk, Seed: seed, SACK: true, Output: out})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	rp.a = mk("client", v4.a, output(rp.up), hostSeed)
	rp.b = mk("server", v4.b, output(rp.down), hostSeed+1)
	ctx, cancel := context.WithCancel(context.Background())
	rp.up.Start(ctx)
	rp.down.Start(ctx)
	var once sync.Once
	// Hosts first, so nothing is sent into a closed runner; then the
	// runners, which may still deliver to the closed hosts (dropped).
	rp.stop = func() {
		once.Do(func() {
			rp.a.Close()
			rp.b.Close()
			cancel()
			rp.up.Close()
			rp.down.Close()
		})
	}
	t.Cleanup(rp.stop)
	return rp
}
