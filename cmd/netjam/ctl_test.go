package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/netjam/netjam/control"
	"github.com/netjam/netjam/internal/testenv"
)

// TestCtlChangesARun runs a scenario with a control socket and changes its
// uplink from outside with netjam ctl while it runs: the change applies
// (the path drops what it must from then on), is recorded in events.jsonl
// and summary.json, and a bad value gets the scenario's message.
func TestCtlChangesARun(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "live.yaml")
	os.WriteFile(file, []byte(`name: live
duration: 4s
link: {delay: 5ms}
flows: [{name: probe, type: udp, interval: 5ms, count: 600}]
`), 0o644)
	sock := filepath.Join(dir, "nj.sock")
	run := netjamProcess(t, "run", file, "-q", "--out", filepath.Join(dir, "out"), "--control", "unix:"+sock, "--seed", "1")
	var stderr strings.Builder
	run.Stderr = &stderr
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	defer run.Process.Kill()
	ctl := func(args ...string) (int, string, string) {
		return netjam(t, append([]string{"ctl", "--control", "unix:" + sock}, args...)...)
	}
	waitFor(t, "the control API", func() bool {
		code, _, _ := ctl("status")
		return code == exitOK
	})
	code, stdout, stderrCtl := ctl("status", "-o", "json")
	var st struct {
		Scenario string  `json:"scenario"`
		ElapsedS float64 `json:"elapsed_s"`
		Flows    []struct{ Name string }
	}
	if err := json.Unmarshal([]byte(stdout), &st); err != nil || code != exitOK || st.Scenario != "live" || len(st.Flows) != 1 {
		t.Fatalf("ctl status: exit %d, %v\n%s%s", code, err, stdout, stderrCtl)
	}
	// A bad value is bad usage, as run --set's, and named by its key.
	if code, _, stderrCtl = ctl("set", "link.uplink.loss=150%"); code != exitBadUsage || !strings.Contains(stderrCtl, "ctl set: link.uplink.loss: 150% is out of range") {
		t.Errorf("ctl set of a bad value: exit %d\n%s", code, stderrCtl)
	}
	// The table of the run now, a row for each flow and direction.
	if code, stdout, stderrCtl = ctl("status"); code != exitOK || !strings.HasPrefix(stdout, "live: ") ||
		!strings.Contains(stdout, "\nprobe  udp ") || !strings.Contains(stdout, "\nuplink    delay 5ms ") {
		t.Errorf("ctl status: exit %d\n%s%s", code, stdout, stderrCtl)
	}
	// One line for the one setting changed.
	if code, stdout, stderrCtl = ctl("set", "link.uplink.loss=100%"); code != exitOK ||
		!regexp.MustCompile(`^uplink loss 0% → 100% at [0-9.]+ s\n$`).MatchString(stdout) {
		t.Fatalf("ctl set: exit %d\n%s%s", code, stdout, stderrCtl)
	}
	// The metrics, as Prometheus scrapes them: well-formed (promtool),
	// with the change in them.
	mcode, metrics, err := control.Client{Addr: "unix:" + sock}.Do(control.Call{Method: "GET", Path: "/metrics"})
	if err != nil || mcode != 200 || !strings.Contains(string(metrics), `netjam_link_configured_loss_ratio{direction="uplink"} 1`) ||
		!strings.Contains(string(metrics), `netjam_flow_received_packets_total{flow="probe"}`) {
		t.Errorf("/metrics: %d, %v\n%s", mcode, err, metrics)
	}
	promtool := testenv.RequireTool(t, "promtool", "prometheus")
	check := exec.Command(promtool, "check", "metrics")
	check.Stdin = strings.NewReader(string(metrics))
	if out, err := check.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
	if err := run.Wait(); err != nil {
		t.Fatalf("the run: %v\n%s", err, stderr.String())
	}
	ev, err := os.ReadFile(filepath.Join(dir, "out", "events.jsonl"))
	if err != nil || !strings.Contains(string(ev), `"key":"link.uplink.loss","old":"","new":"100%"`) {
		t.Errorf("events.jsonl: %v\n%s", err, ev)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "out", "summary.json"))
	var sum struct {
		Runs []struct {
			Links []struct {
				Drops map[string]uint64 `json:"drops"`
			} `json:"links"`
			Timeline []struct{ Key, New string } `json:"timeline"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(b, &sum); err != nil || len(sum.Runs) != 1 {
		t.Fatal(err)
	}
	r := sum.Runs[0]
	if len(r.Timeline) != 1 || r.Timeline[0].New != "100%" || r.Links[0].Drops["loss"] == 0 {
		t.Errorf("summary: timeline %+v, uplink drops %v: want the change and the losses after it", r.Timeline, r.Links[0].Drops)
	}
	if _, err := os.Stat(sock); err == nil {
		t.Error("the control socket is left behind")
	}
	// The resolved scenario has the change in its timeline: running it
	// again repeats the change at the same moment.
	y, _ := os.ReadFile(filepath.Join(dir, "out", "scenario.yaml"))
	if !strings.Contains(string(y), "timeline:") || !strings.Contains(string(y), "link.uplink.loss: 100%") {
		t.Errorf("scenario.yaml lacks the change:\n%s", y)
	}
	if code, stdout, stderr := netjam(t, "run", filepath.Join(dir, "out", "scenario.yaml"), "-q", "--out", filepath.Join(dir, "replay")); code != exitOK {
		t.Fatalf("the replay: exit %d\n%s%s", code, stdout, stderr)
	}
	b, _ = os.ReadFile(filepath.Join(dir, "replay", "summary.json"))
	var replay struct {
		Runs []struct {
			Timeline []struct {
				TimeS    float64 `json:"time_s"`
				Key, New string
			} `json:"timeline"`
		} `json:"runs"`
	}
	var orig struct {
		Runs []struct {
			Timeline []struct {
				TimeS float64 `json:"time_s"`
			} `json:"timeline"`
		} `json:"runs"`
	}
	orb, _ := os.ReadFile(filepath.Join(dir, "out", "summary.json"))
	json.Unmarshal(orb, &orig)
	if err := json.Unmarshal(b, &replay); err != nil || len(replay.Runs) != 1 || len(replay.Runs[0].Timeline) != 1 {
		t.Fatalf("the replay's timeline: %v\n%s", err, b)
	}
	got, want := replay.Runs[0].Timeline[0], orig.Runs[0].Timeline[0]
	if got.Key != "link.uplink.loss" || got.New != "100%" || math.Abs(got.TimeS-want.TimeS) > 1e-6 {
		t.Errorf("the replay changed %s to %s at %v s; the run did at %v s", got.Key, got.New, got.TimeS, want.TimeS)
	}
	if code, _, stderrCtl = ctl("status"); code != exitFailed {
		t.Errorf("ctl status after the run: exit %d\n%s", code, stderrCtl)
	}
}

// TestShellCutsItsOwnNetwork runs a command in netjam shell --control that
// cuts its own network with netjam ctl ($NETJAM_CONTROL), sees a ping
// fail, and restores it; the changes are recorded.
func TestShellCutsItsOwnNetwork(t *testing.T) {
	testenv.RequireTUN(t)
	testenv.RequireTool(t, "ping", "iputils-ping")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cmd := netjamProcess(t, "shell", "-q", "--control", "unix", "--out", dir, "--set", "link.delay=5ms", "--", "sh", "-c", `
ping -n -c 1 -W 2 $NETJAM_PEER >/dev/null && echo before-ok
"$NJ" ctl set link.uplink.loss=100% >/dev/null && echo set-ok
ping -n -c 1 -W 1 $NETJAM_PEER >/dev/null || echo cut
"$NJ" ctl set link.uplink.loss=0% >/dev/null
ping -n -c 1 -W 2 $NETJAM_PEER >/dev/null && echo after-ok`)
	cmd.Env = append(cmd.Env, "NJ="+exe)
	var stderr bytes.Buffer // netjam's log, apart from the command's output
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || string(out) != "before-ok\nset-ok\ncut\nafter-ok\n" {
		t.Fatalf("the shell: %v\n%s%s", err, out, stderr.Bytes())
	}
	ev, err := os.ReadFile(filepath.Join(dir, "events.jsonl"))
	if err != nil || strings.Count(string(ev), `"key":"link.uplink.loss"`) != 2 {
		t.Errorf("events.jsonl: %v\n%s", err, ev)
	}
	if socks, _ := filepath.Glob(filepath.Join(dir, "*.sock")); len(socks) != 0 {
		t.Errorf("control sockets left behind: %v", socks)
	}
}

// TestCtlScheduleResetEvents drives a run with netjam ctl schedule, reset
// and events: the scheduled change applies at its time, reset puts the
// key back, and ctl events prints the run's events, one a line, until
// netjam ends (the end and the results written among them).
func TestCtlScheduleResetEvents(t *testing.T) {
	r := startCtlRun(t, `name: live
duration: 6s
link: {delay: 5ms}
flows: [{name: probe, type: udp, interval: 5ms, duration: 6s}]
`)
	dir, run, stderr, sock, ctl := r.dir, r.run, r.stderr, r.sock, r.ctl
	waitFor(t, "the control API", func() bool {
		code, _, _ := ctl("status")
		return code == exitOK
	})
	events := netjamProcess(t, "ctl", "--control", sock, "events")
	var evOut strings.Builder
	events.Stdout = &evOut
	if err := events.Start(); err != nil {
		t.Fatal(err)
	}
	defer events.Process.Kill()
	if code, _, stderrCtl := ctl("schedule", "link.uplink.loss=5%"); code != exitBadUsage || !strings.Contains(stderrCtl, "give --at TIME") {
		t.Errorf("ctl schedule without --at: exit %d\n%s", code, stderrCtl)
	}
	// A second ahead of the run, however late this test got here.
	_, stdout, _ := ctl("status", "--json")
	var st struct {
		ElapsedS float64 `json:"elapsed_s"`
	}
	json.Unmarshal([]byte(stdout), &st)
	at := math.Ceil(st.ElapsedS) + 1
	if code, stdout, stderrCtl := ctl("schedule", "--at", fmt.Sprintf("%gs", at), "link.uplink.loss=100%"); code != exitOK || !strings.Contains(stdout, fmt.Sprintf("\n%g s  ", at)) {
		t.Fatalf("ctl schedule: exit %d\n%s%s", code, stdout, stderrCtl)
	}
	waitFor(t, "the scheduled change", func() bool {
		_, stdout, _ := ctl("get", "-o", "json")
		return strings.Contains(stdout, `"loss_ratio": 1,`)
	})
	if code, stdout, stderrCtl := ctl("reset"); code != exitOK || !regexp.MustCompile(`^uplink loss 100% → 0% at [0-9.]+ s\n$`).MatchString(stdout) {
		t.Errorf("ctl reset: exit %d\n%s%s", code, stdout, stderrCtl)
	}
	if code, stdout, stderrCtl := ctl("set", "--for", "300ms", "link.downlink.loss=100%"); code != exitOK ||
		!regexp.MustCompile(`^downlink loss 0% → 100% at [0-9.]+ s until [0-9.]+ s\n$`).MatchString(stdout) {
		t.Errorf("ctl set --for: exit %d\n%s%s", code, stdout, stderrCtl)
	}
	if err := run.Wait(); err != nil {
		t.Fatalf("the run: %v\n%s", err, stderr.String())
	}
	if err := events.Wait(); err != nil {
		t.Errorf("ctl events: %v", err)
	}
	out := evOut.String()
	for _, want := range []string{"\nscheduled {", "\nsample {", `change {"type":"change"`, `"key":"link.uplink.loss","old":"","new":"100%"`,
		`"key":"link.uplink.loss","old":"100%","new":""`, "\nend {", "\nfinished {"} {
		if !strings.Contains(out, want) {
			t.Errorf("ctl events printed no %q", want)
		}
	}
	if t.Failed() {
		t.Log(out)
	}
	ev, _ := os.ReadFile(filepath.Join(dir, "out", "events.jsonl"))
	if up, down := strings.Count(string(ev), `"key":"link.uplink.loss"`), strings.Count(string(ev), `"key":"link.downlink.loss"`); up != 2 || down != 2 {
		t.Errorf("events.jsonl has %d changes of the uplink's loss and %d of the downlink's, want 2 and 2 (a change and its way back)\n%s", up, down, ev)
	}
}

// TestRunUI: netjam run --ui serves the dashboard on a free loopback port
// and prints its URL, with the token it made (the API refuses a request
// without it; the output folder's control.token, mode 0600, holds it
// while the run runs); the page and its files come from the binary; after
// the run the report is served there until the page's stop (POST
// /v1/stop), and netjam then exits 0. --ui with a unix socket is refused.
func TestRunUI(t *testing.T) {
	if code, _, stderr := netjam(t, "run", "--ui", "--control", "unix:/tmp/x.sock", "--duration", "1s"); code != exitBadUsage || !strings.Contains(stderr, "--ui: a browser reaches a TCP address only") {
		t.Errorf("--ui with a unix socket: exit %d\n%s", code, stderr)
	}
	dir := t.TempDir()
	run := netjamProcess(t, "run", "-q", "--ui", "--metrics", "127.0.0.1:0", "--duration", "2s", "--out", dir)
	stderr, err := run.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	defer run.Process.Kill()
	sc := bufio.NewScanner(stderr)
	var dashboard, api, metrics string
	var lines []string
	for (dashboard == "" || metrics == "") && sc.Scan() {
		lines = append(lines, sc.Text())
		if u, ok := strings.CutPrefix(sc.Text(), "netjam: dashboard at "); ok {
			dashboard = u
		}
		if u, ok := strings.CutPrefix(sc.Text(), "netjam: control API at "); ok {
			api = u
		}
		if u, ok := strings.CutPrefix(sc.Text(), "netjam: metrics at "); ok {
			metrics = u
		}
	}
	url, token, _ := strings.Cut(dashboard, "/?token=")
	if !strings.HasPrefix(url, "http://127.0.0.1:") || len(token) < 26 {
		t.Fatalf("no dashboard URL with a token printed: %q", lines)
	}
	tokenPath := filepath.Join(dir, "control.token")
	if want := strings.TrimPrefix(url, "http://") + " (its token in " + tokenPath + ")"; api != want {
		t.Errorf("the control API's line: %q, want %q", api, want)
	}
	if fi, err := os.Stat(tokenPath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("control.token: %v, want mode 0600", err)
	} else if b, _ := os.ReadFile(tokenPath); string(b) != token+"\n" {
		t.Errorf("control.token holds %q, the URL %q", b, token)
	}
	if code, _, stderr := netjam(t, "ctl", "--control", strings.TrimPrefix(url, "http://"), "status"); code != exitFailed || !strings.Contains(stderr, "missing or wrong token") || !strings.Contains(stderr, "control.token") {
		t.Errorf("ctl status without the token: exit %d, %s", code, stderr)
	}
	// (The run may not be attached yet: 409, past the token.)
	authorized := func(code int, stderr string) bool {
		return code == exitOK || code == exitFailed && strings.Contains(stderr, "no run in progress")
	}
	if code, _, stderr := netjam(t, "ctl", "--control", strings.TrimPrefix(url, "http://"), "--control-token", tokenPath, "status"); !authorized(code, stderr) {
		t.Errorf("ctl status with control.token: exit %d, %s", code, stderr)
	}
	t.Setenv(control.TokenEnv, token)
	if code, _, stderr := netjam(t, "ctl", "--control", url, "status"); !authorized(code, stderr) {
		t.Errorf("ctl status with $%s: exit %d, %s", control.TokenEnv, code, stderr)
	}
	get := func(path string) (int, string) {
		req, _ := http.NewRequest("GET", url+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if resp, err := http.Get(url + "/v1/status"); err != nil || resp.Body.Close() != nil || resp.StatusCode != 401 {
		t.Errorf("GET /v1/status without the token: %v %v, want 401", resp, err)
	}
	if resp, err := http.Get(dashboard); err != nil || resp.Body.Close() != nil || resp.StatusCode != 200 ||
		len(resp.Cookies()) != 1 || !resp.Cookies()[0].HttpOnly || resp.Cookies()[0].SameSite != http.SameSiteStrictMode {
		t.Errorf("GET of the dashboard's URL: %v %v, want 200 with an HttpOnly, SameSite=Strict cookie", resp, err)
	}
	if code, page := get("/"); code != 200 || !strings.Contains(page, `<script src="/ui/app.js"`) {
		t.Errorf("GET /: %d\n%s", code, page)
	}
	if code, js := get("/ui/app.js"); code != 200 || !strings.Contains(js, "EventSource") {
		t.Errorf("GET /ui/app.js: %d", code)
	}
	// --metrics: the metrics alone, on an address of their own, the
	// run's once it is attached.
	waitFor(t, "the run's metrics at --metrics", func() bool {
		resp, err := http.Get(metrics)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == 200 && strings.Contains(string(b), "netjam_link_bytes_total{")
	})
	if resp, err := http.Get(strings.TrimSuffix(metrics, "/metrics") + "/v1/status"); err != nil {
		t.Error(err)
	} else if resp.Body.Close(); resp.StatusCode != 404 {
		t.Errorf("the metrics address serves the control API: GET /v1/status %d", resp.StatusCode)
	}
	for sc.Scan() {
		if strings.Contains(sc.Text(), "the report is at ") {
			break
		}
	}
	if code, report := get("/results/report.html"); code != 200 || !strings.Contains(report, "<title>netjam report") {
		t.Errorf("GET /results/report.html after the run: %d", code)
	}
	req, _ := http.NewRequest("POST", url+"/v1/stop", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	go io.Copy(io.Discard, stderr)
	if err := run.Wait(); err != nil {
		t.Errorf("netjam run --ui after the page's stop: %v", err)
	}
	if _, err := os.Stat(tokenPath); err == nil {
		t.Error("control.token is left in the output folder")
	}
	http.DefaultClient.CloseIdleConnections()
}

// netjam ctl reset --flow NAME ends that TCP flow's connection: the flow
// reports the reset and the run goes on; a wrong name or form is refused.
func TestCtlResetFlow(t *testing.T) {
	r := startCtlRun(t, `name: live
duration: 4s
link: {delay: 5ms, rate: 20Mbps}
flows: [{name: bulk, type: tcp, duration: 4s}]
`)
	out, run, ctl := filepath.Join(r.dir, "out"), r.run, r.ctl
	waitFor(t, "the flow to run", func() bool {
		_, stdout, _ := ctl("status", "-o", "json")
		return strings.Contains(stdout, `"bytes_received"`) && !strings.Contains(stdout, `"bytes_received": 0`)
	})
	if code, stdout, stderr := ctl("get", "uplink"); code != exitOK || !strings.HasPrefix(stdout, "LINK ") || !strings.Contains(stdout, "\nuplink  rate 20Mbps, queue droptail 1000p, delay 5ms ") {
		t.Errorf("ctl get uplink: exit %d\n%s%s", code, stdout, stderr)
	}
	if code, stdout, stderr := ctl("get", "uplink", "-o", "json"); code != exitOK || !strings.Contains(stdout, `"name": "uplink"`) {
		t.Errorf("ctl get uplink -o json: exit %d\n%s%s", code, stdout, stderr)
	}
	if code, _, stderr := ctl("get", "-o", "yaml"); code != exitBadUsage || !strings.Contains(stderr, "-o yaml: not an output format (text or json)") {
		t.Errorf("ctl get -o yaml: exit %d %s", code, stderr)
	}
	if code, _, stderr := ctl("get", "sideways"); code != exitBadUsage || !strings.Contains(stderr, `no link "sideways"`) {
		t.Errorf("ctl get sideways: exit %d %s", code, stderr)
	}
	if code, _, stderr := ctl("reset", "--flow="); code != exitBadUsage || !strings.Contains(stderr, "--flow NAME") {
		t.Errorf("ctl reset --flow without a name: exit %d %s", code, stderr)
	}
	if code, _, stderr := ctl("reset", "--flow", "nope"); code != exitBadUsage || !strings.Contains(stderr, `no flow "nope"`) {
		t.Errorf("ctl reset --flow nope: exit %d %s", code, stderr)
	}
	if code, stdout, stderr := ctl("reset", "--flow", "bulk"); code != exitOK || !strings.HasPrefix(stdout, "flow bulk: its connection reset at ") {
		t.Errorf("ctl reset --flow bulk: exit %d\n%s%s", code, stdout, stderr)
	}
	if err := run.Wait(); err != nil {
		t.Fatalf("the run after a reset: %v", err)
	}
	y, _ := os.ReadFile(filepath.Join(out, "scenario.yaml"))
	if !strings.Contains(string(y), "reset: {flow: bulk}") {
		t.Errorf("the resolved scenario has no reset:\n%s", y)
	}
}

// ctlRun is a netjam run with a control socket, as startCtlRun starts it.
type ctlRun struct {
	t      *testing.T
	dir    string // the test's folder: the scenario, the socket, out/
	sock   string // the control endpoint, unix:PATH
	run    *exec.Cmd
	stderr *strings.Builder // the run's
}

// startCtlRun writes scenario src into a new folder and starts netjam run
// on it with its control socket and output there; the run is killed at
// the test's end if it is still running.
func startCtlRun(t *testing.T, src string) *ctlRun {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "live.yaml")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	r := &ctlRun{t: t, dir: dir, sock: "unix:" + filepath.Join(dir, "nj.sock"), stderr: &strings.Builder{}}
	r.run = netjamProcess(t, "run", file, "-q", "--out", filepath.Join(dir, "out"), "--control", r.sock)
	r.run.Stderr = r.stderr
	if err := r.run.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.run.Process.Kill() })
	return r
}

// ctl runs netjam ctl against the run's control socket.
func (r *ctlRun) ctl(args ...string) (int, string, string) {
	return netjam(r.t, append([]string{"ctl", "--control", r.sock}, args...)...)
}

// TestCtlUsage: ctl refuses what it would otherwise misread, before it
// calls the endpoint: arguments a verb does not take (reset link.loss
// reset every key), a flag's value that is a key (schedule --at
// link.loss=1% then had nothing to set), a flag given last without its
// value (it took the verb).
func TestCtlUsage(t *testing.T) {
	big := filepath.Join(t.TempDir(), "big-token")
	os.WriteFile(big, []byte(strings.Repeat("x", 4097)), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"status", "extra"}, "ctl status takes no arguments, got extra"},
		{[]string{"reset", "link.loss"}, "ctl reset takes no arguments, got link.loss"},
		{[]string{"stop", "now"}, "ctl stop takes no arguments, got now"},
		{[]string{"schedule", "--at", "link.loss=1%"}, "ctl schedule: --at needs a TIME (from the run's start, such as 5s), got link.loss=1%"},
		{[]string{"set", "--for=", "link.loss=1%"}, "ctl set: --for needs a DURATION"},
		{[]string{"set", "--for"}, "ctl set: --for needs a value"},
		{[]string{"reset", "--flow"}, "ctl reset: --flow needs a value"},
		{[]string{"heal", "now"}, "ctl heal takes no arguments, got now"},
		{[]string{"partition", "a"}, "ctl partition: at least two groups, like partition a b,c (names joined by commas)"},
		{[]string{"partition", "a", ","}, `ctl partition: "," is not a group (names joined by commas, like b,c)`},
		// A token file is bounded: it could be a device that never ends.
		{[]string{"--control-token", big, "status"}, "netjam: --control-token: " + big + " is more than 4096 bytes: a token file holds one token\n"},
	} {
		code, stdout, stderr := netjam(t, append([]string{"ctl", "--control", "unix:/nonexistent/c.sock"}, c.args...)...)
		if code != exitBadUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("ctl %v: exit %d, want 2 saying %q\n%s%s", c.args, code, c.want, stdout, stderr)
		}
	}
}
