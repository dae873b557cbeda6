package stack

import (
	"crypto/sha256"
	"encoding/binary"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip"

	"github.com/netjam/netjam/clock"
)

// tcpipClock adapts a clock.Clock to gVisor's tcpip.Clock, so that every
// timer of the stack (retransmission, delayed close, reassembly, rate
// limiting) runs on the run's one clock, and a Manual clock drives gVisor in
// tests exactly as it drives the path.
type tcpipClock struct {
	c clock.Clock
	// base is c's time when the adapter was made; monoBase is the
	// monotonic reading reported then. gVisor compares MonotonicTime
	// values with the zero value to mean "never", so readings start at
	// base's Unix time (far from zero for clock.Manual's Epoch and for the
	// wall clock) rather than at 0.
	base     time.Time
	monoBase tcpip.MonotonicTime
	// strict, on a virtual clock, makes every monotonic reading at least
	// 1 ns after the one before (last), as a real clock's are. On a
	// virtual clock a whole window of segments leaves at one instant,
	// and gVisor's RACK knows the order in which segments were sent only
	// from their transmit times, breaking ties by sequence (RFC 8985's
	// rule, which third_party/gvisor/patches/0020 restores): a
	// retransmission sent just after new data, at the same instant,
	// counted as sent before it, and was declared lost when the new data
	// was SACKed and its own ACK, due at the same instant, had not yet
	// been processed (87 retransmissions for 54 losses in
	// emulator.TestVirtualLossRetransmitsOnce, seed 1, without this; 54
	// with it). The parts of one large segment keep one transmit time,
	// which is right: they leave in sequence order.
	strict bool
	last   atomic.Int64 // nanoseconds of the last reading, when strict
}

var _ tcpip.Clock = (*tcpipClock)(nil)

// tcpipClockOf returns the tcpip.Clock for c. The real clock maps to
// gVisor's own standard clock, which reads the same wall and monotonic time
// but more cheaply (gVisor reads its clock several times per segment: the
// adapter cost a tenth of the lab's CPU at 1 Gbit/s).
func tcpipClockOf(c clock.Clock) tcpip.Clock {
	if _, ok := c.(clock.Real); ok {
		return tcpip.NewStdClock()
	}
	return newTCPIPClock(c)
}

func newTCPIPClock(c clock.Clock) *tcpipClock {
	now := c.Now()
	_, virtual := c.(*clock.Virtual)
	return &tcpipClock{c: c, base: now, monoBase: tcpip.MonotonicTime{}.Add(time.Duration(now.UnixNano())), strict: virtual}
}

// Now implements tcpip.Clock.
func (t *tcpipClock) Now() time.Time { return t.c.Now() }

// NowMonotonic implements tcpip.Clock. clock.Clock's Now never goes back,
// and with the real clock Sub uses Go's monotonic reading, so the result is
// monotonic as gVisor requires.
func (t *tcpipClock) NowMonotonic() tcpip.MonotonicTime {
	d := t.c.Now().Sub(t.base)
	if !t.strict {
		return t.monoBase.Add(d)
	}
	for {
		last := t.last.Load()
		n := max(int64(d), last+1)
		if t.last.CompareAndSwap(last, n) {
			return t.monoBase.Add(time.Duration(n))
		}
	}
}

// AfterFunc implements tcpip.Clock. A clock.Timer already has the method
// set of tcpip.Timer (Stop reporting whether it was armed, Reset).
func (t *tcpipClock) AfterFunc(d time.Duration, f func()) tcpip.Timer {
	return t.c.AfterFunc(d, f)
}

// seedStream derives the 32-byte seed of one named random stream of a host
// from the host's seed, so the streams are independent of each other.
func seedStream(seed uint64, name string) [32]byte {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], seed)
	h := sha256.New()
	h.Write(b[:])
	h.Write([]byte(name))
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// lockedSource is the math/rand.Source gVisor takes as
// stack.Options.RandSource (its "insecure" RNG: hash seeds, jitter). gVisor
// calls it from many goroutines, so it is guarded by a mutex, as gVisor's
// own default source is.
type lockedSource struct {
	mu  sync.Mutex // guards pcg
	pcg *rand.PCG
}

func newLockedSource(seed [32]byte) *lockedSource {
	return &lockedSource{pcg: rand.NewPCG(binary.LittleEndian.Uint64(seed[:8]), binary.LittleEndian.Uint64(seed[8:16]))}
}

// Int63 implements math/rand.Source.
func (s *lockedSource) Int63() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return int64(s.pcg.Uint64() >> 1)
}

// Seed implements math/rand.Source.
func (s *lockedSource) Seed(seed int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pcg.Seed(uint64(seed), 0)
}

// lockedReader is the io.Reader gVisor takes as stack.Options.SecureRNG:
// the source of initial sequence number and timestamp secrets and of
// ephemeral ports. In an emulator reproducibility matters and secrecy does
// not, so it is a ChaCha8 stream keyed from the host's seed.
type lockedReader struct {
	mu sync.Mutex // guards c
	c  *rand.ChaCha8
}

func newLockedReader(seed [32]byte) *lockedReader { return &lockedReader{c: rand.NewChaCha8(seed)} }

// Read implements io.Reader; it always fills p.
func (r *lockedReader) Read(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.c.Read(p)
}
