// Package netjamtest ties a netjam.Path to a test: it starts the path,
// fails the test if it cannot, closes it when the test ends, and, when the
// test failed, logs what the path did (its directions' counters and the
// connections still open), which is where a test of a client under a bad
// network usually wants to look first.
package netjamtest

import (
	"context"
	"testing"

	"github.com/netjam/netjam"
)

// New starts a path with l's impairment for t; it is closed when t ends.
func New(t testing.TB, l netjam.Link) *netjam.Path {
	t.Helper()
	p, err := netjam.Start(context.Background(), l)
	if err != nil {
		t.Fatalf("netjamtest: %v", err)
	}
	cleanup(t, p)
	return p
}

// Load starts the path of a scenario file for t, as netjam.Load does.
func Load(t testing.TB, file string, sets ...string) *netjam.Path {
	t.Helper()
	p, err := netjam.Load(context.Background(), file, sets...)
	if err != nil {
		t.Fatalf("netjamtest: %v", err)
	}
	cleanup(t, p)
	return p
}

func cleanup(t testing.TB, p *netjam.Path) {
	t.Cleanup(func() {
		if t.Failed() {
			Log(t, p)
		}
		p.Close()
	})
}

// Log writes p's state to t's log: each direction's packets, bytes and
// drops, and each open connection's bytes, RTT and retransmissions.
func Log(t testing.TB, p *netjam.Path) {
	t.Helper()
	st := p.Stats()
	t.Logf("netjam path (seed %d):", p.Seed())
	for _, l := range [...]struct {
		name                       string
		in, out, bytesIn, bytesOut uint64
		drops                      map[string]uint64
		conf                       string
	}{
		{"uplink", st.Uplink.PacketsIn, st.Uplink.PacketsOut, st.Uplink.BytesIn, st.Uplink.BytesOut, st.Uplink.Drops, st.Uplink.Configured.Summary},
		{"downlink", st.Downlink.PacketsIn, st.Downlink.PacketsOut, st.Downlink.BytesIn, st.Downlink.BytesOut, st.Downlink.Drops, st.Downlink.Configured.Summary},
	} {
		t.Logf("  %s (%s): %d packets in, %d out (%d/%d bytes), drops %v", l.name, l.conf, l.in, l.out, l.bytesIn, l.bytesOut, l.drops)
	}
	for _, c := range st.Conns {
		t.Logf("  %s %s -> %s: %d bytes sent, %d received, srtt %v, rto %v, cwnd %d, retransmits %d (fast %d), timeouts %d, age %v",
			c.Network, c.Local, c.Remote, c.BytesSent, c.BytesReceived, c.SRTT, c.RTO, c.Cwnd, c.Retransmits, c.FastRetransmit, c.Timeouts, c.Age.Round(1e6))
	}
}
