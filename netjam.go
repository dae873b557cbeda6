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
	"math"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/netjam/netjam/emulator"
	"github.com/netjam/netjam/hostcfg"
	"github.com/netjam/netjam/impair"
	"github.com/netjam/netjam/netif"
	"github.com/netjam/netjam/scenario"
)

// Link is an emulated path's impairment, applied to each direction; Up
// and Down, when set, replace it as a whole for the uplink (from the
// program to the real address) or the downlink: a field Up leaves 0 is 0
// on the uplink, whatever the Link's. The zero Link changes nothing. For
// anything else a scenario's link can do (loss models, queue disciplines,
// reordering, traces), use Load.
//
// Each value is checked as a scenario file's is (the Link's own even when
// Up and Down replace it), and a bad one is refused with a message naming
// its field: "netjam: Link.Up.Loss: 1.5 is out of range (expected 0% to
// 100%)". The path is the scenario of a file whose link has the Link's
// values and, under uplink and downlink, those in which Up and Down
// differ from them: so Path.Set of a Link's key ("loss") changes the
// directions that have the Link's value, and leaves a direction with a
// value of its own ("uplink.loss") as it is.
type Link struct {
	// Delay is added to every packet; Jitter varies it (uniformly, by up to
	// Jitter either way, never reordering).
	Delay, Jitter time.Duration
	// Loss is the probability that a packet is lost, 0 to 1. A direction
	// of Up or Down without loss under a Link with loss has a random loss
	// of 0 (as a scenario says it: loss: 0).
	Loss float64
	// Rate limits the direction, in whole bits per second (10e6 for 10
	// Mbit/s), at most 1e12; 0 is unlimited. Packets wait in a drop-tail
	// queue of Queue packets (0: the default, 1000).
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
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s, err := l.scenario()
	if err != nil {
		return nil, err
	}
	return start("netjam.Link", s)
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
	return start(name, plan.Runs[0])
}

// start builds and starts the path of s, named name in messages.
func start(name string, s *scenario.Scenario) (*Path, error) {
	p := &Path{real: map[netip.Addr]netip.Addr{}, virtual: map[netip.Addr]netip.Addr{}, closers: map[closer]struct{}{}}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	b, err := emulator.NewBench(s, emulator.BenchOptions{Dial: p.dialReal, Log: zap.NewNop()})
	if err != nil {
		p.cancel()
		return nil, fmt.Errorf("netjam: %s: %w", name, err)
	}
	p.b, p.seed = b, s.Seed
	return p, nil
}

// scenario returns l's scenario: one link, the Link's values for both
// directions, Up's and Down's replacing them, each value checked as a
// scenario file's is.
func (l Link) scenario() (*scenario.Scenario, error) {
	var errs []string
	c := scenario.LinkConfig{Name: scenario.DefaultLink, MTU: l.MTU, Seed: l.Seed, SeedSet: l.Seed != 0}
	c.Link = Direction{l.Delay, l.Jitter, l.Loss, l.Rate, l.Queue}.config("Link", &errs)
	if l.Up != nil {
		up := l.Up.config("Link.Up", &errs)
		c.Uplink = &up
	}
	if l.Down != nil {
		down := l.Down.config("Link.Down", &errs)
		c.Downlink = &down
	}
	s, err := scenario.NewLink(c)
	var es scenario.Errors
	if errors.As(err, &es) {
		for _, e := range es {
			errs = append(errs, linkField(e.Path)+": "+e.Msg)
		}
	} else if err != nil {
		errs = append(errs, err.Error())
	}
	if len(errs) > 0 {
		slices.SortStableFunc(errs, func(a, b string) int { return fieldRank(a) - fieldRank(b) })
		return nil, errors.New("netjam: " + strings.Join(errs, "\n"))
	}
	return s, nil
}

// config is d as a direction of a scenario, named field ("Link.Up") in
// the problems it adds to errs: those of its rate, which the scenario
// takes in whole bits per second. NewLink checks the rest.
func (d Direction) config(field string, errs *[]string) impair.Config {
	c := impair.Config{
		Delay: impair.DelayConfig{Time: d.Delay, Jitter: d.Jitter},
		Queue: impair.QueueConfig{LimitPackets: d.Queue},
	}
	if d.Loss != 0 {
		c.Loss = impair.LossConfig{Model: impair.LossRandom, P: d.Loss}
	}
	r := strconv.FormatFloat(d.Rate, 'g', -1, 64)
	switch {
	case math.IsNaN(d.Rate) || d.Rate < 0:
		*errs = append(*errs, field+".Rate: "+r+" is not a rate in bits per second (0: unlimited)")
	case d.Rate > scenario.MaxRate:
		*errs = append(*errs, field+".Rate: "+r+" is more than the maximum rate, "+scenario.FormatRate(scenario.MaxRate))
	case d.Rate != math.Trunc(d.Rate):
		*errs = append(*errs, field+".Rate: "+r+" is not a whole number of bits per second")
	default:
		c.Rate.Bitrate = uint64(d.Rate)
	}
	return c
}

// linkKeys name the Link's field of each key of a scenario's link a
// Direction sets, in the scalar form and the mapping form.
var linkKeys = map[string]string{
	"delay": "Delay", "delay.time": "Delay", "delay.jitter": "Jitter", "loss": "Loss", "loss.p": "Loss",
	"rate": "Rate", "rate.bitrate": "Rate", "queue": "Queue", "queue.limit": "Queue",
}

// linkField names the field of a Link that the key path of a scenario
// made of it stands for: link.uplink.loss is Link.Up.Loss.
func linkField(path string) string {
	if path == "mtu" {
		return "Link.MTU"
	}
	field, key := "Link", strings.TrimPrefix(path, "link.")
	if rest, ok := strings.CutPrefix(key, "uplink."); ok {
		field, key = "Link.Up", rest
	} else if rest, ok := strings.CutPrefix(key, "downlink."); ok {
		field, key = "Link.Down", rest
	}
	if f, ok := linkKeys[key]; ok {
		return field + "." + f
	}
	return field + ": " + path // no key of a Direction's: said as it is
}

// fieldRank orders a problem of a Link by its field, as Link declares
// them: the MTU, the Link's own, Up's, Down's.
func fieldRank(msg string) int {
	field, _, _ := strings.Cut(msg, ": ")
	rank := 0
	for i, f := range []string{"Link.", "Link.Up.", "Link.Down."} {
		if rest, ok := strings.CutPrefix(field, f); ok && !strings.Contains(rest, ".") {
			rank = 1 + 10*i + slices.Index([]string{"Delay", "Jitter", "Loss", "Rate", "Queue"}, rest)
		}
	}
	return rank
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
// On a path of a Link, a key of the link ("loss") is the Link's: it
// changes the directions that have the Link's value of it, not one whose
// Up or Down has a value of its own ("uplink.loss" changes that one); when
// both have their own, it would change nothing, and is refused.
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
