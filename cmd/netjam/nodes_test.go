//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/netjam/netjam/internal/testenv"
	"github.com/netjam/netjam/summary"
)

// TestShellNodeIperf3Download: netjam shell --node server='iperf3 -s'
// -- iperf3 -c server -R -C bbr downloads from the node's kernel, which
// sends with BBR: the client finds the node by name, and starts once the
// node's server listens.
func TestShellNodeIperf3Download(t *testing.T) {
	testenv.RequireTUN(t)
	testenv.RequireTool(t, "iperf3", "iperf3")
	cmd := netjamProcess(t, "shell", "-q", "--set", "link.delay=10ms", "--set", "link.rate=20Mbps",
		"--node", "server=iperf3 -s", "--", "iperf3", "-c", "server", "-R", "-C", "bbr", "-t", "2", "-J")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("netjam shell --node: %v\n%s\n%s", err, out, stderr.Bytes())
	}
	var r struct {
		End struct {
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
			CC string `json:"sender_tcp_congestion"`
		} `json:"end"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("iperf3's report: %v\n%s", err, out)
	}
	if r.End.CC != "bbr" || r.End.SumReceived.BitsPerSecond < 10e6 {
		t.Errorf("the download: sender %q at %.2f Mbit/s; want bbr, most of 20 Mbit/s", r.End.CC, r.End.SumReceived.BitsPerSecond/1e6)
	}
	if !strings.Contains(stderr.String(), "server| Accepted connection from 10.99.0.1") {
		t.Errorf("the node's output, each line after its name, is not on netjam's stderr:\n%s", stderr.Bytes())
	}
}

// TestShellNodeExitAndNames: COMMAND's exit status is netjam's, the node's
// command ends with it (SIGTERM, well before its own end), and every
// node's name resolves on both sides; under sudo the node's command runs
// as the invoking user.
func TestShellNodeExitAndNames(t *testing.T) {
	testenv.RequireTUN(t)
	cmd := netjamProcess(t, "shell", "-q", "--node", "server=id -u; getent hosts client server; exec sleep 60",
		"--", "sh", "-c", "getent hosts client server; exit 3")
	cmd.Env = append(cmd.Env, "SUDO_UID=65534", "SUDO_GID=65534", "SUDO_USER=nobody")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	out, err := cmd.Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("exit %v, want the command's 3\n%s\n%s", err, out, stderr.Bytes())
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("netjam took %v: the node's sleep 60 outlived the command", took)
	}
	names := "10.99.0.1       client\n10.99.0.2       server\n"
	if string(out) != names {
		t.Errorf("the client's getent: %q, want %q", out, names)
	}
	e := stderr.String()
	if !strings.Contains(e, "server| 65534\n") || !strings.Contains(e, "server| 10.99.0.1       client\nserver| 10.99.0.2       server\n") {
		t.Errorf("the node's output (uid, then its getent):\n%s", e)
	}
}

// TestShellNodeBadUsage: mistakes in --node exit 2 before anything runs.
func TestShellNodeBadUsage(t *testing.T) {
	for _, c := range []struct {
		node, want string
	}{
		{"server", `--node "server": expected NAME=COMMAND, like --node server='iperf3 -s'`},
		{"=iperf3 -s", `--node "=iperf3 -s": expected NAME=COMMAND`},
		{"client=true", `nodes[0].name: "client" names the TUN device's side`},
		{"a_b=true", `"a_b" is not a valid node name`},
	} {
		code, _, stderr := netjam(t, "shell", "--node", c.node, "--", "true")
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("--node %q: exit %d, %q; want 2 and %q", c.node, code, stderr, c.want)
		}
	}
}

// TestShellNodeRootless runs netjam shell with a node as an unprivileged
// user: the node, like the shell's command, is a user and network
// namespace of its own (its command root there), both resolve each
// other's names, the client pings the node across the path, and nothing
// of theirs outlives netjam.
func TestShellNodeRootless(t *testing.T) {
	testenv.RequireTUNForAll(t) // to become nobody and open /dev/net/tun
	testenv.RequireUserns(t)
	cmd, _ := asNobody(t, "shell", "-q", "--set", "link.delay=5ms",
		"--node", "server=id -u; getent hosts client; exec sleep 30",
		"--", "sh", "-c", "getent hosts server; ping -n -c 3 -i 0.2 server | grep -o 'time=[0-9.]*'; exit 4")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 4 {
		t.Fatalf("rootless shell with a node: %v, want the command's exit status 4\n%s%s", err, out, stderr.Bytes())
	}
	t.Logf("client:\n%s\nstderr:\n%s", out, stderr.Bytes())
	if got := string(out); !strings.HasPrefix(got, "10.99.0.2       server\n") || strings.Count(got, "time=") != 3 {
		t.Errorf("the client's output %q: want the node's name resolved and 3 pings answered", got)
	}
	if e := stderr.String(); !strings.Contains(e, "server| 0\n") || !strings.Contains(e, "server| 10.99.0.1       client\n") {
		t.Errorf("the node's output: want uid 0 (of its user namespace) and the client's name resolved:\n%s", e)
	}
	if out, _ := exec.Command("pgrep", "-u", "65534").Output(); len(out) > 0 {
		t.Errorf("processes of nobody left after netjam: %s", out)
	}
}

// TestRunNodesRootless runs a scenario with two nodes as an unprivileged
// user: netjam runs again as root of a user namespace of its own, makes
// the nodes there, and a kernel flow reaches the second node, sent by its
// kernel with BBR, while the first node's command pings it by name.
func TestRunNodesRootless(t *testing.T) {
	testenv.RequireTUNForAll(t) // to become nobody and open /dev/net/tun
	testenv.RequireUserns(t)
	cmd, dir := asNobody(t, "run", "-q", "--out", "out", "nodes.yaml")
	os.WriteFile(filepath.Join(dir, "nodes.yaml"), []byte(`name: rootless-nodes
duration: 20s
link: {delay: 5ms}
tun: {}
nodes:
  - {name: a, run: ping -n -q -c 3 -i 0.2 b}
  - {name: b}
flows:
  - {name: bulk, type: tcp, stack: kernel, node: b, direction: down, cc: bbr, duration: 2s}
`), 0o644)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("rootless run with nodes: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "a| 3 packets transmitted, 3 received") {
		t.Errorf("node a's pings to b: %s", out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "out", "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var sum summary.Summary
	if err := json.Unmarshal(b, &sum); err != nil || len(sum.Runs) != 1 || sum.Runs[0].TUN == nil {
		t.Fatalf("summary: %v\n%s", err, b)
	}
	r := sum.Runs[0]
	if len(r.Flows) != 1 || r.Flows[0].TCPSummary == nil || r.Flows[0].BytesReceived == 0 || r.Flows[0].CC != "bbr" || len(r.TUN.Nodes) != 2 ||
		r.TUN.Nodes[0].ExitStatus == nil || *r.TUN.Nodes[0].ExitStatus != 0 {
		t.Errorf("rootless run with nodes: %+v", r)
	}
}
