package stack

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/netjam/netjam/clock"
	"github.com/netjam/netjam/impair"
)

// TestThroughImpairRunners joins two hosts through an uplink and a downlink
// Runner, as the emulator does (20 ms each way, 10 Mbit/s, real clock): a
// transfer arrives exact and takes at least the time the payload alone
// needs on the wire. Only that lower bound is asserted; how much longer it
// takes depends on the machine.
func TestThroughImpairRunners(t *testing.T) {
	const (
		rate  = 10e6 // bit/s
		delay = 20 * time.Millisecond
		mtu   = 1500
	)
	pool := impair.NewPool(mtu)
	var a, b *Host
	direction := func(name string, seed uint64, to **Host) *impair.Runner {
		r, err := impair.NewRunner(impair.Config{
			Name:  name,
			Seed:  seed,
			Delay: impair.DelayConfig{Time: delay},
			Rate:  impair.RateConfig{Bitrate: rate},
		}, clock.Real{}, func(_ time.Time, p *impair.Packet) {
			(*to).Inject(p.Data)
			p.Release()
		})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	up, down := direction("uplink", 1, &b), direction("downlink", 2, &a)
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
		h, err := NewHost(HostConfig{Name: name, Addrs: []netip.Prefix{addr}, MTU: mtu, Clock: clock.Real{}, Seed: seed, SACK: true, Output: out})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	a = mk("client", v4.a, output(up), 1)
	b = mk("server", v4.b, output(down), 2)
	ctx, cancel := context.WithCancel(context.Background())
	up.Start(ctx)
	down.Start(ctx)
	// Hosts first, so nothing is sent into a closed runner; then the
	// runners, which may still deliver to the closed hosts (dropped).
	defer func() {
		a.Close()
		b.Close()
		cancel()
		up.Close()
		down.Close()
	}()

	data := payload(1<<20, 5)
	start := time.Now()
	snd, _ := transfer(t, a, b, netip.AddrPortFrom(v4.b.Addr(), 8080), data, TCPOptions{})
	elapsed := time.Since(start)
	floor := time.Duration(float64(len(data)*8) / rate * float64(time.Second))
	t.Logf("1 MiB in %v (payload serialization alone %v); sender %+v; uplink %+v", elapsed, floor, snd, up.Stats().Drops)
	if elapsed < floor {
		t.Errorf("transfer took %v, less than the %v the payload needs at %.0f bit/s", elapsed, floor, rate)
	}
	if snd.SRTT < 2*delay {
		t.Errorf("smoothed RTT %v is below the path's %v", snd.SRTT, 2*delay)
	}
}
