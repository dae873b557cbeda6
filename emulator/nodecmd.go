package emulator

// The nodes' commands: started in their namespaces as the run starts,
// waited for until they are ready, ended with the run, their output
// prefixed with the node's name, their failures the run's.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/netjam/netjam/scenario"
)

// nodeStopGrace is how long a node's command has after SIGTERM, when
// the run ends, before it is killed.
const nodeStopGrace = 5 * time.Second

// nodeReadyWait bounds how long the run waits for the nodes' commands to
// open a socket before it goes on (see waitReady).
const nodeReadyWait = 5 * time.Second

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
