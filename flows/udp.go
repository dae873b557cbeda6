package flows

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/netjam/netjam/clock"
)

// MaxPacketSize is the largest UDP payload over IPv4.
const MaxPacketSize = 65507

// UDPSpec describes a constant-bit-rate UDP flow.
type UDPSpec struct {
	// Name identifies the flow in reports.
	Name string
	// FlowID goes in every datagram; the receiver counts a datagram with
	// another id as malformed.
	FlowID uint32
	// Rate is the bit rate of UDP payload, in bit/s; Interval is the time
	// between datagrams. Exactly one of the two is set.
	Rate     uint64
	Interval time.Duration
	// PacketSize is the UDP payload of each datagram, in bytes, from
	// HeaderSize to MaxPacketSize.
	PacketSize int
	// Count bounds the number of datagrams and Duration the time they are
	// sent over (a datagram is sent if its scheduled time is less than
	// Duration after the start). At least one is set; with both, the
	// first bound reached ends the flow.
	Count    int64
	Duration time.Duration
	// Start delays the first datagram by this much after Run is called.
	Start time.Duration
}

// Validate reports what is wrong with s, or nil.
func (s UDPSpec) Validate() error {
	var errs []error
	if s.Name == "" {
		errs = append(errs, errors.New("flows: udp flow without a name"))
	}
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("flows: udp flow %q: "+format, append([]any{s.Name}, args...)...))
	}
	switch {
	case s.Interval < 0:
		bad("negative interval %v", s.Interval)
	case s.Rate == 0 && s.Interval == 0:
		bad("needs a rate or an interval")
	case s.Rate > 0 && s.Interval > 0:
		bad("has both a rate and an interval; set one")
	}
	if s.PacketSize < HeaderSize || s.PacketSize > MaxPacketSize {
		bad("packet size %d is outside [%d, %d]", s.PacketSize, HeaderSize, MaxPacketSize)
	}
	switch {
	case s.Count < 0:
		bad("negative count %d", s.Count)
	case s.Duration < 0:
		bad("negative duration %v", s.Duration)
	case s.Count == 0 && s.Duration == 0:
		bad("needs a count or a duration")
	}
	if s.Start < 0 {
		bad("negative start %v", s.Start)
	}
	return errors.Join(errs...)
}

// Drain bounds: after its last datagram a UDP flow waits for stragglers
// twice the largest delay seen plus drainSlack, at most drainMax.
const (
	drainSlack = 200 * time.Millisecond
	drainMax   = 5 * time.Second
)

// UDPFlow is a constant-bit-rate UDP flow: a sender paced on the flow's
// clock and a receiver that measures one-way delay, jitter, loss,
// reordering and duplication (see sink.receive for the definitions).
//
// Pacing uses one reusable timer, owned by Run's goroutine: datagram k is
// due k intervals after the start (for Rate, k*PacketSize*8/Rate seconds,
// rounded down to the nanosecond, computed from k, not accumulated). A
// datagram sent late goes at once and the next is due at its own time, so
// lateness never drifts the schedule. The receiver is one goroutine reading
// the PacketConn.
type UDPFlow struct {
	spec UDPSpec
	clk  clock.Clock
	send net.Conn
	recv net.PacketConn

	ran atomic.Bool
	// stopping is set before the receiver's read deadline is moved to
	// the past: the read error is then the normal end.
	stopping atomic.Bool

	sent       atomic.Uint64
	sendErrors atomic.Uint64
	// stoppedBytes is what the receiver had when the sender stopped;
	// drained is set when Run waited for the stragglers to the end, so
	// that a datagram missing then is lost, not in flight.
	stoppedBytes atomic.Uint64
	drained      atomic.Bool
	// span is the time the sending schedule covered (see ThroughputBps),
	// in nanoseconds; -1 while sending.
	span atomic.Int64

	sink sink

	mu      sync.Mutex // guards started and start
	started bool
	start   time.Time
}

// NewUDP returns a flow that sends datagrams over send (a connected UDP
// socket) and receives them from recv, on clock clk. recv must carry this
// flow's datagrams only.
func NewUDP(spec UDPSpec, clk clock.Clock, send net.Conn, recv net.PacketConn) (*UDPFlow, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if clk == nil || send == nil || recv == nil {
		return nil, fmt.Errorf("flows: udp flow %q: needs a clock and both connections", spec.Name)
	}
	f := &UDPFlow{spec: spec, clk: clk, send: send, recv: recv}
	f.span.Store(-1)
	f.sink.firstAt.Store(-1)
	f.sink.flowID = spec.FlowID
	f.sink.size = spec.PacketSize
	f.sink.allIn = make(chan struct{}, 1)
	return f, nil
}

// Name returns the flow's name.
func (f *UDPFlow) Name() string { return f.spec.Name }

// offset returns when datagram k is due, after the start.
func (f *UDPFlow) offset(k uint64) time.Duration {
	if f.spec.Interval > 0 {
		if k > uint64(math.MaxInt64/f.spec.Interval) {
			return math.MaxInt64
		}
		return time.Duration(k) * f.spec.Interval
	}
	// k * bits * 1e9 / Rate, in 128 bits.
	hi, lo := bits.Mul64(k, uint64(f.spec.PacketSize)*8)
	if hi != 0 {
		return math.MaxInt64
	}
	hi, lo = bits.Mul64(lo, 1e9)
	if hi >= f.spec.Rate {
		return math.MaxInt64
	}
	q, _ := bits.Div64(hi, lo, f.spec.Rate)
	return time.Duration(min(q, math.MaxInt64))
}

// Run waits for spec.Start, sends the datagrams on schedule, then waits for
// stragglers: until every datagram sent has arrived, or for twice the
// largest delay seen so far plus 200 ms (at most 5 s). It returns nil then,
// once the receiver goroutine has ended.
//
// It returns early with an error wrapping ctx.Err() when ctx is done, and
// with an error when the receiver fails or the send side is closed. A
// failed Write of a datagram is counted (SendErrors) and the flow goes on.
func (f *UDPFlow) Run(ctx context.Context) error {
	if !f.ran.CompareAndSwap(false, true) {
		return fmt.Errorf("flows: %s: Run called twice", f.spec.Name)
	}
	timer := sleeper{clk: f.clk}
	defer timer.stop()
	start := f.clk.Now().Add(f.spec.Start)
	if err := timer.sleepUntil(ctx, start); err != nil {
		return fmt.Errorf("flows: %s: %w", f.spec.Name, err)
	}
	f.sink.base = start
	f.mu.Lock()
	f.started, f.start = true, start
	f.mu.Unlock()

	recvDone := make(chan error, 1)
	go func() { recvDone <- f.receiver() }()
	recvEnded := false
	var recvErr error
	wait := func(t time.Time, allIn <-chan struct{}) error {
		d := t.Sub(f.clk.Now())
		if d <= 0 {
			if ctx.Err() != nil {
				return fmt.Errorf("flows: %s: %w", f.spec.Name, ctx.Err())
			}
			return nil
		}
		select {
		case <-timer.arm(d):
			return nil
		case <-allIn:
			timer.stop()
			return nil
		case <-ctx.Done():
			timer.stop()
			return fmt.Errorf("flows: %s: %w", f.spec.Name, ctx.Err())
		case recvErr = <-recvDone:
			recvEnded = true
			timer.stop()
			return recvErr
		}
	}

	err := f.pace(ctx, start, wait)
	f.stoppedBytes.Store(f.sink.bytes.Load())
	if err == nil {
		err = f.drain(wait)
	}
	if err == nil {
		f.drained.Store(true)
	}
	if !recvEnded {
		f.stopping.Store(true)
		stopReads(f.recv)
		recvErr = <-recvDone
	}
	if err == nil {
		err = recvErr
	}
	return err
}

// waitFunc blocks on Run's one timer until the clock reaches t, or allIn
// (if not nil) fires. It returns an error if ctx is done or the receiver
// goroutine ends first.
type waitFunc func(t time.Time, allIn <-chan struct{}) error

// pace sends the datagrams on schedule. A Write blocked when ctx is done is
// interrupted through the write deadline.
func (f *UDPFlow) pace(ctx context.Context, start time.Time, wait waitFunc) error {
	stop := whenDone(ctx, func() { stopWrites(f.send) })
	defer stop()
	buf := make([]byte, f.spec.PacketSize)
	for k := uint64(0); ; k++ {
		off := f.offset(k)
		if (f.spec.Count > 0 && k >= uint64(f.spec.Count)) || (f.spec.Duration > 0 && off >= f.spec.Duration) {
			f.span.Store(int64(off))
			return nil
		}
		if err := wait(start.Add(off), nil); err != nil {
			f.span.Store(int64(f.clk.Now().Sub(start)))
			return err
		}
		putHeader(buf, f.spec.FlowID, k, f.clk.Now().Sub(start))
		f.sink.issued.Store(k + 1)
		if _, err := f.send.Write(buf); err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) || errors.Is(err, io.ErrClosedPipe) {
				f.span.Store(int64(f.clk.Now().Sub(start)))
				if ctx.Err() != nil {
					return fmt.Errorf("flows: %s: %w", f.spec.Name, ctx.Err())
				}
				return fmt.Errorf("flows: %s: send: %w", f.spec.Name, err)
			}
			f.sendErrors.Add(1)
			continue
		}
		f.sent.Add(1)
	}
}

// drain waits for stragglers after the last datagram.
func (f *UDPFlow) drain(wait waitFunc) error {
	sent := f.sent.Load()
	f.sink.expect.Store(sent)
	// The receiver signals allIn when its count reaches expect; checking
	// after storing expect catches the case where it got there first.
	if sent == 0 || f.sink.packets.Load() >= sent {
		return nil
	}
	maxDelay := time.Duration(f.sink.delay.Snapshot().Max)
	d := min(2*maxDelay+drainSlack, drainMax)
	return wait(f.clk.Now().Add(d), f.sink.allIn)
}

// receiver reads datagrams into the sink until stopping is set.
func (f *UDPFlow) receiver() error {
	buf := make([]byte, 1<<16)
	read := readFunc(f.recv)
	for {
		n, err := read(buf)
		if err != nil {
			if f.stopping.Load() {
				return nil
			}
			return fmt.Errorf("flows: %s: receive: %w", f.spec.Name, err)
		}
		f.sink.receive(buf[:n], f.clk.Now())
	}
}

// ReceiveDropper is a receiving socket that counts the datagrams it
// dropped because its buffer was full (gVisor's receive-buffer overflows,
// the kernel's socket drops): a UDP flow's receiver that has it reports
// them as UDPSummary.ReceiverDrops, apart from the path's losses.
type ReceiveDropper interface {
	ReceiveDrops() uint64
}

// readFunc returns how to read a datagram from pc, without allocating the
// source address when pc can (as *net.UDPConn can).
func readFunc(pc net.PacketConn) func([]byte) (int, error) {
	if r, ok := pc.(interface {
		ReadFromUDPAddrPort([]byte) (int, netip.AddrPort, error)
	}); ok {
		return func(b []byte) (int, error) {
			n, _, err := r.ReadFromUDPAddrPort(b)
			return n, err
		}
	}
	return func(b []byte) (int, error) {
		n, _, err := pc.ReadFrom(b)
		return n, err
	}
}

// Sample returns the datagrams and bytes received so far and the sum of
// their delays.
func (f *UDPFlow) Sample(now time.Time) Sample {
	return Sample{
		Time:     now,
		Type:     TypeUDP,
		Bytes:    f.sink.bytes.Load(),
		Packets:  f.sink.packets.Load(),
		DelaySum: time.Duration(f.sink.delaySum.Load()),
	}
}

// Summary returns what the flow measured so far; see FlowSummary and
// UDPSummary for the definitions. Until Run has waited for the stragglers
// (while the flow runs, or when it was interrupted), the datagrams sent
// after the highest one received are in flight, not lost.
func (f *UDPFlow) Summary() FlowSummary {
	us := &UDPSummary{
		PacketsSent:     f.sent.Load(),
		PacketsReceived: f.sink.packets.Load(),
		JitterMs:        f.sink.jitterNanos() * nsPerMs,
		Reordered:       f.sink.reordered.Load(),
		Duplicates:      f.sink.dups.Load(),
		Malformed:       f.sink.malformed.Load(),
		SendErrors:      f.sendErrors.Load(),
		DelayMs:         f.sink.delay.Snapshot().Scale(nsPerMs),
	}
	missing := us.PacketsSent - min(us.PacketsReceived, us.PacketsSent)
	if d, ok := f.recv.(ReceiveDropper); ok {
		us.ReceiverDrops = min(d.ReceiveDrops(), missing)
		missing -= us.ReceiverDrops
	}
	if !f.drained.Load() {
		// Sequence numbers count datagrams handed to Write, failed
		// ones included; those after the highest received are the
		// tail still on its way.
		issued := f.sink.issued.Load()
		tail := issued - min(f.sink.highestSeq.Load(), issued)
		us.InFlight = min(tail, missing)
	}
	us.Lost = missing - us.InFlight
	if us.PacketsSent > 0 {
		us.LossRatio = float64(us.Lost) / float64(us.PacketsSent)
	}
	bytes := f.sink.bytes.Load()
	var afterStop uint64
	if f.span.Load() >= 0 {
		afterStop = bytes - min(f.stoppedBytes.Load(), bytes)
	}
	return FlowSummary{
		Name:           f.spec.Name,
		Type:           TypeUDP,
		ThroughputBps:  arrivalRate(bytes, uint64(f.spec.PacketSize), f.sink.firstAt.Load(), f.sink.lastAt.Load()),
		BytesAfterStop: afterStop,
		UDPSummary:     us,
	}
}
