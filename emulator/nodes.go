package emulator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/netjam/netjam/blueprint"
	"github.com/netjam/netjam/clock"
	"github.com/netjam/netjam/flows"
	"github.com/netjam/netjam/hostnet"
	"github.com/netjam/netjam/netif"
	"github.com/netjam/netjam/scenario"
	"github.com/netjam/netjam/summary"
	"github.com/netjam/netjam/topology"
)

// A node takes the peer's place at the far end of the path: a network
// namespace of netjam's with a TUN device holding the peer's addresses,
// whose kernel ends the client's connections. Both ends are kernels, and
// netjam forwards IP packets between them, terminating nothing:
//
//	kernel -> device -> read loop -> [cell ->] uplink -> node's inbox -> node's device -> node's kernel
//	kernel <- device <- inbox <- [cell <-] downlink <- read loop <- node's device <- node's kernel
//
// The node's device is read and written as the client's is (devEnd):
// large segments cross whole where the path allows, the node's read loop
// sheds at a full downlink. Its command runs in its namespace, with a
// hosts file that names every node, and ends with the run.
type nodeEnd struct {
	devEnd
	cfg   scenario.Node
	addrs []netip.Prefix // its device's addresses: the first node's the peer's
	end   *endHost       // its ends in the graph
	// tx is the node's source in the graph, what its device's read loop
	// reads; rx its inbox, what its device is written from.
	tx, rx topology.ID

	cmd     *exec.Cmd
	out     *prefixWriter
	started time.Time // when cmd started
	// rootless holds the node's namespaces' first process, rootless;
	// nil: the namespace is netjam's (ns).
	rootless *hostnet.Rootless
	waited   chan struct{} // closed when cmd has ended
	waitErr  error         // cmd's end; read after waited is closed
	ended    bool          // netjam ended cmd (the run was over)
	endedMu  sync.Mutex    // guards ended
}

// nodeStopGrace is how long a node's command has after SIGTERM, when
// the run ends, before it is killed.
const nodeStopGrace = 5 * time.Second

// nodeReadyWait bounds how long the run waits for the nodes' commands to
// open a socket before it goes on (see waitReady).
const nodeReadyWait = 5 * time.Second

// nodeEnds adds every node's ends to the graph, the first in the peer's
// place: each device's inbox takes what the uplink delivers to its
// addresses; what its read loop reads enters the downlink. With several
// nodes, what reaches the client's side for a node turns round at the
// hub and crosses the uplink to it.
func (l *lab) nodeEnds(b *pathBuilder, hooks labHooks) error {
	t := l.tun
	for _, i := range l.bp.Kinds(blueprint.Node) {
		m := &l.bp.Machines[i]
		n := &nodeEnd{cfg: l.s.Nodes[m.Node], addrs: m.Addrs}
		t.nodes = append(t.nodes, n)
		if err := l.openNode(n, hooks); err != nil {
			return err
		}
		l.nodeEnd(b, n)
		l.ends[i] = n.end
	}
	t.peer = t.nodes[0].end
	b.betweenLinks(t.nodes)
	l.partitionNames()
	if err := t.writeEtc(l.s); err != nil {
		return err
	}
	if len(t.nodes) > 1 {
		l.hub(b)
	}
	return nil
}

// partitionNames gives the partition each name's addresses: the client
// side's kernel (every station's) and each node's.
func (l *lab) partitionNames() {
	t, pt := l.tun, l.partition
	for _, a := range t.cfg.Device.Addrs {
		pt.addrs[scenario.ClientNode] = append(pt.addrs[scenario.ClientNode], a.Addr())
	}
	for _, sa := range t.cfg.StationAddrs {
		pt.addrs[scenario.ClientNode] = append(pt.addrs[scenario.ClientNode], sa...)
	}
	for _, n := range t.nodes {
		pt.addrs[n.cfg.Name] = n.end.addrs
	}
}

// openNode makes node n's namespace and opens its device there, with a
// default route for each family into it. Rootless (hooks.rootlessNode),
// the namespaces are a user and a network namespace of their own, whose
// first process makes the device and later becomes the command (or holds
// them, without one), as a rootless shell's.
func (l *lab) openNode(n *nodeEnd, hooks labHooks) error {
	t := l.tun
	cfg := hostnet.TUNConfig{Name: t.cfg.Device.Name, Addrs: n.addrs, MTU: t.mtu, Offload: t.cfg.Device.Offload}
	for _, a := range n.addrs {
		def := netip.PrefixFrom(netip.IPv6Unspecified(), 0)
		if a.Addr().Is4() {
			def = netip.PrefixFrom(netip.IPv4Unspecified(), 0)
		}
		if !slices.Contains(cfg.Routes, def) {
			cfg.Routes = append(cfg.Routes, def)
		}
	}
	if hooks.rootlessNode != nil {
		c := hostnet.RootlessCommand{Env: nodeEnv(n.cfg), Dir: n.cfg.Dir}
		if n.cfg.Run != "" {
			c.Args = []string{"/bin/sh", "-c", n.cfg.Run}
		}
		n.out = nodeOutput(hooks.nodeOutput, n.cfg.Name)
		c.Stdout, c.Stderr = n.out, n.out
		var err error
		if n.dev, n.rootless, err = hooks.rootlessNode(cfg, c); err != nil {
			return fmt.Errorf("node %s: %w", n.cfg.Name, err)
		}
		l.log.Info("node", zap.String("name", n.cfg.Name), zap.String("device", n.dev.Name()), zap.Stringers("addresses", n.addrs),
			zap.Bool("rootless", true), zap.String("link", n.cfg.Link), zap.String("run", n.cfg.Run))
		return nil
	}
	newNetns := hooks.nodeNetns
	if newNetns == nil {
		newNetns = hostnet.NewNetns
	}
	var err error
	if n.ns, err = newNetns(); err != nil {
		return fmt.Errorf("node %s: %w", n.cfg.Name, err)
	}
	cfg.Netns = n.ns.Path()
	open := hooks.openNode
	if open == nil {
		open = openTUN
	}
	if n.dev, err = open(cfg); err != nil {
		return fmt.Errorf("node %s: %w", n.cfg.Name, err)
	}
	l.log.Info("node", zap.String("name", n.cfg.Name), zap.String("device", n.dev.Name()), zap.Stringers("addresses", n.addrs),
		zap.String("netns", n.ns.Path()), zap.String("link", n.cfg.Link), zap.String("run", n.cfg.Run))
	return nil
}

// nodeEnd adds node n's ends: its sends enter the downlink, what the
// uplink has for its addresses reaches its device's inbox.
func (l *lab) nodeEnd(b *pathBuilder, n *nodeEnd) {
	e := &endHost{name: n.cfg.Name, sack: true,
		tx: topology.NewSource(n.cfg.Name+" tx", topology.Emits{GSO: true, Partial: true}, l.pool, l.bigPool)}
	for _, a := range n.addrs {
		e.addrs = append(e.addrs, a.Addr())
	}
	e.v4 = e.addrs[0]
	n.end = e
	l.servers = append(l.servers, e)
	q := n.inbox(l, b, "node "+n.cfg.Name)
	e.in = n.in
	n.tx, n.rx = b.g.Add(e.tx.Node()), q
	b.route(b.toServer, l.routers[0], hostPrefixes(e.addrs), q, l.capServer, n.cfg.Name+" rx")
}

// hub turns round, on the client's side, what one node sends another:
// the to-client router hands what it has for a node's address to the
// hub, whose source puts it into the uplink (the paths' router chooses
// the node's link), as a switch in the middle of a star would. The hub
// is a sink and a source, not an edge, so the graph has no cycle; it
// adds no goroutine: the packet goes on on the downlink's, until the
// uplink takes it.
func (l *lab) hub(b *pathBuilder) {
	src := topology.NewSource("hub", topology.Emits{GSO: true, Partial: true}, l.pool, l.bigPool)
	b.g.Link(b.g.Add(src.Node()), b.up)
	in := b.g.Add(topology.Node{Name: "hub in", In: topology.SinkFunc(src.Push), Accepts: topology.Accepts{GSO: topology.Yes, Partial: true}})
	var prefixes []netip.Prefix
	for _, n := range l.tun.nodes {
		prefixes = append(prefixes, hostPrefixes(n.end.addrs)...)
	}
	b.route(b.toClient, l.routers[1], prefixes, in, nil, "hub")
}

// hostsFile returns the hosts file of a scenario's nodes: localhost, the
// client side's addresses (ClientNode) and each node's.
func hostsFile(s *scenario.Scenario, t *tunEnd) []byte {
	var b bytes.Buffer
	b.WriteString("# made by netjam for the nodes of scenario " + s.Name + "\n")
	b.WriteString("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
	for _, a := range t.cfg.Device.Addrs {
		fmt.Fprintf(&b, "%s\t%s\n", a.Addr(), scenario.ClientNode)
	}
	for _, n := range t.nodes {
		for _, a := range n.addrs {
			fmt.Fprintf(&b, "%s\t%s\n", a.Addr(), n.cfg.Name)
		}
	}
	return b.Bytes()
}

// resolvConf is the nodes' resolv.conf: no DNS server is on a path of
// nodes (none answers unless a node runs one), so a name that is not in
// the hosts file fails at once (nothing listens on the node's own
// loopback) rather than after the resolver's timeouts.
const resolvConf = "# made by netjam: the nodes' names are in /etc/hosts; no DNS server is on the path\nnameserver 127.0.0.1\noptions timeout:1 attempts:1\n"

// writeEtc writes the files of the nodes' /etc into a new folder of its
// own, which only its owner may change.
func (t *tunEnd) writeEtc(s *scenario.Scenario) error {
	dir, err := os.MkdirTemp("", "netjam-nodes-")
	if err != nil {
		return fmt.Errorf("the nodes' /etc files: %w", err)
	}
	t.etc = dir
	// Readable by the commands, whoever they run as.
	if err := os.Chmod(dir, 0o755); err != nil {
		return fmt.Errorf("the nodes' /etc files: %w", err)
	}
	for name, b := range map[string][]byte{"hosts": hostsFile(s, t), "resolv.conf": []byte(resolvConf)} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return fmt.Errorf("the nodes' /etc files: %w", err)
		}
	}
	return nil
}

// etcKey is the context key of the nodes' /etc files (NodesEtc).
type etcKey struct{}

// NodesEtc returns, in Options.Attached's context, the folder of files a
// command Attached starts in the client's namespace (netjam shell's)
// should see in /etc (hostnet.Netns.Start): a hosts file naming the
// run's nodes, a resolv.conf; "" when the run has no node. The folder is
// there while Attached runs.
func NodesEtc(ctx context.Context) string {
	s, _ := ctx.Value(etcKey{}).(string)
	return s
}

// nodesEtc is the nodes' /etc folder, "" without a node.
func (l *lab) nodesEtc() string {
	if l.tun == nil {
		return ""
	}
	return l.tun.etc
}

// startNodes starts every node's command, in the scenario's order, as
// the run starts (before its flows connect and its timeline begins). A
// command that cannot be started fails the run.
func (l *lab) startNodes(o Options) error {
	if l.tun == nil {
		return nil
	}
	for _, n := range l.tun.nodes {
		if err := l.startNode(o, n); err != nil {
			return err
		}
		n.started = time.Now()
	}
	return nil
}

// waitNodes waits until each node's command has a socket in its
// namespace (a server listens, a client connects) or has ended, for at
// most nodeReadyWait from its start: netjam shell's command starts once
// the nodes are ready for it.
func (l *lab) waitNodes() {
	if l.tun == nil {
		return
	}
	for _, n := range l.tun.nodes {
		if n.cmd != nil && !waitReady(n.cmd.Process.Pid, n.waited, n.started.Add(nodeReadyWait)) {
			l.log.Warn("waited for the node's command to open a socket (a server listening, a client connecting) and went on without", zap.String("node", n.cfg.Name), zap.Duration("wait", nodeReadyWait))
		}
	}
}

// startNode starts node n's command, if it has one, in its namespace.
func (l *lab) startNode(o Options, n *nodeEnd) error {
	if n.cfg.Run == "" {
		return nil
	}
	etc := l.tun.etc
	// Said plainly: a missing folder fails the command's start as if
	// /bin/sh were missing.
	if dir := n.cfg.Dir; dir != "" {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			if err == nil {
				err = errors.New("not a folder")
			}
			return fmt.Errorf("node %s: the folder of %q, %s: %w", n.cfg.Name, n.cfg.Run, dir, err)
		}
	}
	if n.rootless != nil {
		// The namespaces' first process becomes the command.
		if err := n.rootless.Start(etc); err != nil {
			return fmt.Errorf("node %s: starting %q: %w", n.cfg.Name, n.cfg.Run, err)
		}
		n.watch(n.rootless.Cmd())
		l.log.Info("node command started", zap.String("node", n.cfg.Name), zap.Int("pid", n.cmd.Process.Pid), zap.String("run", n.cfg.Run), zap.Bool("rootless", true))
		return nil
	}
	cmd := exec.Command("/bin/sh", "-c", n.cfg.Run)
	cmd.Env = append(os.Environ(), nodeEnv(n.cfg)...)
	cmd.Dir = n.cfg.Dir
	n.out = nodeOutput(o.NodeOutput, n.cfg.Name)
	cmd.Stdout, cmd.Stderr = n.out, n.out
	if o.ConfineNode != nil {
		if err := o.ConfineNode(cmd); err != nil {
			return fmt.Errorf("node %s: %w", n.cfg.Name, err)
		}
	}
	ownGroup(cmd)
	if err := n.ns.Start(cmd, etc); err != nil {
		return fmt.Errorf("node %s: starting %q: %w", n.cfg.Name, n.cfg.Run, err)
	}
	n.watch(cmd)
	l.log.Info("node command started", zap.String("node", n.cfg.Name), zap.Int("pid", cmd.Process.Pid), zap.String("run", n.cfg.Run))
	return nil
}

// watch makes cmd, started, the node's command, and waits for it.
func (n *nodeEnd) watch(cmd *exec.Cmd) {
	n.cmd, n.waited = cmd, make(chan struct{})
	go func() {
		n.waitErr = cmd.Wait()
		close(n.waited)
	}()
}

// nodeEnv is what a node's command gets added to netjam's environment.
func nodeEnv(cfg scenario.Node) []string {
	return append([]string{"NETJAM_NODE=" + cfg.Name}, cfg.Env...)
}

// nodeOutput returns the writer of node name's output: each line to w
// (nil: os.Stderr) after the name.
func nodeOutput(w io.Writer, name string) *prefixWriter {
	if w == nil {
		w = os.Stderr
	}
	return &prefixWriter{w: w, prefix: name + "| "}
}

// waitReady waits until the network namespace of process pid has a
// socket (see hasSocket), until the process ends (ended is closed), or
// until deadline. It reports whether the socket came.
func waitReady(pid int, ended <-chan struct{}, deadline time.Time) bool {
	for {
		if hasSocket(pid) {
			return true
		}
		select {
		case <-ended:
			return false
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// socketTables are the kernel's socket tables of a namespace, in
// /proc/PID/net.
var socketTables = []string{"tcp", "tcp6", "udp", "udp6", "raw", "raw6", "icmp", "icmp6"}

// hasSocket reports whether the network namespace of process pid has a
// socket: a node's command is ready for the others once it has one, a
// server listening or bound, a client connecting or pinging.
func hasSocket(pid int) bool {
	for _, table := range socketTables {
		b, err := readBounded(fmt.Sprintf("/proc/%d/net/%s", pid, table), 64<<10)
		if err != nil {
			continue
		}
		// A header line, then one line per socket.
		if lines := strings.Count(strings.TrimSpace(string(b)), "\n"); lines > 0 {
			return true
		}
	}
	return false
}

// readBounded reads at most max bytes of the file at path.
func readBounded(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, max))
}

// running reports whether the node's command was started and has not
// ended.
func (n *nodeEnd) running() bool {
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.waited:
		return false
	default:
		return true
	}
}

// terminate sends SIGTERM to the node command's process group, if it
// still runs, and marks it ended by netjam.
func (n *nodeEnd) terminate() {
	if !n.running() {
		return
	}
	n.endedMu.Lock()
	defer n.endedMu.Unlock()
	if !n.ended {
		n.ended = true
		terminateGroup(n.cmd)
	}
}

// stopNode ends the node's command, if it still runs: SIGTERM to its
// process group, then SIGKILL after nodeStopGrace.
func (n *nodeEnd) stopNode(log *zap.Logger) {
	if !n.running() {
		return
	}
	n.terminate()
	select {
	case <-n.waited:
	case <-time.After(nodeStopGrace):
		log.Warn("the node's command did not end after SIGTERM: killing it", zap.String("node", n.cfg.Name), zap.Duration("grace", nodeStopGrace))
		killGroup(n.cmd)
		<-n.waited
	}
}

// close ends the node's command and closes its device and its
// namespace.
func (n *nodeEnd) close(log *zap.Logger) error {
	n.stopNode(log)
	if n.rootless != nil && n.cmd == nil {
		n.rootless.Kill() // never started, or holding the namespaces
	}
	if n.out != nil {
		n.out.Flush()
	}
	err := n.devEnd.close()
	n.ns.Close()
	return err
}

// closeNodes ends every node's command (SIGTERM to all first, so that
// they end together) and closes the nodes and their /etc folder.
func (t *tunEnd) closeNodes(log *zap.Logger) error {
	for _, n := range t.nodes {
		n.terminate()
	}
	var errs []error
	for _, n := range t.nodes {
		errs = append(errs, n.close(log))
	}
	if t.etc != "" {
		os.RemoveAll(t.etc)
	}
	return errors.Join(errs...)
}

// nodesErr returns the first node command's failure (see nodeEnd.err).
func (t *tunEnd) nodesErr() error {
	for _, n := range t.nodes {
		if err := n.err(); err != nil {
			return err
		}
	}
	return nil
}

// err returns the node command's failure: an exit status other than 0
// (or a signal) when it ended on its own, before the run did; nil when
// it succeeded, never ran, or netjam ended it.
func (n *nodeEnd) err() error {
	if n.cmd == nil {
		return nil
	}
	select {
	case <-n.waited:
	default:
		return nil
	}
	n.endedMu.Lock()
	defer n.endedMu.Unlock()
	if n.ended || n.waitErr == nil {
		return nil
	}
	return fmt.Errorf("node %s: %q: %w", n.cfg.Name, n.cfg.Run, n.waitErr)
}

func (n *nodeEnd) summary() *summary.NodeSummary {
	ns := &summary.NodeSummary{Name: n.cfg.Name, Device: n.dev.Name(), DeviceStats: n.stats(), Run: n.cfg.Run}
	for _, a := range n.addrs {
		ns.Addresses = append(ns.Addresses, a.String())
	}
	if n.cmd != nil {
		select {
		case <-n.waited:
			st := exitStatus(n.cmd.ProcessState)
			ns.ExitStatus = &st
			n.endedMu.Lock()
			ns.EndedByNetjam = n.ended
			n.endedMu.Unlock()
		default:
		}
	}
	return ns
}

// prefixWriter writes each line of a node command's output with the
// node's name before it, whole lines at a time, so that two commands'
// lines do not mix; a line longer than maxPrefixLine is cut into lines
// of that length.
type prefixWriter struct {
	mu     sync.Mutex
	w      io.Writer
	prefix string
	line   []byte
}

const maxPrefixLine = 4096

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(b)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			take := min(len(b), maxPrefixLine-len(p.line))
			p.line = append(p.line, b[:take]...)
			b = b[take:]
			if len(p.line) == maxPrefixLine {
				p.flushLocked()
			}
			continue
		}
		p.line = append(p.line, b[:i]...)
		b = b[i+1:]
		p.flushLocked()
	}
	return n, nil
}

// Flush writes what is left of the last line.
func (p *prefixWriter) Flush() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.line) > 0 {
		p.flushLocked()
	}
}

func (p *prefixWriter) flushLocked() {
	out := make([]byte, 0, len(p.prefix)+len(p.line)+1)
	out = append(append(append(out, p.prefix...), p.line...), '\n')
	p.w.Write(out) //nolint:errcheck // a node's output is best effort
	p.line = p.line[:0]
}

// kernelListener accepts a kernel's connection (in the namespace the
// listener was made in).
type kernelListener struct{ *net.TCPListener }

func (l kernelListener) accept(ctx context.Context) (net.Conn, func() netif.TCPInfo, error) {
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	c, err := l.AcceptTCP()
	if err != nil {
		return nil, nil, err
	}
	kc := &hostnet.KernelTCPConn{TCPConn: c}
	return abortOnClose{kc}, kc.Info, nil
}

// newNodeFlow connects a kernel flow to the node: kernel to kernel, the
// client's socket in the device's namespace, the node's in the node's.
// The sender's congestion control is the flow's: the client kernel's up,
// the node kernel's down.
func (l *lab) newNodeFlow(ctx context.Context, i int, f scenario.Flow, port uint16, clk clock.Clock) (flows.Flow, []closer, error) {
	t, fl := l.tun, l.bp.Flows[i]
	n := t.nodes[slices.IndexFunc(t.nodes, func(n *nodeEnd) bool { return n.end == l.ends[fl.Server] })]
	local, to := fl.ClientAddr, fl.ServerAddr
	down := f.Direction == "down"
	if f.Type == "tcp" {
		opts := hostnet.KernelTCPOptions{SendBuffer: f.SendBuffer, ReceiveBuffer: f.ReceiveBuffer}
		nodeOpts, clientOpts := opts, opts
		clientOpts.Local = local
		if down {
			nodeOpts.CC = f.CC
		} else {
			clientOpts.CC = f.CC
		}
		var ln *net.TCPListener
		err := n.ns.Do(func() error {
			var err error
			ln, err = hostnet.ListenKernelTCP(netip.AddrPortFrom(to, port), nodeOpts)
			return err
		})
		if err != nil {
			return nil, nil, fmt.Errorf("flow %s: listening in node %s: %w", f.Name, n.cfg.Name, err)
		}
		return newTCPFlow(ctx, f, clk, kernelListener{ln}, l.warnStall(f.Name), t.kernelDialer(ctx, netip.AddrPortFrom(to, port), clientOpts), down)
	}
	// UDP: the sender's socket in one namespace, the receiver's in the
	// other.
	sendNS, recvNS := t.ns, n.ns
	from, dst := local, to
	if down {
		sendNS, recvNS, from, dst = n.ns, t.ns, to, local
	}
	var recv net.PacketConn
	err := recvNS.Do(func() error {
		c, err := hostnet.ListenKernelUDP(netip.AddrPortFrom(dst, port))
		if err == nil {
			recv = c
		}
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("flow %s: %w", f.Name, err)
	}
	var send net.Conn
	err = sendNS.Do(func() error {
		c, err := net.DialUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(from, 0)), net.UDPAddrFromAddrPort(netip.AddrPortFrom(dst, port)))
		if err == nil {
			send = c
		}
		return err
	})
	if err != nil {
		recv.Close()
		return nil, nil, fmt.Errorf("flow %s: %w", f.Name, err)
	}
	return newUDPFlow(i, f, clk, send, recv)
}
