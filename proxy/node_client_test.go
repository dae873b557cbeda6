package proxy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/netjam/netjam/proxy"
)

// nodeClientPackage is the release of toxiproxy's Node.js client
// (toxiproxy-node-client on npm, the client toxiproxy's README lists for
// Node.js) that TestNodeClient runs.
const nodeClientPackage = "toxiproxy-node-client@4.1.0"

// npmInstallTimeout bounds the client's install from the npm registry.
const npmInstallTimeout = 3 * time.Minute

// nodeClient returns node's path and the node_modules folder that holds
// nodeClientPackage, installed once with npm into the user's cache folder
// (netjam-test/ in it) and taken from there afterwards. Without node or
// npm, or offline, it skips, unless NETJAM_REQUIRE_TOXIPROXY=1 (CI) makes
// that a failure.
func nodeClient(t *testing.T) (node, modules string) {
	t.Helper()
	skip := func(msg string) {
		t.Helper()
		if os.Getenv("NETJAM_REQUIRE_TOXIPROXY") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg + " (NETJAM_REQUIRE_TOXIPROXY=1 makes this a failure)")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		skip("toxiproxy's Node.js client needs node: " + err.Error())
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		skip("toxiproxy's Node.js client is installed with npm: " + err.Error())
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = t.TempDir()
	}
	base = filepath.Join(base, "netjam-test")
	name := strings.ReplaceAll(nodeClientPackage, "@", "-")
	dir := filepath.Join(base, name)
	modules = filepath.Join(dir, "node_modules")
	pkg := filepath.Join(modules, strings.Split(nodeClientPackage, "@")[0], "package.json")
	if _, err := os.Stat(pkg); err == nil {
		return node, modules
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		skip("a folder for npm's install: " + err.Error())
	}
	// Into a folder of its own, renamed into place once whole, so that an
	// install cut short is never taken for one that is done.
	tmp, err := os.MkdirTemp(base, name+".install-")
	if err != nil {
		skip("a folder for npm's install: " + err.Error())
	}
	defer os.RemoveAll(tmp)
	ctx, cancel := context.WithTimeout(context.Background(), npmInstallTimeout)
	defer cancel()
	// Only the registry is asked: no audit, no funding notice, no update
	// check, and no package's install scripts run.
	cmd := exec.CommandContext(ctx, npm, "install", "--prefix", tmp, "--cache", filepath.Join(base, "npm-cache"),
		"--no-audit", "--no-fund", "--no-update-notifier", "--ignore-scripts", "--no-package-lock", "--loglevel=error",
		nodeClientPackage)
	cmd.Env = append(os.Environ(), "npm_config_update_notifier=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		skip(fmt.Sprintf("npm install %s (within %v): %v\n%s", nodeClientPackage, npmInstallTimeout, err, out))
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, err2 := os.Stat(pkg); err2 != nil { // else another run put it there first
			t.Fatalf("npm install: %v", err)
		}
	}
	return node, modules
}

// nodeScript drives netjam proxy with toxiproxy's Node.js client, one
// step at a time: after each it prints a JSON line, {"step": NAME,
// "value": ...}, and waits for a line on its input, while the Go test
// checks the step's effect on real traffic.
const nodeScript = `"use strict";
const path = require("path");
const readline = require("readline");
const [modules, api, upstream] = process.argv.slice(2);
const { Toxiproxy } = require(path.join(modules, "toxiproxy-node-client"));
const lines = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]();

async function step(name, value) {
  console.log(JSON.stringify({ step: name, value: value === undefined ? null : value }));
  const { done } = await lines.next();
  if (done) {
    throw new Error("the test ended during step " + name);
  }
}

async function main() {
  const toxiproxy = new Toxiproxy("http://" + api);
  const proxy = await toxiproxy.createProxy({ name: "node", listen: "127.0.0.1:0", upstream: upstream });
  await step("created", proxy.toJson());

  let latency = await proxy.addToxic({ name: "lat", type: "latency", stream: "downstream", toxicity: 1,
    attributes: { latency: 100, jitter: 0 } });
  await step("latency added", latency.toJson());
  latency = await latency.update({ name: "lat", type: "latency", stream: "downstream", toxicity: 1,
    attributes: { latency: 300, jitter: 0 } });
  await step("latency updated", latency.toJson());
  await step("latency read", (await proxy.getToxic("lat")).toJson());
  await latency.remove();
  await step("latency removed");

  const limit = await proxy.addToxic({ name: "lim", type: "limit_data", stream: "downstream", toxicity: 1,
    attributes: { bytes: 1000 } });
  await step("limit_data added", (await proxy.getToxic("lim")).toJson());
  await limit.remove();

  const timeout = await proxy.addToxic({ name: "to", type: "timeout", stream: "downstream", toxicity: 1,
    attributes: { timeout: 300 } });
  await step("timeout added", (await proxy.getToxic("to")).toJson());
  await timeout.remove();

  await proxy.remove();
  await step("deleted");
}

main().then(() => process.exit(0), (err) => {
  console.error(err && err.message ? err.message + "\n" + (err.stack || "") : String(err));
  process.exit(1);
});
`

// nodeStep is a line the script prints.
type nodeStep struct {
	Step  string          `json:"step"`
	Value json.RawMessage `json:"value"`
}

// nodeToxic is a toxic as the Node.js client's toJson gives it.
type nodeToxic struct {
	Name       string           `json:"name"`
	Type       string           `json:"type"`
	Stream     string           `json:"stream"`
	Toxicity   float64          `json:"toxicity"`
	Attributes map[string]int64 `json:"attributes"`
}

// TestNodeClient drives netjam proxy with toxiproxy's Node.js client
// (npm's toxiproxy-node-client, unmodified) through a proxy's life: it
// creates a proxy, adds a latency toxic, changes it, reads it back and
// removes it, then a limit_data and a timeout toxic, and deletes the
// proxy. After each step the test checks the toxic's effect on real
// traffic through the proxy.
func TestNodeClient(t *testing.T) {
	node, modules := nodeClient(t)
	_, api := startServer(t, proxy.Options{})
	up := upstream(t)
	script := filepath.Join(t.TempDir(), "steps.js")
	if err := os.WriteFile(script, []byte(nodeScript), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	cmd := exec.CommandContext(ctx, node, script, modules, api, up)
	// The client reaches the API on loopback directly, whatever proxy
	// the environment names.
	cmd.Env = append(os.Environ(), "NO_PROXY=*", "no_proxy=*")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		cmd.Wait()
	}()
	// stop ends the script (its input closed, then killed after 5 s) and
	// returns what it wrote on its standard error.
	stop := func() string {
		in.Close()
		kill := time.AfterFunc(5*time.Second, cancel)
		defer kill.Stop()
		cmd.Wait()
		return stderr.String()
	}
	lines := bufio.NewScanner(out)
	// next returns the script's next step, which must be want, its
	// value decoded into v.
	next := func(want string, v any) {
		t.Helper()
		if !lines.Scan() {
			err := lines.Err()
			t.Fatalf("the Node.js client ended before step %q: %v\n%s", want, err, stop())
		}
		var s nodeStep
		if err := json.Unmarshal(lines.Bytes(), &s); err != nil || s.Step != want {
			t.Fatalf("the Node.js client printed %q, want step %q", lines.Text(), want)
		}
		if v != nil {
			if err := json.Unmarshal(s.Value, v); err != nil {
				t.Fatalf("step %s: %s: %v", want, s.Value, err)
			}
		}
	}
	// done lets the script go on to its next step.
	done := func() {
		t.Helper()
		if _, err := io.WriteString(in, "next\n"); err != nil {
			t.Fatalf("the Node.js client: %v\n%s", err, stop())
		}
	}
	checkToxic := func(step string, got nodeToxic, typ, attr string, value int64) {
		t.Helper()
		if got.Type != typ || got.Stream != "downstream" || got.Toxicity != 1 || got.Attributes[attr] != value {
			t.Errorf("%s: the client has %+v, want a %s toxic, downstream, toxicity 1, %s %d", step, got, typ, attr, value)
		}
	}

	var p struct {
		Name, Listen string
		Enabled      bool
	}
	next("created", &p)
	if p.Name != "node" || !p.Enabled || strings.HasSuffix(p.Listen, ":0") {
		t.Fatalf("created %+v", p)
	}
	url := "http://" + p.Listen + "/"
	base := fastest(t, url, 3)
	done()

	var tx nodeToxic
	next("latency added", &tx)
	checkToxic("latency added", tx, "latency", "latency", 100)
	if d := fastest(t, url, 3); d < base+100*time.Millisecond {
		t.Errorf("with latency 100ms: %v, without %v: not 100ms more", d, base)
	}
	done()
	next("latency updated", &tx)
	checkToxic("latency updated", tx, "latency", "latency", 300)
	if d := fastest(t, url, 2); d < base+300*time.Millisecond {
		t.Errorf("with latency 300ms: %v, without %v: not 300ms more", d, base)
	}
	done()
	next("latency read", &tx)
	checkToxic("latency read", tx, "latency", "latency", 300)
	done()
	next("latency removed", nil)
	if d := fastest(t, url, 3); d >= 300*time.Millisecond {
		t.Errorf("latency removed: a GET still takes %v", d)
	}
	done()

	// request sends a GET of 100000 bytes on a connection of its own and
	// returns what came back until the end, and when that came.
	request := func() ([]byte, time.Duration, error) {
		c, err := net.Dial("tcp", p.Listen)
		if err != nil {
			return nil, 0, err
		}
		defer c.Close()
		start := time.Now()
		if _, err := io.WriteString(c, "GET /bytes?n=100000 HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			return nil, 0, err
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		b, err := io.ReadAll(c)
		return b, time.Since(start), err
	}
	next("limit_data added", &tx)
	checkToxic("limit_data added", tx, "limit_data", "bytes", 1000)
	if b, _, err := request(); len(b) != 1000 || err != nil {
		t.Errorf("limit_data 1000: %d bytes came back, then %v; want 1000, then the end", len(b), err)
	}
	done()
	next("timeout added", &tx)
	checkToxic("timeout added", tx, "timeout", "timeout", 300)
	if b, d, err := request(); len(b) != 0 || err != nil || d < 250*time.Millisecond {
		t.Errorf("timeout 300: %d bytes came back, then %v after %v; want none, and the end after 300ms", len(b), err, d)
	}
	done()

	next("deleted", nil)
	if code, b := call(t, api, "GET", "/proxies/node", ""); code != 404 {
		t.Errorf("the proxy deleted: GET answers %d %s", code, b)
	}
	if c, err := net.DialTimeout("tcp", p.Listen, time.Second); err == nil {
		c.Close()
		t.Errorf("the proxy deleted: %s still listens", p.Listen)
	}
	done()
	in.Close()
	if err := cmd.Wait(); err != nil {
		t.Errorf("the Node.js client: %v\n%s", err, stderr.String())
	}
}
