package emulator

// The nodes' /etc: a hosts file naming every node and a resolv.conf,
// seen by the nodes' commands and netjam shell's.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/netjam/netjam/scenario"
)

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
