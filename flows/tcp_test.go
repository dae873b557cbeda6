package flows

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/netjam/netjam/clock"
	"go.uber.org/goleak"
)

// mutConn wraps the receiving end of a connection: mutate sees (and may
// change) every byte read with its stream offset, and with eofAt > 0 the
// stream ends there.
type mutConn struct {
	net.Conn
	off    int64
	mutate func(off int64, b []byte)
	eofAt  int64
}

func (c *mutConn) Read(b []byte) (int, error) {
	if c.eofAt > 0 {
		if c.off >= c.eofAt {
			return 0, io.EOF
		}
		b = b[:min(int64(len(b)), c.eofAt-c.off)]
	}
	n, err := c.Conn.Read(b)
	if c.mutate != nil {
		c.mutate(c.off, b[:n])
	}
	c.off += int64(n)
	return n, err
}

// halfCloser gives a net.Pipe end a CloseWrite, which closes the pipe (a
// pipe cannot half-close) and records that it was used.
type halfCloser struct {
	net.Conn
	closeWrites, closes atomic.Int32
}

func (c *halfCloser) CloseWrite() error { c.closeWrites.Add(1); return c.Conn.Close() }
func (c *halfCloser) Close() error      { c.closes.Add(1); return c.Conn.Close() }

// runTCP runs a flow of spec over a net.Pipe on the real clock, the
// receiving end wrapped by wrap if not nil, and closes the pipe after.
func runTCP(t *testing.T, spec TCPBulkSpec, wrap func(net.Conn) net.Conn) (*TCPBulk, error) {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	var recv net.Conn = b
	if wrap != nil {
		recv = wrap(b)
	}
	f, err := NewTCPBulk(spec, clock.Real{}, a, recv, nil)
	if err != nil {
		t.Fatal(err)
	}
	return f, f.Run(context.Background())
}

func TestTCPBulkClean(t *testing.T) {
	const size = 3<<20 + 13 // not a multiple of anything
	a, b := net.Pipe()
	defer b.Close()
	send := &halfCloser{Conn: a}
	// A handshake that took a lost SYN's 1 s timeout.
	f, err := NewTCPBulk(TCPBulkSpec{Name: "bulk", Size: size, Connect: 1003 * time.Millisecond}, clock.Real{}, send, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	s := f.Summary()
	if s.Type != "tcp" || s.BytesSent != size || s.BytesReceived != size || s.CompletionS <= 0 || !s.Completed || s.Size != size {
		t.Fatalf("summary %+v, want %d bytes sent and received, and a completion time", *s.TCPSummary, size)
	}
	if s.ConnectS != 1.003 || s.TotalS != s.ConnectS+s.CompletionS {
		t.Errorf("connect %v s, total %v s, completion %v s: want 1.003 and connect + completion", s.ConnectS, s.TotalS, s.CompletionS)
	}
	if want := bitRate(size-f.firstBytes.Load(), time.Duration(f.lastByte.Load()-f.firstByte.Load())); s.ThroughputBps != want {
		t.Errorf("throughput %v, want the bytes after the first read over first to last read = %v", s.ThroughputBps, want)
	}
	if got := f.Sample(time.Now()).Bytes; got != size {
		t.Errorf("sample has %d bytes, want %d", got, size)
	}
	if send.closeWrites.Load() != 1 || send.closes.Load() != 0 {
		t.Errorf("CloseWrite called %d times and Close %d times, want 1 and 0", send.closeWrites.Load(), send.closes.Load())
	}
}

func TestTCPBulkCorruptByte(t *testing.T) {
	const at = 1<<20 + 7
	flip := func(c net.Conn) net.Conn {
		return &mutConn{Conn: c, mutate: func(off int64, b []byte) {
			if at >= off && at < off+int64(len(b)) {
				b[at-off] ^= 0x10
			}
		}}
	}
	f, err := runTCP(t, TCPBulkSpec{Name: "bulk", Size: 2 << 20}, flip)
	var de *DataError
	if !errors.As(err, &de) || de.Offset != at || de.Got^de.Want != 0x10 || de.Flow != "bulk" {
		t.Fatalf("Run returned %v, want a DataError at offset %d", err, at)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("bulk: received byte at offset %d is", at)) {
		t.Errorf("error %q does not name the flow and the offset", err)
	}
	if s := f.Summary(); s.BytesReceived != at || s.Completed || s.Size != 2<<20 {
		t.Errorf("%d of %d bytes counted as received, completed %v; want the %d good ones of %d, not completed", s.BytesReceived, s.Size, s.Completed, at, 2<<20)
	}
}

// TestTCPBulkMisorder swaps two adjacent 1000-byte runs of the stream, as a
// stack delivering two segments out of order would.
func TestTCPBulkMisorder(t *testing.T) {
	const x, l = 300_000, 1000
	pat := newPattern("bulk")
	swap := func(c net.Conn) net.Conn {
		return &mutConn{Conn: c, mutate: func(off int64, b []byte) {
			for i := range b {
				switch o := off + int64(i); {
				case o >= x && o < x+l:
					b[i] = pat.byteAt(o + l)
				case o >= x+l && o < x+2*l:
					b[i] = pat.byteAt(o - l)
				}
			}
		}}
	}
	want := int64(x)
	for pat.byteAt(want) == pat.byteAt(want+l) {
		want++
	}
	_, err := runTCP(t, TCPBulkSpec{Name: "bulk", Size: 1 << 20}, swap)
	var de *DataError
	if !errors.As(err, &de) || de.Offset != want {
		t.Fatalf("Run returned %v, want a DataError at offset %d", err, want)
	}
}

func TestTCPBulkEarlyEOF(t *testing.T) {
	defer goleak.VerifyNone(t)
	// The receiver's stream ends early while the sender still writes: Run
	// reports it and stops the sender.
	_, err := runTCP(t, TCPBulkSpec{Name: "bulk", Size: 1 << 20}, func(c net.Conn) net.Conn {
		return &mutConn{Conn: c, eofAt: 5000}
	})
	if err == nil || err.Error() != "flows: bulk: connection closed after 5000 of 1048576 bytes" {
		t.Fatalf("Run returned %v", err)
	}
}

// TestTCPBulkDuration runs a flow bounded by a duration on a manual clock,
// stepping the clock through the info samples, and checks what the samples
// give.
func TestTCPBulkDuration(t *testing.T) {
	clk := clock.NewManual()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	cwnds := []uint32{10, 20, 30, 40, 50, 25, 30, 35, 40, 12}
	var calls atomic.Int64
	info := func() TCPInfo {
		n := calls.Add(1)
		return TCPInfo{SRTT: time.Duration(n) * ms, Cwnd: cwnds[n-1], Retransmits: uint64(n), FastRetransmits: uint64(n / 2), Timeouts: uint64(n / 5)}
	}
	f, err := NewTCPBulk(TCPBulkSpec{Name: "bulk", Duration: 95 * ms, InfoInterval: 10 * ms}, clk, a, b, info)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- f.Run(context.Background()) }()
	for k := int64(1); k <= 9; k++ {
		at := clock.Epoch.Add(time.Duration(k) * 10 * ms)
		waitFor(t, fmt.Sprintf("info sample %d to be due", k), func() bool { n, ok := clk.Next(); return ok && n.Equal(at) })
		clk.Set(at)
		waitFor(t, fmt.Sprintf("info sample %d", k), func() bool { return calls.Load() == k })
	}
	clk.Set(clock.Epoch.Add(95 * ms)) // the end; the final sample is the 10th
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	s := f.Summary()
	if s.BytesSent == 0 || s.BytesSent != s.BytesReceived {
		t.Errorf("%d bytes sent, %d received; want equal, not zero", s.BytesSent, s.BytesReceived)
	}
	if s.CompletionS <= 0 || s.CompletionS > 0.095 {
		t.Errorf("completion %vs: want one within the 95 ms", s.CompletionS)
	}
	first, last := f.firstByte.Load(), f.lastByte.Load()
	want := bitRate(s.BytesReceived-f.firstBytes.Load(), time.Duration(last-first))
	if last == first {
		want = bitRate(s.BytesReceived, time.Duration(last))
	}
	if s.ThroughputBps != want {
		t.Errorf("throughput %v, want %v (see arrivalRate)", s.ThroughputBps, want)
	}
	if r := s.RTTMs; r.Count != 10 || r.Min != 1 || r.Max != 10 || r.Mean != 5.5 {
		t.Errorf("rtt %+v, want 10 samples from 1 to 10 ms, mean 5.5", r)
	}
	if s.CwndMax != 50 || s.Retransmissions != 10 || s.FastRetransmits != 5 || s.Timeouts != 2 {
		t.Errorf("cwnd max %d, retransmissions %d/%d/%d; want 50, 10/5/2", s.CwndMax, s.Retransmissions, s.FastRetransmits, s.Timeouts)
	}
	if smp := f.Sample(clk.Now()); smp.Cwnd != 12 || smp.SRTT != 10*ms || smp.Bytes != s.BytesReceived {
		t.Errorf("sample %+v, want the last info (cwnd 12, srtt 10ms) and %d bytes", smp, s.BytesReceived)
	}
}

func TestTCPBulkCancel(t *testing.T) {
	defer goleak.VerifyNone(t)
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	var infos atomic.Int64
	info := func() TCPInfo { infos.Add(1); return TCPInfo{SRTT: ms, Cwnd: 10} }
	f, err := NewTCPBulk(TCPBulkSpec{Name: "bulk", Size: 1 << 50}, clock.Real{}, a, b, info)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	waitFor(t, "a few megabytes", func() bool { return f.Sample(time.Now()).Bytes > 4<<20 })
	cancel()
	err = <-done
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "bulk") {
		t.Fatalf("Run returned %v, want context.Canceled naming the flow", err)
	}
	s := f.Summary()
	if s.CompletionS != 0 || s.ThroughputBps <= 0 || infos.Load() == 0 {
		t.Errorf("completion %v, throughput %v, %d info samples; want none, some, some", s.CompletionS, s.ThroughputBps, infos.Load())
	}
}

func TestTCPBulkSpecValidate(t *testing.T) {
	tests := []struct {
		spec TCPBulkSpec
		want string
	}{
		{TCPBulkSpec{Name: "a", Size: 1}, ""},
		{TCPBulkSpec{Name: "a", Duration: time.Second, Start: time.Second, InfoInterval: ms}, ""},
		{TCPBulkSpec{Size: 1}, "flows: tcp flow without a name"},
		{TCPBulkSpec{Name: "a"}, `flows: tcp flow "a": needs a size or a duration`},
		{TCPBulkSpec{Name: "a", Size: 1, Duration: 1}, `flows: tcp flow "a": has both a size and a duration; set one`},
		{TCPBulkSpec{Name: "a", Size: -1, Start: -1, InfoInterval: -1},
			"flows: tcp flow \"a\": negative size -1\nflows: tcp flow \"a\": negative start -1ns\nflows: tcp flow \"a\": negative info interval -1ns"},
	}
	for _, tt := range tests {
		err := tt.spec.Validate()
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tt.want {
			t.Errorf("%+v: got %q, want %q", tt.spec, got, tt.want)
		}
	}
}

// TestPatternVerify checks the verifier on its own, across the period's
// wrap and in reads longer than a period.
func TestPatternVerify(t *testing.T) {
	p := newPattern("x")
	stream := func(off int64, n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = p.byteAt(off + int64(i))
		}
		return b
	}
	for _, off := range []int64{0, patternPeriod - 3, 5 * patternPeriod, 123457} {
		for _, n := range []int{1, 1000, patternPeriod, 3*patternPeriod + 5} {
			b := stream(off, n)
			if i := p.verify(off, b); i != -1 {
				t.Fatalf("offset %d, %d bytes: clean data fails at %d", off, n, i)
			}
			bad := n / 2
			b[bad]++
			if i := p.verify(off, b); i != bad {
				t.Fatalf("offset %d, %d bytes: byte %d changed, verify says %d", off, n, bad, i)
			}
		}
	}
	if q := newPattern("y"); string(q.at(0, 64)) == string(p.at(0, 64)) {
		t.Error("two flows have the same pattern")
	}
}

// BenchmarkTCPVerify measures the receiver's verification of 64 KiB reads
// at offsets that move through the pattern as a stream's would.
func BenchmarkTCPVerify(b *testing.B) {
	p := newPattern("bench")
	const n = readBuf
	var bufs [4][]byte
	for j := range bufs {
		bufs[j] = make([]byte, n)
		for i := range bufs[j] {
			bufs[j][i] = p.byteAt(int64(j*n + i))
		}
	}
	b.SetBytes(n)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		// Offsets (i/4)*4*period + j*n hold the same bytes as j*n.
		j := i % 4
		off := int64(i/4)*4*patternPeriod + int64(j*n)
		if p.verify(off, bufs[j]) != -1 {
			b.Fatal("mismatch")
		}
		i++
	}
	b.ReportMetric(float64(b.N)*n/b.Elapsed().Seconds()/1e9, "GB/s")
}

// BenchmarkTCPBulkPipe is a whole flow over net.Pipe: sender, receiver,
// verification. net.Pipe's synchronous hand-over is most of the cost.
func BenchmarkTCPBulkPipe(b *testing.B) {
	a, c := net.Pipe()
	defer a.Close()
	defer c.Close()
	f, err := NewTCPBulk(TCPBulkSpec{Name: "bench", Size: int64(b.N) * readBuf}, clock.Real{}, a, c, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(readBuf)
	b.ResetTimer()
	if err := f.Run(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)*readBuf/b.Elapsed().Seconds()/1e9, "GB/s")
}

// timeoutErr is a deadline error of a net.Conn that is not
// os.ErrDeadlineExceeded, as gVisor's gonet returns.
type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestIsTimeout(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{os.ErrDeadlineExceeded, true},
		{&net.OpError{Op: "write", Err: timeoutErr{}}, true},
		{io.EOF, false},
		{errors.New("boom"), false},
	} {
		if got := isTimeout(c.err); got != c.want {
			t.Errorf("isTimeout(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// TestTCPBulkStallDetector steps the stall detector through a sender that
// sends, goes silent with data to send, resumes, and goes silent again
// with nothing to send, on the manual clock's epoch.
func TestTCPBulkStallDetector(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	var stalls []Stall
	f, err := NewTCPBulk(TCPBulkSpec{Name: "bulk", Size: 1 << 20, OnStall: func(s Stall) { stalls = append(stalls, s) }}, clock.NewManual(), a, b, func() TCPInfo { return TCPInfo{} })
	if err != nil {
		t.Fatal(err)
	}
	at := func(d time.Duration) time.Time { return clock.Epoch.Add(d) }
	f.started, f.start, f.alive = true, at(0), at(0)
	f.sent.Store(100 << 10)
	f.received.Store(10 << 10) // data to send
	step := func(d time.Duration, segs uint64, rto time.Duration) {
		t.Helper()
		f.mu.Lock()
		begun := f.detectStall(at(d), TCPInfo{SegmentsSent: segs, RTO: rto})
		f.last = TCPInfo{SegmentsSent: segs, RTO: rto}
		f.mu.Unlock()
		if begun != nil {
			f.spec.OnStall(*begun)
		}
	}
	ms := time.Millisecond
	step(500*ms, 10, 200*ms) // sending
	step(1500*ms, 10, 200*ms)
	if len(stalls) != 0 {
		t.Fatalf("stall after 1 s of silence: %+v; the threshold is max(1 s, 3 RTO), exclusive", stalls)
	}
	step(1510*ms, 10, 200*ms)
	if len(stalls) != 1 || stalls[0].At != 500*ms {
		t.Fatalf("stalls %+v, want one from 500ms", stalls)
	}
	step(2000*ms, 10, 200*ms) // the same stall goes on
	step(3000*ms, 11, 200*ms) // a segment: it ends, 2.5 s long
	step(3100*ms, 12, 800*ms)
	step(5500*ms, 12, 800*ms) // 2.4 s < 3 RTO: a backed-off timer, not a stall
	if len(stalls) != 1 {
		t.Fatalf("stall within 3 RTO (2.4 s of silence, RTO 800ms): %+v", stalls)
	}
	f.received.Store(100 << 10) // everything delivered: silence is not a stall
	step(9000*ms, 12, 200*ms)
	f.sent.Store(200 << 10)
	step(9500*ms, 12, 200*ms)
	if len(stalls) != 1 {
		t.Fatalf("stall counted while the sender had nothing to send: %+v", stalls)
	}
	step(10600*ms, 12, 200*ms) // 1.6 s silent since 9 s with data since 9.5 s: alive counts from 9 s
	if len(stalls) != 2 || stalls[1].At != 9000*ms {
		t.Fatalf("stalls %+v, want a second from 9s", stalls)
	}
	f.ended, f.end = true, at(12*time.Second)
	s := f.Summary()
	if s.Stalls != 2 || s.StalledS != 2.5+3 {
		t.Errorf("summary: %d stalls, %v s stalled; want 2 and 5.5 s (the second one still going at the end)", s.Stalls, s.StalledS)
	}
}
