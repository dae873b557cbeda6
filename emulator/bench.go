package emulator

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/netjam/netjam/blueprint"
	"github.com/netjam/netjam/clock"
	"github.com/netjam/netjam/hostcfg"
	"github.com/netjam/netjam/scenario"
	"github.com/netjam/netjam/stack"
	"github.com/netjam/netjam/summary"
)

// A Bench is a lab without flows of its own, for a program that brings its
// own traffic (package netjam, the Go API): one netstack host on each side
// of a scenario's path, running on the real clock until Close. The client
// host is where the program's connections start; the server host relays
// what reaches it to real sockets: every destination in the Bench's
// prefixes (BenchPrefixes) through Dial, which maps it to a real address.
//
// Only a scenario's path applies: its link, mtu and seed, and its Wi-Fi
// cell when BenchOptions.WiFi allows one. Flows, TUN mode and captures
// are refused.
type Bench struct {
	l      *lab
	mu     sync.Mutex // guards s, the settings in force, and orders Sets
	s      *scenario.Scenario
	client *stack.Host
	server *stack.Host
	relay  *stack.Relay
	cancel context.CancelFunc
}

// BenchPrefixes are the destinations a Bench's server host relays: the
// ranges set aside for benchmarking (RFC 2544's 198.18.0.0/15 and RFC
// 5180's 2001:2::/48), which no real network routes. A program maps each
// real address it reaches to one of them.
var BenchPrefixes = []netip.Prefix{netip.MustParsePrefix("198.18.0.0/15"), netip.MustParsePrefix("2001:2::/48")}

// BenchOptions are the parts of a Bench that are not the scenario's.
type BenchOptions struct {
	// Dial opens the real socket for a destination in BenchPrefixes, as
	// net.Dialer.DialContext does (network "tcp" or "udp"); the Bench's
	// owner maps the destination to the real address. It must honour ctx.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// DialTimeout bounds Dial; 0 means hostcfg.DefaultDialTimeout.
	DialTimeout time.Duration
	// RelayBudget bounds the buffers of the server host's relayed
	// connections (hostcfg.RelayConfig.Budget); 0 means
	// hostcfg.DefaultBudget, about 910 relayed TCP connections at once.
	RelayBudget int64
	// Log is the logger; nil means none.
	Log *zap.Logger
	// WiFi allows the scenario's wifi cell: the client host is then its
	// first station, behind the medium, and the server host behind the
	// access point's link. The other stations have no host: they contend
	// with their saturate backlog (an idle station is only a name).
	WiFi bool
}

// NewBench builds and starts the path of s and its two hosts.
func NewBench(s *scenario.Scenario, o BenchOptions) (*Bench, error) {
	switch {
	case len(s.Flows) > 0:
		return nil, errors.New("a bench carries the program's own traffic: the scenario must have no flows")
	case s.WiFi != nil && !o.WiFi:
		return nil, errors.New("a bench has a path only: the scenario must have no wifi section")
	case s.TUN != nil || s.Capture != nil:
		return nil, errors.New("a bench has a path only: the scenario must have no tun or capture section")
	case o.Dial == nil:
		return nil, errors.New("a bench needs a Dial")
	}
	log := o.Log
	if log == nil {
		log = zap.NewNop()
	}
	if !s.SeedSet {
		s.Seed, s.SeedSet = NewSeed(), true
	}
	clk := clock.Real{}
	clientHost := blueprint.Machine{Name: "client", SACK: true}
	if s.WiFi != nil {
		clientHost.Station = s.WiFi.Stations[0].Name
	}
	l, err := newLab(s, clk, log, nil, labHooks{},
		clientHost, blueprint.Machine{Name: "server", Server: true, SACK: true, Transparent: true, CatchAll: true})
	if err != nil {
		return nil, err
	}
	b := &Bench{l: l, s: s}
	fail := func(err error) (*Bench, error) {
		l.close()
		return nil, err
	}
	client, server := l.clients[0], l.servers[0]
	b.client, b.server = client.host, server.host
	ctx, cancel := context.WithCancel(context.Background())
	b.cancel = cancel
	b.relay, err = b.server.StartRelay(ctx, hostcfg.RelayConfig{Transparent: true, Allow: BenchPrefixes,
		Dial: o.Dial, DialTimeout: o.DialTimeout, Budget: o.RelayBudget, Log: log.Named("relay")})
	if err != nil {
		cancel()
		return fail(err)
	}
	l.start(ctx)
	return b, nil
}

// Client returns the host the program's connections start from.
func (b *Bench) Client() *stack.Host { return b.client }

// Server returns the host across the path: it relays to real sockets, and
// connections to the program's listeners start from it.
func (b *Bench) Server() *stack.Host { return b.server }

// ClientAddr and ServerAddr are the hosts' addresses, of the family of v6
// or of IPv4.
func (b *Bench) ClientAddr(v6 bool) netip.Addr { return hostAddr(0, false, v6) }

// ServerAddr: see ClientAddr.
func (b *Bench) ServerAddr(v6 bool) netip.Addr { return hostAddr(0, true, v6) }

func hostAddr(i int, server, v6 bool) netip.Addr {
	a := blueprint.HostAddrs(i, server)
	if v6 {
		return a[1].Addr()
	}
	return a[0].Addr()
}

// Links returns the path's two directions as summary.json has them: what
// each was configured to do and its counters so far.
func (b *Bench) Links() []summary.LinkSummary {
	b.mu.Lock()
	s := b.s
	b.mu.Unlock()
	ls := b.l.path.summaries(s)
	ls[0].DeliveryDrops, ls[0].DeliveryWaits = b.l.deliveryCounts(true)
	ls[1].DeliveryDrops, ls[1].DeliveryWaits = b.l.deliveryCounts(false)
	return ls
}

// Relay returns the server host's relay counters.
func (b *Bench) Relay() hostcfg.RelayStats { return b.relay.Stats() }

// Close stops the path and releases the hosts and the relay, with every
// connection they carry. Safe to call more than once.
func (b *Bench) Close() {
	b.cancel()
	b.l.close()
	b.relay.Close()
}

// Set changes the path while it runs, as the overrides sets say
// ("link.uplink.loss=30%", in --set's form; only the link's keys), each
// direction between two of its packets and keeping what it holds (see
// impair.Chain.Set). On error nothing changed.
func (b *Bench) Set(sets ...string) error {
	if _, err := linkChanges(sets); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	next, err := b.s.With(sets...)
	if err != nil {
		return err
	}
	if _, err := b.l.path.change(clock.Real{}, b.s, next); err != nil {
		return err
	}
	b.s = next
	return nil
}
