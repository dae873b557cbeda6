// Package netjam puts an emulated network path (delay, jitter, loss, a rate
// limit and its queue: everything a netjam scenario's link can do) between
// a Go program and the real network, in-process, without root, without a
// TUN device and without tc. It is for tests of clients and servers under a
// bad network:
//
//	p, err := netjam.Start(ctx, netjam.Link{Delay: 50 * time.Millisecond, Loss: 0.02, Rate: 10e6})
//	if err != nil { ... }
//	defer p.Close()
//	client := &http.Client{Transport: &http.Transport{DialContext: p.DialContext}}
//	resp, err := client.Get(srv.URL) // srv: an httptest server on the host's loopback
//
// A Path has two gVisor network stacks, one on each side of the emulated
// path, in the program's own process. Connections made with DialContext
// (TCP, UDP) and packets sent with a PacketConn from ListenPacket start on
// the near stack, cross the path's uplink, and are relayed by the far
// stack to the real address they were sent to; what comes back crosses
// the downlink. Listen works the other way: a server inside the path,
// reached from real sockets through it. The TCP on both stacks is
// gVisor's, not the kernel's.
//
// Each Path is independent: a test may run several, in parallel; Close
// releases everything a Path holds. Package netjamtest ties a Path to a
// test.
package netjam

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"go.yaml.in/yaml/v3"

	"github.com/netjam/netjam/emulator"
	"github.com/netjam/netjam/hostcfg"
	"github.com/netjam/netjam/netif"
	"github.com/netjam/netjam/scenario"
)

// Link is an emulated path's impairment, applied to each direction; Up
// and Down, when set, replace it for the uplink (from the program to the
// real address) or the downlink. The zero Link changes nothing. For
// anything else a scenario's link can do (loss models, queue disciplines,
// reordering, traces), use Load.
type Link struct {
	// Delay is added to every packet; Jitter varies it (uniformly, by up to
	// Jitter either way, never reordering).
	Delay, Jitter time.Duration
	// Loss is the probability that a packet is lost, 0 to 1.
	Loss float64
	// Rate limits the direction, in bits per second (10e6 for 10 Mbit/s);
	// 0 is unlimited. Packets wait in a drop-tail queue of Queue packets
	// (0: the default, 1000).
	Rate  float64
	Queue int
	// Up and Down replace the fields above for one direction.
	Up, Down *Direction
	// MTU is the largest packet on the path; 0 means 1500.
	MTU int
	// Seed seeds every random decision of the path; 0 picks one (see
	// Path.Seed).
	Seed uint64
}

// Direction is one direction's impairment; see Link.
type Direction struct {
	Delay, Jitter time.Duration
	Loss          float64
	Rate          float64
	Queue         int
}

// Path is a running emulated path. Its methods are safe for concurrent use.
type Path struct {
	b      *emulator.Bench
	seed   uint64
	ctx    context.Context // done on Close
	cancel context.CancelFunc

	mu      sync.Mutex
	real    map[netip.Addr]netip.Addr // virtual address -> the real one it stands for
	virtual map[netip.Addr]netip.Addr // real address -> its virtual one
	next4   uint32                    // the next virtual IPv4 address, an offset into BenchPrefixes[0]
	next6   uint64
	closers map[closer]struct{} // connections, listeners, packet conns: closed by Close
	closed  bool

	wg sync.WaitGroup // the goroutines of listeners
}

type closer interface{ Close() error }

// ErrClosed is returned by a Path's methods after Close.
var ErrClosed = errors.New("netjam: path closed")

// Start builds and starts a path with l's impairment.
func Start(ctx context.Context, l Link) (*Path, error) {
	y, err := l.scenario()
	if err != nil {
		return nil, err
	}
	return load(ctx, "netjam.Link", y, nil)
}

// Load builds and starts the path of a scenario file: its link, mtu and
// seed, with sets applied as `netjam run --set` does ("link.loss=5%").
// A file with flows, wifi, tun or capture is refused: a Path carries the
// program's own traffic.
func Load(ctx context.Context, file string, sets ...string) (*Path, error) {
	b, err := scenario.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("netjam: %w", err)
	}
	return load(ctx, file, b, sets)
}

func load(ctx context.Context, name string, data []byte, sets []string) (*Path, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	plan, err := scenario.Parse(name, data, scenario.Options{Sets: sets})
	if err != nil {
		return nil, fmt.Errorf("netjam: %w", err)
	}
	if len(plan.Runs) != 1 {
		return nil, fmt.Errorf("netjam: %s has %d variants; a path is one of them: choose it with a --set of its keys", name, len(plan.Runs))
	}
	s := plan.Runs[0]
	p := &Path{real: map[netip.Addr]netip.Addr{}, virtual: map[netip.Addr]netip.Addr{}, closers: map[closer]struct{}{}}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.b, err = emulator.NewBench(s, emulator.BenchOptions{Dial: p.dialReal, Log: zap.NewNop()})
	if err != nil {
		p.cancel()
		return nil, fmt.Errorf("netjam: %s: %w", name, err)
	}
	p.seed = s.Seed
	return p, nil
}

// scenario writes l as a scenario, so that its values are checked as a
// scenario file's are, with the same messages.
func (l Link) scenario() ([]byte, error) {
	dir := func(d Direction) map[string]any {
		m := map[string]any{}
		if d.Delay != 0 || d.Jitter != 0 {
			m["delay"] = map[string]any{"time": d.Delay.String(), "jitter": d.Jitter.String()}
		}
		if d.Loss != 0 {
			m["loss"] = strconv.FormatFloat(d.Loss, 'g', -1, 64)
		}
		if d.Rate != 0 {
			if d.Rate < 0 || d.Rate != float64(uint64(d.Rate)) {
				m["rate"] = strconv.FormatFloat(d.Rate, 'g', -1, 64) + "bps" // the scenario's message says what is wrong
			} else {
				m["rate"] = strconv.FormatUint(uint64(d.Rate), 10) + "bps"
			}
		}
		if d.Queue != 0 {
			m["queue"] = map[string]any{"limit": d.Queue}
		}
		return m
	}
	link := dir(Direction{l.Delay, l.Jitter, l.Loss, l.Rate, l.Queue})
	if l.Up != nil {
		link["uplink"] = dir(*l.Up)
	}
	if l.Down != nil {
		link["downlink"] = dir(*l.Down)
	}
	s := map[string]any{"name": "link", "link": link}
	if l.MTU != 0 {
		s["mtu"] = l.MTU
	}
	if l.Seed != 0 {
		s["seed"] = l.Seed
	}
	return yaml.Marshal(s)
}

// Set changes the path while it runs, without breaking its connections:
// key is a key of a scenario's link ("loss", "delay", "uplink.rate",
// "downlink.loss", "link.uplink.delay" also works), value as a scenario
// file has it ("30%", "100ms", "2Mbps", "{time: 50ms, jitter: 5ms}").
// Each direction changes between two packets and keeps what it holds: a
// new rate applies to the queue's packets, a new delay to the packets
// sent from then on, as netem's tc change does; a smaller queue limit
// drops the excess. The queue's discipline and its other settings, traces
// and slots cannot change while a path runs. On error nothing changed.
func (p *Path) Set(key, value string) error {
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if key != "link" && !strings.HasPrefix(key, "link.") {
		key = "link." + key
	}
	if err := p.b.Set(key + "=" + value); err != nil {
		return fmt.Errorf("netjam: Set %s: %w", strings.TrimPrefix(key, "link."), err)
	}
	return nil
}

// Seed returns the seed of the path's random decisions: Link.Seed, or the
// one picked for it. A Link with this seed repeats every decision.
func (p *Path) Seed() uint64 { return p.seed }

// DialContext connects to address on network (tcp, tcp4, tcp6, udp, udp4,
// udp6) across the path: the connection starts on the path's near side
// and is relayed to address on the real network by its far side. Its
// RemoteAddr is address, resolved. A TCP connection to a port where
// nothing listens fails as it would without the path (connection
// refused), after the round trip across it.
func (p *Path) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	var tcp bool
	switch network {
	case "tcp", "tcp4", "tcp6":
		tcp = true
	case "udp", "udp4", "udp6":
	default:
		return nil, &net.OpError{Op: "dial", Net: network, Err: net.UnknownNetworkError(network)}
	}
	raddr, err := resolve(ctx, network, address)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	vaddr, err := p.toVirtual(raddr)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	var c net.Conn
	var info func() netif.TCPInfo
	if tcp {
		tc, err := p.b.Client().DialTCP(ctx, vaddr, hostcfg.TCPOptions{})
		if err != nil {
			return nil, p.dialError(network, raddr, err)
		}
		c, info = tc, tc.Info
	} else if c, err = p.b.Client().DialUDP(vaddr); err != nil {
		return nil, p.dialError(network, raddr, err)
	}
	return p.track(c, info, netAddr(network, raddr))
}

// Dial is DialContext without a context.
func (p *Path) Dial(network, address string) (net.Conn, error) {
	return p.DialContext(context.Background(), network, address)
}

// dialError is the error of a dial that failed across the path: the
// real address, not the virtual one, and ErrClosed after Close.
func (p *Path) dialError(network string, raddr netip.AddrPort, err error) error {
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		err = ErrClosed
	} else if s := err.Error(); strings.Contains(s, "connection refused") {
		err = errors.New("connection refused")
	}
	return &net.OpError{Op: "dial", Net: network, Addr: netAddr(network, raddr), Err: err}
}

// resolve turns address into one IP address and port, looking a name up
// on the host, preferring IPv4 unless network asks for IPv6.
func resolve(ctx context.Context, network, address string) (netip.AddrPort, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return netip.AddrPort{}, err
	}
	pn, err := net.DefaultResolver.LookupPort(ctx, strings.TrimRight(network, "46"), port)
	if err != nil {
		return netip.AddrPort{}, err
	}
	if host == "" {
		host = "localhost"
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return netip.AddrPortFrom(a.Unmap(), uint16(pn)), nil
	}
	ipnet := "ip"
	switch {
	case strings.HasSuffix(network, "4"):
		ipnet = "ip4"
	case strings.HasSuffix(network, "6"):
		ipnet = "ip6"
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, ipnet, host)
	if err != nil {
		return netip.AddrPort{}, err
	}
	sort.SliceStable(addrs, func(i, j int) bool { return addrs[i].Unmap().Is4() && !addrs[j].Unmap().Is4() })
	return netip.AddrPortFrom(addrs[0].Unmap(), uint16(pn)), nil
}

// maxVirtual bounds the real addresses one path maps, per family.
const maxVirtual = 1 << 16

// toVirtual returns the virtual address that stands for the real one
// across the path, making one for a new address.
func (p *Path) toVirtual(a netip.AddrPort) (netip.AddrPort, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return netip.AddrPort{}, ErrClosed
	}
	if v, ok := p.virtual[a.Addr()]; ok {
		return netip.AddrPortFrom(v, a.Port()), nil
	}
	var v netip.Addr
	if a.Addr().Is4() {
		if p.next4 == maxVirtual {
			return netip.AddrPort{}, fmt.Errorf("netjam: more than %d IPv4 addresses through one path", maxVirtual)
		}
		p.next4++
		b := emulator.BenchPrefixes[0].Addr().As4()
		b[2], b[3] = byte(p.next4>>8), byte(p.next4)
		v = netip.AddrFrom4(b)
	} else {
		if p.next6 == maxVirtual {
			return netip.AddrPort{}, fmt.Errorf("netjam: more than %d IPv6 addresses through one path", maxVirtual)
		}
		p.next6++
		b := emulator.BenchPrefixes[1].Addr().As16()
		b[14], b[15] = byte(p.next6>>8), byte(p.next6)
		v = netip.AddrFrom16(b)
	}
	p.virtual[a.Addr()], p.real[v] = v, a.Addr()
	return netip.AddrPortFrom(v, a.Port()), nil
}

// toReal returns the real address a virtual one stands for.
func (p *Path) toReal(v netip.AddrPort) (netip.AddrPort, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	a, ok := p.real[v.Addr()]
	return netip.AddrPortFrom(a, v.Port()), ok
}

// dialReal is the far side's dial: to the real address a virtual one
// stands for.
func (p *Path) dialReal(ctx context.Context, network, address string) (net.Conn, error) {
	v, err := netip.ParseAddrPort(address)
	if err != nil {
		return nil, err
	}
	a, ok := p.toReal(v)
	if !ok {
		return nil, fmt.Errorf("netjam: %s stands for no address", address)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, a.String())
}

// netAddr is a as the net package's address of network.
func netAddr(network string, a netip.AddrPort) net.Addr {
	if strings.HasPrefix(network, "udp") {
		return net.UDPAddrFromAddrPort(a)
	}
	return net.TCPAddrFromAddrPort(a)
}

// Close stops the path and closes every connection, listener and packet
// conn made through it. It is safe to call more than once.
func (p *Path) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	cs := make([]closer, 0, len(p.closers))
	for c := range p.closers {
		cs = append(cs, c)
	}
	p.mu.Unlock()
	p.cancel()
	for _, c := range cs {
		c.Close()
	}
	p.b.Close()
	p.wg.Wait()
	return nil
}

// keep registers c to be closed by Close; false when the path is closed
// (c is then closed).
func (p *Path) keep(c closer) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.closers[c] = struct{}{}
	return true
}

// forget is Close's: c was closed by its user.
func (p *Path) forget(c closer) {
	p.mu.Lock()
	delete(p.closers, c)
	p.mu.Unlock()
}
