package stack

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/netjam/netjam/clock"
	"github.com/netjam/netjam/hostcfg"
	"github.com/netjam/netjam/impair"
)

// A FIN lost while SACK recovery is under way is sent again. gVisor's
// sender counted no zero-length segment in its pipe during SACK recovery,
// so with only the FIN unacknowledged its count of outstanding segments
// was 0; a probe timeout that sent nothing then armed no retransmission
// timer, and the FIN, when the path had lost it, was never sent again:
// the receiver waited for the end of the stream forever (found as a
// stalled flow over 5% loss at loopback's MTU, the README's default
// scenario). netjam carries the fix (third_party/gvisor/patches/0001).
//
// On the virtual clock the runs are exact: before the fix, seed 62 of
// these stalled every time, in FIN-WAIT-1 with every data byte delivered.
func TestLostFINIsSentAgain(t *testing.T) {
	seeds := []uint64{62, 63, 64, 65}
	if testing.Short() {
		seeds = seeds[:1]
	}
	for _, seed := range seeds {
		if err := lossyTransfer(t, seed); err != nil {
			t.Errorf("seed %d: %v", seed, err)
		}
	}
}

// lossyTransfer sends 5 MiB over lossyPair's path of that seed on a
// virtual clock of its own, and returns an error unless the receiver reads
// them and the end of the stream within 30 s of that clock.
func lossyTransfer(t *testing.T, seed uint64) error {
	v := clock.NewVirtual()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go v.Run(ctx)
	a, b, stop := lossyPair(t, seed, v)
	defer stop()
	return finishes(ctx, v, a, b, 5<<20, 30*time.Second)
}

// finishes sends n bytes from a to b over one connection and closes it,
// and returns an error unless b reads them and the end of the stream
// within limit of clk's time.
func finishes(ctx context.Context, clk clock.Clock, a, b *Host, n int, limit time.Duration) error {
	ctx, cancel := clock.WithTimeout(ctx, clk, limit)
	defer cancel()
	l, err := b.ListenTCP(5001, hostcfg.TCPOptions{})
	if err != nil {
		return err
	}
	defer l.Close()
	type result struct {
		n   int64
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, err := l.Accept(ctx)
		if err != nil {
			done <- result{err: err}
			return
		}
		defer c.Close()
		go func() { <-ctx.Done(); c.Close() }()
		n, err := io.Copy(io.Discard, c)
		done <- result{n, err}
	}()
	c, err := a.DialTCP(ctx, netip.AddrPortFrom(v4.b.Addr(), 5001), hostcfg.TCPOptions{})
	if err != nil {
		return err
	}
	defer c.Close()
	go func() {
		if _, err := c.Write(payload(n, 1)); err == nil {
			c.CloseWrite()
		}
	}()
	r := <-done
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("the receiver did not see the end of the stream in %v: it read %d of %d bytes; sender %+v", limit, r.n, n, c.Info())
	case r.err != nil:
		return r.err
	case r.n != int64(n):
		return fmt.Errorf("the receiver read %d of %d bytes", r.n, n)
	}
	return nil
}

// lossyPair returns two hosts at loopback's MTU joined by a path of 50 ms
// and 5% loss each way on clk, and the function that closes them.
func lossyPair(t *testing.T, seed uint64, clk clock.Clock) (a, b *Host, stop func()) {
	t.Helper()
	cfg := func(name string, seed uint64) impair.Config {
		return impair.Config{Name: name, Seed: seed, Delay: impair.DelayConfig{Time: 50 * time.Millisecond},
			Loss: impair.LossConfig{Model: impair.LossRandom, P: 0.05}}
	}
	rp := newRunnerPair(t, clk, 65535, seed, cfg("uplink", seed), cfg("downlink", seed+1000))
	return rp.a, rp.b, rp.stop
}

// TestStallHunt runs the transfer of TestLostFINIsSentAgain over the seeds
// NETJAM_HUNT_SEEDS names (FROM-TO) and reports each that does not
// finish: the hunt for a stall of gVisor's sender (docs/measurements.md,
// "The stall, hunted again"), skipped unless asked for:
//
//	NETJAM_HUNT_SEEDS=1-2000 go test -run StallHunt -timeout 1h ./stack/
//	NETJAM_HUNT_SEEDS=1-2000 go test -race -run StallHunt -timeout 2h ./stack/
//
// Seed 1917 stalls (in two of three runs alone: this pair's goroutines
// are not settled as the lab's are): a lost SYN-ACK and losses of the same
// segment and of ACKs, no defect.
func TestStallHunt(t *testing.T) {
	spec := os.Getenv("NETJAM_HUNT_SEEDS")
	if spec == "" {
		t.Skip("set NETJAM_HUNT_SEEDS=FROM-TO to hunt")
	}
	var from, to uint64
	if _, err := fmt.Sscanf(spec, "%d-%d", &from, &to); err != nil || from > to {
		t.Fatalf("NETJAM_HUNT_SEEDS=%q: want FROM-TO, such as 1-2000", spec)
	}
	for seed := from; seed <= to; seed++ {
		if err := lossyTransfer(t, seed); err != nil {
			t.Errorf("seed %d: %v", seed, err)
		}
	}
}
