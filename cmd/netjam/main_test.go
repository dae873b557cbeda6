package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == pushInputArg {
		os.Exit(tryPushInput()) // a shell's command in a test (TestShellCannotPushInput)
	}
	if os.Getenv(beNetjam) == "1" {
		// A child of a test, running as netjam (see netjamProcess).
		os.Exit(run(append([]string{"netjam"}, os.Args[1:]...), os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(m)
}

// netjam runs the CLI in-process and returns its exit code and output.
func netjam(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = run(append([]string{"netjam"}, args...), &o, &e)
	return code, o.String(), e.String()
}

func TestVersion(t *testing.T) {
	code, out, _ := netjam(t, "version")
	// A test binary has no stamped version: the toolchain says (devel).
	if code != 0 || !strings.HasPrefix(out, "netjam (devel) ") {
		t.Fatalf("exit %d, output %q", code, out)
	}
}

// TestExitCodesAndMessages checks each exit code the README promises, and
// the message that goes with it, for the mistakes of a first hour.
func TestExitCodesAndMessages(t *testing.T) {
	dir := t.TempDir()
	notExec := filepath.Join(dir, "script.sh")
	os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644)
	tab := filepath.Join(dir, "tab.yaml")
	os.WriteFile(tab, []byte("name: x\nlink:\n\tdelay: 5ms\n"), 0o644)
	level := filepath.Join(dir, "level.yaml")
	os.WriteFile(level, []byte("name: x\nloss: 5%\nlink:\n  jitter: 5ms\n"), 0o644)
	for _, tc := range []struct {
		args []string
		code int
		want []string // in stderr
	}{
		{nil, 2, []string{"USAGE:", "netjam: no command given"}},
		{[]string{"frobnicate"}, 2, []string{`netjam: "frobnicate" is not a command (the commands are run, shell, sweep, merge, ctl, proxy, validate, plot, version; netjam --help says more)`}},
		{[]string{"--log-level", "debug", "frobnicate", "x"}, 2, []string{`"frobnicate" is not a command`}},
		{[]string{"run", "--duration", "5"}, 2, []string{`netjam: --duration: "5" is not a duration (missing unit; examples: 50ms, 250us, 1.5s)`}},
		{[]string{"run", "--duration", "48h", "--out", dir}, 2, []string{`--duration: 48h0m0s is out of range (expected more than 0s, up to 24h)`}},
		{[]string{"run", "--seed", "seven"}, 2, []string{`netjam: --seed: "seven" is not a seed (expected an integer from 0 to 18446744073709551615)`}},
		{[]string{"shell", "--seed", "-1", "--", "true"}, 2, []string{`--seed: "-1" is not a seed`}},
		{[]string{"shell", "../../configs/tun-iperf3.yaml"}, 2, []string{"netjam: shell needs a command after --: netjam shell [SCENARIO.yaml] -- COMMAND [ARGS...]"}},
		{[]string{"shell", "ping", "-c", "1", "10.99.0.2"}, 2, []string{"netjam: shell: -c follows the command ping: netjam's flags go before \"--\" and the command after it:\n  netjam shell -- ping -c 1 10.99.0.2\n"}},
		{[]string{"shell", "--seed", "7", "x.yaml", "ping", "-q", "h"}, 2, []string{"  netjam shell --seed 7 x.yaml -- ping -q h\n"}},
		{[]string{"shell", "--", "netjam-no-such-command"}, 127, []string{"netjam: shell: netjam-no-such-command: command not found\n"}},
		{[]string{"shell", "--", filepath.Join(dir, "missing")}, 127, []string{"command not found"}},
		{[]string{"shell", "--", notExec}, 126, []string{"netjam: shell: " + notExec + ": cannot run: permission denied\n"}},
		{[]string{"shell", "--", dir}, 126, []string{"cannot run: is a directory"}},
		{[]string{"validate", tab}, 2, []string{tab + ":3:1: yaml: found character that cannot start any token (a tab in the indentation: YAML indents with spaces only)"}},
		{[]string{"validate", level}, 2, []string{
			level + ":2: loss: unknown key at this level; did you mean link.loss?",
			level + ":4: link.jitter: unknown key at this level; did you mean link.delay.jitter?"}},
	} {
		code, _, errOut := netjam(t, tc.args...)
		if code != tc.code {
			t.Errorf("netjam %q: exit %d, want %d\n%s", tc.args, code, tc.code, errOut)
		}
		for _, w := range tc.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("netjam %q: stderr lacks %q:\n%s", tc.args, w, errOut)
			}
		}
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"--help"}, {"help", "run"}, {"run", "--help"}} {
		code, out, errOut := netjam(t, args...)
		if code != 0 || !strings.Contains(out, "USAGE:") || errOut != "" {
			t.Errorf("netjam %q: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
	if _, out, _ := netjam(t, "help", "run"); !strings.Contains(out, "netjam run [command options] [SCENARIO.yaml]") {
		t.Errorf("netjam help run: %s", out)
	}
}

func TestSeedHelpClaimsNoZeroDefault(t *testing.T) {
	for _, cmd := range []string{"run", "shell"} {
		_, out, _ := netjam(t, cmd, "--help")
		i := strings.Index(out, "--seed value")
		if i < 0 {
			t.Fatalf("%s --help has no --seed:\n%s", cmd, out)
		}
		line, _, _ := strings.Cut(out[i:], "\n")
		if strings.Contains(line, "default: 0") || !strings.Contains(line, "default: the scenario's seed, else a random one") {
			t.Errorf("%s --help: %s", cmd, line)
		}
	}
}

func TestValidateShippedConfigs(t *testing.T) {
	files, err := filepath.Glob("../../configs/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no configs found: %v", err)
	}
	code, out, errOut := netjam(t, append([]string{"validate"}, files...)...)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	if strings.Count(out, ": ok (") != len(files) {
		t.Fatalf("output %q", out)
	}
}

func TestBadScenarioExits2NamingFileLineKey(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bad.yaml")
	os.WriteFile(path, []byte("name: bad\nlink:\n  uplink:\n    rate: 10Mbs\n    delya: 5ms\n"), 0o644)
	for _, cmd := range []string{"validate", "run"} {
		code, _, errOut := netjam(t, cmd, "--out", filepath.Join(dir, "out"), path)
		if cmd == "validate" {
			code, _, errOut = netjam(t, cmd, path)
		}
		if code != 2 {
			t.Fatalf("%s: exit %d, want 2\n%s", cmd, code, errOut)
		}
		for _, want := range []string{
			path + `:4: link.uplink.rate: "10Mbs" is not a rate`,
			path + `:5: link.uplink.delya: unknown key`,
		} {
			if !strings.Contains(errOut, want) {
				t.Errorf("%s: stderr lacks %q:\n%s", cmd, want, errOut)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "out")); !os.IsNotExist(err) {
		t.Errorf("a bad scenario started a run: output folder exists")
	}
}

func TestUsageErrorsExit2(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"run", "--no-such-flag"},
		{"run", "a.yaml", "b.yaml"},
		{"--log-level", "loud", "version"},
		{"--log-format", "xml", "version"},
		{"validate"},
		{"run", "--out", dir, "--set", "link.loss=oops"},
		{"run", "--out", dir, "--set", "no-equals-sign"},
		{"run", "--out", dir, "--duration", "soon"},
		{"run", filepath.Join(dir, "missing.yaml")},
	} {
		if code, _, errOut := netjam(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, errOut)
		}
	}
}

func TestSetErrorNamesTheOverride(t *testing.T) {
	code, _, errOut := netjam(t, "run", "--out", t.TempDir(), "--set", "link.uplink.rate=10Mbs")
	if code != 2 || !strings.Contains(errOut, `--set link.uplink.rate: "10Mbs" is not a rate`) {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

func TestRunDefaultScenarioWritesResults(t *testing.T) {
	out := filepath.Join(t.TempDir(), "res")
	code, stdout, errOut := netjam(t, "run", "--out", out, "--seed", "42", "--set", "link.uplink.rate=20Mbps",
		"--set", "flows.tcp-5MB.size=300KB", "--set", "flows.udp-1000.count=100")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	if !strings.Contains(stdout, "loss-5") || !strings.Contains(stdout, "uplink") {
		t.Errorf("table lacks the runs:\n%s", stdout)
	}
	for _, f := range []string{"summary.json", "timeseries.csv", "netjam.log", "scenario-no-loss.yaml", "scenario-loss-5.yaml", "scenario-loopback-mtu.yaml"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("missing %s: %v", f, err)
		}
	}
	var sum struct {
		Scenario string
		Runs     []struct {
			Variant string
			Seed    uint64
			Links   []struct {
				Name       string
				Configured struct {
					RateBps   uint64  `json:"rate_bps"`
					LossRatio float64 `json:"loss_ratio"`
				}
			}
		}
	}
	b, _ := os.ReadFile(filepath.Join(out, "summary.json"))
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Scenario != "tcp-vs-udp-loss" || len(sum.Runs) != 3 || sum.Runs[1].Seed != 42 {
		t.Fatalf("summary %+v", sum)
	}
	l := sum.Runs[1].Links
	if l[0].Name != "uplink" || l[0].Configured.RateBps != 20e6 || l[0].Configured.LossRatio != 0.05 || l[1].Configured.RateBps != 0 {
		t.Fatalf("links %+v", l)
	}
	if sum.Runs[0].Links[0].Configured.LossRatio != 0 {
		t.Fatalf("variant no-loss kept the loss: %+v", sum.Runs[0].Links[0])
	}
	y, _ := os.ReadFile(filepath.Join(out, "scenario-loss-5.yaml"))
	if !strings.Contains(string(y), "seed: 42") {
		t.Errorf("resolved scenario lacks the seed used:\n%s", y)
	}
	// The resolved scenario is runnable as it is.
	if code, _, errOut := netjam(t, "validate", filepath.Join(out, "scenario-loss-5.yaml")); code != 0 {
		t.Errorf("resolved scenario does not validate: %s", errOut)
	}
}

// TestInterruptWritesWhatWasMeasured sends SIGINT to a run in progress: it
// must end at once with exit code 1, and still write its summary.
func TestInterruptWritesWhatWasMeasured(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "long.yaml")
	os.WriteFile(path, []byte(`name: long
duration: 10m
link: {delay: 10ms}
flows: [{name: probe, type: udp, interval: 10ms, duration: 10m}]
`), 0o644)
	out := filepath.Join(dir, "out")
	type result struct {
		code   int
		stderr string
	}
	done := make(chan result, 1)
	go func() {
		code, _, errOut := netjam(t, "run", "--out", out, path)
		done <- result{code, errOut}
	}()
	waitForRunStart(t, out)
	time.Sleep(300 * time.Millisecond) // let some datagrams through
	// SIGINT to this process (os.FindProcess never fails on Unix).
	self, _ := os.FindProcess(os.Getpid())
	if err := self.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	var r result
	select {
	case r = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the run did not end after SIGINT")
	}
	if r.code != 1 || !strings.Contains(r.stderr, "interrupted") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	b, err := os.ReadFile(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var sum struct {
		Runs []struct {
			Flows []struct {
				PacketsReceived uint64 `json:"packets_received"`
			}
		}
	}
	if err := json.Unmarshal(b, &sum); err != nil || len(sum.Runs) != 1 || sum.Runs[0].Flows[0].PacketsReceived == 0 {
		t.Fatalf("summary after interrupt: %s (%v)", b, err)
	}
}

// TestShadowedSetWarns checks that run and validate say, before a run, that
// a --set of a shared link key changes nothing where a direction key wins.
func TestShadowedSetWarns(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.yaml")
	if err := os.WriteFile(path, []byte("duration: 100ms\nlink: {uplink: {loss: 0.5%}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const want = "--set link.loss changes nothing for the uplink: link.uplink.loss (from the file) replaces the shared link.loss as a whole; set link.uplink.loss instead"
	code, _, errOut := netjam(t, "validate", "--set", "link.loss=0%", path)
	if code != 0 || !strings.Contains(errOut, path+": warning: "+want) {
		t.Errorf("validate: exit %d, stderr lacks the warning:\n%s", code, errOut)
	}
	code, _, errOut = netjam(t, "run", "-q", "--out", filepath.Join(dir, "out"), "--set", "link.loss=0%", path)
	if code != 0 || !strings.Contains(errOut, want) {
		t.Errorf("run: exit %d, stderr lacks the warning:\n%s", code, errOut)
	}
}

// TestSecondInterruptExitsAtOnce interrupts a run in progress again and
// again: the first stops the run, the second ends the process at
// once with exit status 130 (128+SIGINT), saying what it did not write.
func TestSecondInterruptExitsAtOnce(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "long.yaml")
	os.WriteFile(path, []byte(`name: long
duration: 10m
link: {delay: 10ms}
flows: [{name: probe, type: udp, interval: 10ms, duration: 10m}]
`), 0o644)
	out := filepath.Join(dir, "out")
	cmd := netjamProcess(t, "run", "--out", out, path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	waitForRunStart(t, out)
	// SIGINT every 20 ms until netjam ends: two sent back to back would
	// be one (Linux keeps one pending SIGINT), and the results (plots,
	// report.html) take longer than this to write, so a second arrives
	// while they are written, however loaded the machine.
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	giveUp := time.After(10 * time.Second)
	for done := false; !done; {
		cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-waited:
			done = true
		case <-tick.C:
		case <-giveUp:
			t.Fatal("netjam did not end after repeated SIGINTs")
		}
	}
	if code := cmd.ProcessState.ExitCode(); code != 130 || !strings.Contains(stderr.String(), "not written to "+out+": ") {
		t.Errorf("exit %d, stderr %q; want 130 and what was not written", code, stderr.String())
	}
}

// waitForRunStart waits up to 30 s for the run writing into out to log
// its start.
func waitForRunStart(t *testing.T, out string) {
	t.Helper()
	waitFor(t, "the run to start", func() bool {
		b, _ := os.ReadFile(filepath.Join(out, "netjam.log"))
		return strings.Contains(string(b), "run start")
	})
}

// TestDidYouMean: a command or flag mistyped gets one line naming the
// nearest one, as the scenario's keys do, and no help before it.
func TestDidYouMean(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"rn"}, `netjam: "rn" is not a command; did you mean "run"? (the commands are `},
		{[]string{"valdate", "x.yaml"}, `netjam: "valdate" is not a command; did you mean "validate"?`},
		{[]string{"run", "--sed", "3"}, "netjam: --sed: not a flag of netjam run; did you mean --seed? (netjam run --help lists them)\n"},
		{[]string{"run", "x.yaml", "--durtion", "5s"}, "netjam: --durtion: not a flag of netjam run; did you mean --duration?"},
		{[]string{"--lg-level", "debug", "run"}, "netjam: --lg-level: not a flag of netjam; did you mean --log-level?"},
		{[]string{"run", "--log-levl", "debug"}, "netjam: --log-levl: not a flag of netjam run; did you mean --log-level?"},
		{[]string{"ctl", "--contrl", "unix:x", "status"}, "netjam: --contrl: not a flag of netjam ctl; did you mean --control?"},
		{[]string{"run", "-x"}, "netjam: -x: not a flag of netjam run (netjam run --help lists them)\n"},
	} {
		code, _, errOut := netjam(t, tc.args...)
		if code != exitBadUsage || !strings.Contains(errOut, tc.want) || strings.Contains(errOut, "USAGE:") || strings.Count(errOut, "\n") != 1 {
			t.Errorf("netjam %q: exit %d, want 2 and one line with %q:\n%s", tc.args, code, tc.want, errOut)
		}
	}
}
