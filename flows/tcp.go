package flows

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/netjam/netjam/clock"
	"github.com/netjam/netjam/stats"
)

// TCPInfo is what the sending TCP stack reports about a connection. The
// emulator fills it from gVisor's TCPInfoOption and endpoint stats, or from
// Linux's TCP_INFO. Counters are cumulative over the connection's life.
type TCPInfo struct {
	SRTT, RTTVar, RTO time.Duration
	// Cwnd and Ssthresh are in segments.
	Cwnd, Ssthresh                         uint32
	Retransmits, FastRetransmits, Timeouts uint64
	// SegmentsSent counts every segment the sender put on the wire,
	// retransmissions and pure ACKs included: the stall detector's sign
	// of life.
	SegmentsSent uint64
}

// A Stall is an interval in which a TCP flow had data to send and sent
// nothing for longer than StallThreshold. No path netjam emulates
// explains one: even a path that loses everything sees the sender's
// retransmissions, spaced by its retransmission timeout. A stall is a
// defect of the sending stack (a congestion window stuck at zero with
// no timer armed, say), and the flow's figures mean little after it.
type Stall struct {
	// At is when the sender last sent, relative to the flow's start.
	At time.Duration
	// Info is the sender's state when the stall was detected.
	Info TCPInfo
}

// StallThreshold is how long a sender with data to send may send nothing
// before it is stalled: max(1 s, 3 RTO). A retransmission timer that
// works fires within one RTO (the current one, backoff included); three
// leave room for an RTO that grows while the sender waits, and the 1 s
// floor for sampling and scheduling on a busy machine.
func StallThreshold(rto time.Duration) time.Duration {
	return max(time.Second, 3*rto)
}

// TCPBulkSpec describes a bulk TCP transfer.
type TCPBulkSpec struct {
	// Name identifies the flow in reports; it also seeds its payload.
	Name string
	// Size is the number of bytes to send. Zero means sending for
	// Duration instead; exactly one of the two is set.
	Size     int64
	Duration time.Duration
	// Start delays the first byte by this much after Run is called.
	Start time.Duration
	// InfoInterval is how often the sender's TCPInfo is sampled for the
	// RTT distribution and the congestion window; zero means
	// DefaultInfoInterval.
	InfoInterval time.Duration
	// Connect is how long the connection's handshake took, measured by
	// whoever connected the two ends; it is reported as ConnectS.
	Connect time.Duration
	// OnStall, if not nil, is called from Run's goroutine when a stall
	// begins (see Stall); the emulator logs a warning with it.
	OnStall func(Stall)
}

// DefaultInfoInterval is the default TCPBulkSpec.InfoInterval: a few
// samples per RTT on the paths netjam emulates, for a negligible cost.
const DefaultInfoInterval = 10 * time.Millisecond

// Validate reports what is wrong with s, or nil.
func (s TCPBulkSpec) Validate() error {
	var errs []error
	if s.Name == "" {
		errs = append(errs, errors.New("flows: tcp flow without a name"))
	}
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("flows: tcp flow %q: "+format, append([]any{s.Name}, args...)...))
	}
	switch {
	case s.Size < 0:
		bad("negative size %d", s.Size)
	case s.Duration < 0:
		bad("negative duration %v", s.Duration)
	case s.Size == 0 && s.Duration == 0:
		bad("needs a size or a duration")
	case s.Size > 0 && s.Duration > 0:
		bad("has both a size and a duration; set one")
	}
	if s.Start < 0 {
		bad("negative start %v", s.Start)
	}
	if s.InfoInterval < 0 {
		bad("negative info interval %v", s.InfoInterval)
	}
	return errors.Join(errs...)
}

// TCPBulk is a bulk transfer over one TCP connection: a sender writes the
// flow's pattern (Size bytes, or for Duration) and a receiver reads and
// verifies every byte at the other end.
//
// Run owns three goroutines: its own, which waits for the end and samples
// TCPInfo and the clock; the sender; and the receiver. It joins the other
// two before it returns.
type TCPBulk struct {
	spec TCPBulkSpec
	clk  clock.Clock
	send net.Conn
	recv net.Conn
	info func() TCPInfo
	pat  *pattern

	ran atomic.Bool
	// resetAt is when Reset ended the connection, in nanoseconds since
	// start; 0 when it did not. Errors of the two sides after it are the
	// reset's, the flow's normal end.
	resetAt atomic.Int64
	// stopSend is set when Duration is over, before the send side's
	// write deadline is moved to the past: the sender then takes the
	// deadline error of its Write as the normal end of the stream.
	stopSend atomic.Bool

	sent     atomic.Uint64
	received atomic.Uint64
	// lastByte is when the receiver last read data, in nanoseconds since
	// start. completion is lastByte at the time the receiver had
	// everything; complete is set after it.
	lastByte   atomic.Int64
	completion atomic.Int64
	complete   atomic.Bool
	// firstByte is when the receiver first read data (ns since start,
	// -1 before), and firstBytes how much that read took: see
	// arrivalRate. stoppedBytes is what the receiver had read when the
	// sender stopped writing, stopped set after it.
	firstByte    atomic.Int64
	firstBytes   atomic.Uint64
	stoppedBytes atomic.Uint64
	stopped      atomic.Bool

	rtt stats.Histogram // SRTT samples, in nanoseconds

	mu      sync.Mutex // guards the fields below
	started bool       // start is set
	ended   bool       // end is set
	start   time.Time  // the first write
	end     time.Time  // Run's end
	last    TCPInfo    // the latest info sample
	cwndMax uint32

	// The stall detector's state, on the clock of Run's goroutine (see
	// detectStall). alive is when the sender was last seen sending, or
	// had nothing to send; stalled is true from a stall's detection to
	// the next segment sent; stalls and stalledFor count the stalls
	// that ended, each counted from alive to the segment that ended it.
	alive      time.Time
	stalled    bool
	stalls     int
	stalledFor time.Duration
}

// writeChunk is the most the sender hands to one Write. Any size works, as a
// Write cut short by the duration's end is accounted for exactly; 32 KiB
// keeps the syscall (or netstack call) count low.
const writeChunk = 32 << 10

// readBuf is the receiver's buffer size: larger than any TCP segment so
// that one Read takes what the stack has.
const readBuf = 64 << 10

// NewTCPBulk returns a flow that sends over send and receives from recv,
// the two ends of one connection, on clock clk. info, which may be nil,
// reports the sending stack's state of the connection; it is called from
// Run's goroutine only, every spec.InfoInterval and once at the end, after
// the send side may have been half-closed.
func NewTCPBulk(spec TCPBulkSpec, clk clock.Clock, send, recv net.Conn, info func() TCPInfo) (*TCPBulk, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if clk == nil || send == nil || recv == nil {
		return nil, fmt.Errorf("flows: tcp flow %q: needs a clock and both connections", spec.Name)
	}
	if spec.InfoInterval == 0 {
		spec.InfoInterval = DefaultInfoInterval
	}
	f := &TCPBulk{spec: spec, clk: clk, send: send, recv: recv, info: info, pat: newPattern(spec.Name)}
	f.firstByte.Store(-1)
	return f, nil
}

// Name returns the flow's name.
func (f *TCPBulk) Name() string { return f.spec.Name }

// Run waits for spec.Start, then sends and receives until the receiver has
// everything: Size bytes, or, with Duration, everything the sender wrote
// until Duration was over and it half-closed the connection. It returns
// nil then, after both goroutines have ended.
//
// It returns early, with an error, when the receiver reads a byte that is
// not what was sent (a *DataError), when either side fails, or when ctx is
// done (an error wrapping ctx.Err()). It then stops the other side through
// deadlines in the past and waits for it. What was measured stays available
// in Summary.
func (f *TCPBulk) Run(ctx context.Context) error {
	if !f.ran.CompareAndSwap(false, true) {
		return fmt.Errorf("flows: %s: Run called twice", f.spec.Name)
	}
	tick := sleeper{clk: f.clk}
	defer tick.stop()
	if err := tick.sleepUntil(ctx, f.clk.Now().Add(f.spec.Start)); err != nil {
		return fmt.Errorf("flows: %s: %w", f.spec.Name, err)
	}
	start := f.clk.Now()
	f.mu.Lock()
	f.started, f.start, f.alive = true, start, start
	f.mu.Unlock()

	results := make(chan error, 2)
	go func() { results <- f.sender() }()
	go func() { results <- f.receiver(start) }()

	var durC <-chan time.Time
	if f.spec.Size == 0 {
		dur := f.clk.NewTimer(f.spec.Duration)
		defer dur.Stop()
		durC = dur.C()
	}
	var tickC <-chan time.Time
	if f.info != nil {
		tickC = tick.arm(f.spec.InfoInterval)
	}
	done := ctx.Done()
	var err error
	fail := func(e error) {
		if err == nil {
			err = e
			stopWrites(f.send)
			stopReads(f.recv)
		}
	}
	for pending := 2; pending > 0; {
		select {
		case e := <-results:
			pending--
			if e != nil && f.resetAt.Load() == 0 {
				fail(e)
			}
		case <-done:
			done = nil
			fail(fmt.Errorf("flows: %s: %w", f.spec.Name, ctx.Err()))
		case <-durC:
			durC = nil
			f.stopSend.Store(true)
			stopWrites(f.send)
		case <-tickC:
			f.sampleInfo()
			tickC = tick.arm(f.spec.InfoInterval)
		}
	}
	if f.info != nil {
		tick.stop()
		f.sampleInfo()
	}
	f.mu.Lock()
	f.ended, f.end = true, f.clk.Now()
	f.mu.Unlock()
	return err
}

// Reset ends the flow's connection now with a RST both ways, as a
// scenario's timeline asks (reset: {flow: NAME}), the way toxiproxy's
// reset_peer does: both ends abort, so neither waits for the other's RST
// across the path, and the flow ends there. Run then returns nil, and the
// summary says when (ResetAtS). It reports false, and does nothing, when
// the flow has not started, has ended, or was reset already, or when its
// connections cannot abort (a net.Conn with neither Reset nor SetLinger).
func (f *TCPBulk) Reset() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.started || f.ended || f.resetAt.Load() != 0 {
		return false
	}
	if !canReset(f.send) || !canReset(f.recv) {
		return false
	}
	f.resetAt.Store(max(int64(f.clk.Now().Sub(f.start)), 1))
	resetConn(f.send)
	resetConn(f.recv)
	return true
}

// canReset reports whether c can end itself with a RST.
func canReset(c net.Conn) bool {
	switch c.(type) {
	case interface{ Reset() error }, interface{ SetLinger(int) error }:
		return true
	}
	return false
}

// resetConn ends c with a RST: its own Reset (a netstack connection's
// abort), or SO_LINGER 0 and Close (a kernel socket's).
func resetConn(c net.Conn) {
	switch r := c.(type) {
	case interface{ Reset() error }:
		r.Reset()
	case interface{ SetLinger(int) error }:
		r.SetLinger(0)
		c.Close()
	}
}

// detectStall updates the stall detector with the info sample i, taken at
// now, and returns the stall that began, if one did. It is called with
// f.mu held. The sender has data to send while the receiver has read less
// than the sender wrote (the receiver reads at once whatever arrives); a
// segment sent (i.SegmentsSent grows) is a sign of life. A sample without
// SegmentsSent (an info function that cannot tell) detects nothing.
func (f *TCPBulk) detectStall(now time.Time, i TCPInfo) (begun *Stall) {
	prev := f.last.SegmentsSent
	switch {
	case i.SegmentsSent != prev || f.sent.Load() <= f.received.Load():
		if f.stalled {
			f.stalled = false
			f.stalls++
			f.stalledFor += now.Sub(f.alive)
		}
		f.alive = now
	case !f.stalled && i.SegmentsSent > 0 && now.Sub(f.alive) > StallThreshold(i.RTO):
		f.stalled = true
		begun = &Stall{At: f.alive.Sub(f.start), Info: i}
	}
	return begun
}

// sender writes the pattern until Size bytes are written or stopSend is
// set, then half-closes the send side.
func (f *TCPBulk) sender() error {
	var off int64
	for !f.stopSend.Load() {
		n := int64(writeChunk)
		if f.spec.Size > 0 {
			if off >= f.spec.Size {
				break
			}
			n = min(n, f.spec.Size-off)
		}
		w, err := f.send.Write(f.pat.at(off, int(n)))
		off += int64(w)
		f.sent.Add(uint64(w))
		if err != nil {
			if f.stopSend.Load() && isTimeout(err) {
				break // Duration is over: the normal end
			}
			return fmt.Errorf("flows: %s: send: %w", f.spec.Name, err)
		}
	}
	f.stoppedBytes.Store(f.received.Load())
	f.stopped.Store(true)
	if err := halfClose(f.send); err != nil {
		return fmt.Errorf("flows: %s: closing the send side: %w", f.spec.Name, err)
	}
	return nil
}

// receiver reads and verifies the stream until it has Size bytes, or,
// without Size, until EOF.
func (f *TCPBulk) receiver(start time.Time) error {
	buf := make([]byte, readBuf)
	size := f.spec.Size
	var off int64
	for size == 0 || off < size {
		b := buf
		if size > 0 && size-off < int64(len(b)) {
			b = b[:size-off]
		}
		n, err := f.recv.Read(b)
		if n > 0 {
			if i := f.pat.verify(off, b[:n]); i >= 0 {
				f.received.Add(uint64(i))
				at := off + int64(i)
				return &DataError{Flow: f.spec.Name, Offset: at, Got: b[i], Want: f.pat.byteAt(at)}
			}
			off += int64(n)
			at := int64(f.clk.Now().Sub(start))
			if f.firstByte.Load() < 0 {
				f.firstBytes.Store(uint64(n))
				f.firstByte.Store(at)
			}
			f.received.Add(uint64(n))
			f.lastByte.Store(at)
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				if size == 0 {
					break
				}
				return fmt.Errorf("flows: %s: connection closed after %d of %d bytes", f.spec.Name, off, size)
			}
			return fmt.Errorf("flows: %s: receive: %w", f.spec.Name, err)
		}
	}
	f.completion.Store(f.lastByte.Load())
	f.complete.Store(true)
	return nil
}

// sampleInfo takes one TCPInfo sample.
func (f *TCPBulk) sampleInfo() {
	i := f.info()
	if i.SRTT > 0 { // zero until the stack has measured an RTT
		f.rtt.RecordDuration(i.SRTT)
	}
	f.mu.Lock()
	begun := f.detectStall(f.clk.Now(), i)
	f.last = i
	f.cwndMax = max(f.cwndMax, i.Cwnd)
	f.mu.Unlock()
	if begun != nil && f.spec.OnStall != nil {
		f.spec.OnStall(*begun)
	}
}

// Sample returns the bytes received so far and the latest cwnd and SRTT.
func (f *TCPBulk) Sample(now time.Time) Sample {
	f.mu.Lock()
	cwnd, srtt := f.last.Cwnd, f.last.SRTT
	f.mu.Unlock()
	return Sample{Time: now, Type: TypeTCP, Bytes: f.received.Load(), Cwnd: cwnd, SRTT: srtt}
}

// Summary returns what the flow measured so far; see FlowSummary and
// TCPSummary for the definitions.
func (f *TCPBulk) Summary() FlowSummary {
	f.mu.Lock()
	ended, end, last, cwndMax := f.ended, f.end, f.last, f.cwndMax
	stalls, stalledFor := f.stalls, f.stalledFor
	if f.stalled {
		// A stall still going on counts, up to the end of Run (or now).
		stalls++
		upTo := end
		if !ended {
			upTo = f.clk.Now()
		}
		stalledFor += upTo.Sub(f.alive)
	}
	f.mu.Unlock()
	ts := &TCPSummary{
		BytesSent:       f.sent.Load(),
		BytesReceived:   f.received.Load(),
		Retransmissions: last.Retransmits,
		FastRetransmits: last.FastRetransmits,
		Timeouts:        last.Timeouts,
		RTTMs:           f.rtt.Snapshot().Scale(nsPerMs),
		CwndMax:         cwndMax,
		Stalls:          stalls,
		StalledS:        stalledFor.Seconds(),
		Size:            uint64(f.spec.Size),
	}
	ts.ConnectS = f.spec.Connect.Seconds()
	if at := f.resetAt.Load(); at != 0 {
		ts.ResetAtS = time.Duration(at).Seconds()
	}
	if f.complete.Load() {
		ts.CompletionS = time.Duration(f.completion.Load()).Seconds()
		ts.TotalS = ts.ConnectS + ts.CompletionS
		ts.Completed = true
	}
	var afterStop uint64
	if f.stopped.Load() {
		afterStop = ts.BytesReceived - min(f.stoppedBytes.Load(), ts.BytesReceived)
	}
	firstAt, lastAt := f.firstByte.Load(), f.lastByte.Load()
	tput := arrivalRate(ts.BytesReceived, f.firstBytes.Load(), firstAt, lastAt)
	if firstAt >= 0 && lastAt == firstAt {
		// One read took everything: from the first write instead.
		tput = bitRate(ts.BytesReceived, time.Duration(lastAt))
	}
	return FlowSummary{
		Name:           f.spec.Name,
		Type:           TypeTCP,
		ThroughputBps:  tput,
		BytesAfterStop: afterStop,
		TCPSummary:     ts,
	}
}

// isTimeout reports whether err is a deadline passing. net.Pipe and the
// kernel's sockets return os.ErrDeadlineExceeded; other net.Conns (gVisor's
// gonet among them) return their own net.Error with Timeout() true.
func isTimeout(err error) bool {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
