package stack

import (
	"net/netip"
	"testing"
	"time"

	"github.com/netjam/netjam/clock"
	"github.com/netjam/netjam/hostcfg"
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
	cfg := func(name string, seed uint64) impair.Config {
		return impair.Config{Name: name, Seed: seed, Delay: impair.DelayConfig{Time: delay}, Rate: impair.RateConfig{Bitrate: rate}}
	}
	rp := newRunnerPair(t, clock.Real{}, mtu, 1, cfg("uplink", 1), cfg("downlink", 2))
	a, b, up := rp.a, rp.b, rp.up
	defer rp.stop()

	data := payload(1<<20, 5)
	start := time.Now()
	snd, _ := transfer(t, a, b, netip.AddrPortFrom(v4.b.Addr(), 8080), data, hostcfg.TCPOptions{})
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
