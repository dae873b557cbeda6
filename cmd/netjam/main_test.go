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
	if code != 0 || !strings.HasPrefix(out, "netjam dev") {
		t.Fatalf("exit %d, output %q", code, out)
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
	for _, f := range []string{"summary.json", "timeseries.csv", "netjam.log", "scenario-no-loss.yaml", "scenario-loss-5.yaml", "scenario-seed-exact.yaml"} {
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

func TestFlagsMayFollowArguments(t *testing.T) {
	app := newApp(nil, nil)
	for _, tc := range []struct{ in, want []string }{
		{[]string{"netjam", "run", "a.yaml", "--seed", "7", "-q"}, []string{"netjam", "run", "--seed", "7", "-q", "a.yaml"}},
		{[]string{"netjam", "--log-level", "debug", "run", "a.yaml", "--set=x=1"}, []string{"netjam", "--log-level", "debug", "run", "--set=x=1", "a.yaml"}},
		{[]string{"netjam", "validate", "a.yaml", "--set", "k=v", "b.yaml"}, []string{"netjam", "validate", "--set", "k=v", "a.yaml", "b.yaml"}},
		{[]string{"netjam", "run", "--", "-odd.yaml"}, []string{"netjam", "run", "--", "-odd.yaml"}},
		{[]string{"netjam", "nosuch", "x", "--y"}, []string{"netjam", "nosuch", "x", "--y"}},
		{[]string{"netjam", "run", "a.yaml", "--log-level", "warn", "-q", "--log-format=json"}, []string{"netjam", "--log-level", "warn", "--log-format=json", "run", "-q", "a.yaml"}},
	} {
		got := flagsFirst(app, tc.in)
		if strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("flagsFirst(%q) = %q, want %q", tc.in, got, tc.want)
		}
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
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, _ := os.ReadFile(filepath.Join(out, "netjam.log"))
		if strings.Contains(string(b), "run start") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the run did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // let some datagrams through
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
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
