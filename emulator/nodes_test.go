package emulator

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/netjam/netjam/hostcfg"
	"github.com/netjam/netjam/hostnet"
	"github.com/netjam/netjam/internal/testenv"
	"github.com/netjam/netjam/summary"
)

// TestNodeForwardsKernelToKernel runs a node's wiring without root: two
// netstack hosts play the kernels behind in-memory devices, the client's
// and the node's. The client's TCP reaches a listener of the node's
// kernel across 10 ms each way and its bytes come back: nothing in netjam
// terminated the connection (no relay, no peer TCP), and both devices
// carried its packets.
func TestNodeForwardsKernelToKernel(t *testing.T) {
	ready, nodeReady := make(chan *fakeKernel, 1), make(chan *fakeKernel, 1)
	o := Options{
		openTUN: fakeTUN(t, ready), openNodeTUN: fakeTUN(t, nodeReady),
		nodeNetns: func() (*hostnet.Netns, error) { return nil, nil },
		Attached: func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			k, node := <-ready, <-nodeReady
			if got := NodesEtc(ctx); got == "" {
				return fmt.Errorf("no /etc files for the client's command")
			}
			return echoAcross(ctx, k, node)
		},
	}
	sum, err := Run(context.Background(), mustPlan(t, "link: {delay: 10ms}\ntun: {}\nnodes: [{name: server}]\n"), o)
	if err != nil {
		t.Fatal(err)
	}
	ts := sum.Runs[0].TUN
	if ts == nil || len(ts.Nodes) != 1 {
		t.Fatalf("not one node in the TUN summary: %+v", ts)
	}
	node := ts.Nodes[0]
	if ts.Relay.TCP.Served+ts.Relay.TCP.Relayed+ts.Relay.UDP.Served != 0 || ts.PeerTCP.SegmentsReceived != 0 {
		t.Errorf("netjam terminated something: relay %+v, peer TCP %+v", ts.Relay, ts.PeerTCP)
	}
	if ts.Writes == 0 || node.Writes == 0 {
		t.Errorf("writes into the client's device %d, into the node's %d: want both", ts.Writes, node.Writes)
	}
	if node.Name != "server" || strings.Join(node.Addresses, ",") != "10.99.0.2/24" {
		t.Errorf("node %q at %v, want server at 10.99.0.2/24", node.Name, node.Addresses)
	}
}

// echoAcross has the node's kernel echo what the client's sends it, and
// checks the round trip took both delays.
func echoAcross(ctx context.Context, k, node *fakeKernel) error {
	ln, err := node.host.ListenTCP(5000, hostcfg.TCPOptions{})
	if err != nil {
		return err
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept(ctx)
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(c, c)
	}()
	c, err := k.host.DialTCP(ctx, netip.AddrPortFrom(netip.MustParseAddr("10.99.0.2"), 5000), hostcfg.TCPOptions{})
	if err != nil {
		return fmt.Errorf("dial the node: %w", err)
	}
	defer c.Close()
	start := time.Now()
	msg := bytes.Repeat([]byte("kernel to kernel "), 1000)
	if _, err := c.Write(msg); err != nil {
		return err
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		return fmt.Errorf("echo read: %w", err)
	}
	if rtt := time.Since(start); !bytes.Equal(got, msg) || rtt < 20*time.Millisecond {
		return fmt.Errorf("echo: %d bytes (equal: %v) after %v, want %d after at least 20ms", len(got), bytes.Equal(got, msg), rtt, len(msg))
	}
	return nil
}

// TestPrefixWriter: a node's output reaches netjam's in whole lines, each
// after the node's name, however the writes cut it; a line without end
// is cut at maxPrefixLine, and Flush writes what is left.
func TestPrefixWriter(t *testing.T) {
	var b bytes.Buffer
	p := &prefixWriter{w: &b, prefix: "server| "}
	for _, s := range []string{"one\ntw", "o\n", "", "\nthree"} {
		if n, err := p.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", s, n, err)
		}
	}
	if got, want := b.String(), "server| one\nserver| two\nserver| \n"; got != want {
		t.Errorf("before Flush: %q, want %q", got, want)
	}
	p.Flush()
	p.Write(bytes.Repeat([]byte("x"), maxPrefixLine+1))
	p.Flush()
	want := "server| one\nserver| two\nserver| \nserver| three\nserver| " + strings.Repeat("x", maxPrefixLine) + "\nserver| x\n"
	if got := b.String(); got != want {
		t.Errorf("got %q...", got[:min(len(got), 80)])
	}
}

// runFakeNodes runs plan y with in-memory devices for the client and its
// nodes (no namespace: their commands run in the test's, and a mount
// namespace of their own for the hosts file needs root), attached waiting
// for wait.
func runFakeNodes(t *testing.T, y string, wait time.Duration) (*summary.Summary, error) {
	t.Helper()
	testenv.RequireTUN(t)
	ready, nodeReady := make(chan *fakeKernel, 1), make(chan *fakeKernel, 8)
	o := Options{
		openTUN: fakeTUN(t, ready), openNodeTUN: fakeTUN(t, nodeReady),
		nodeNetns:  func() (*hostnet.Netns, error) { return nil, nil },
		NodeOutput: io.Discard,
		Attached: func(ctx context.Context) error {
			select {
			case <-time.After(wait):
			case <-ctx.Done():
			}
			return nil
		},
	}
	return Run(context.Background(), mustPlan(t, y), o)
}

// TestNodeCommandFailsTheRun: a node's command that exits non-zero on its
// own fails the run, named; one that netjam ends at the run's end does
// not.
func TestNodeCommandFailsTheRun(t *testing.T) {
	_, err := runFakeNodes(t, "tun: {}\nnodes: [{name: s, run: 'exit 3'}, {name: t, run: 'exec sleep 30'}]\n", time.Second)
	if err == nil || !strings.Contains(err.Error(), `node s: "exit 3": exit status 3`) || strings.Contains(err.Error(), "node t") {
		t.Errorf("run: %v, want node s's failure alone", err)
	}
}

// TestNodeCommandThatCannotStart: a node's command that cannot start
// (its folder is missing) fails the run before anything else runs.
func TestNodeCommandThatCannotStart(t *testing.T) {
	_, err := runFakeNodes(t, "tun: {}\nnodes: [{name: s, run: 'true', dir: /nonexistent-netjam}]\n", time.Second)
	if err == nil || !strings.Contains(err.Error(), `node s: the folder of "true", /nonexistent-netjam: stat /nonexistent-netjam: no such file or directory`) {
		t.Errorf("run: %v, want node s's start refused, naming the folder", err)
	}
}
