//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"golang.org/x/sys/unix"

	"github.com/netjam/netjam/confine"
	"github.com/netjam/netjam/emulator"
	"github.com/netjam/netjam/internal/testenv"
)

// Tests of TUN mode and shells through the netjam process itself (the
// test binary re-executed as netjam, see TestMain): exit statuses, and
// that nothing netjam made outlives it, whatever ends it.

// TestSignalsLeaveNothingBehind ends a TUN mode run with SIGTERM (netjam
// cleans up and exits 1, interrupted) and with SIGKILL (the kernel
// removes the device with netjam's descriptor): in both cases the device
// and its route are gone. The device lives in a namespace of the test.
func TestSignalsLeaveNothingBehind(t *testing.T) {
	testenv.RequireTUN(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			sh, _, err := emulator.NewShell() // as root: a namespace of its own
			if err != nil || sh.Rootless() {
				t.Fatalf("a network namespace: %v", err)
			}
			defer sh.Close()
			dir := t.TempDir()
			path := filepath.Join(dir, "tun.yaml")
			os.WriteFile(path, []byte(fmt.Sprintf(`name: signals
duration: 10m
link: {delay: 5ms}
tun: {name: njsig0, netns: %s, routes: [198.18.7.0/24]}
`, sh.Netns())), 0o644)
			cmd := netjamProcess(t, "run", "-q", "--out", filepath.Join(dir, "out"), path)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			h, err := netns.GetFromPath(sh.Netns())
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			nl, err := netlink.NewHandleAt(h)
			if err != nil {
				t.Fatal(err)
			}
			defer nl.Close()
			routeThere := func() bool {
				routes, _ := nl.RouteList(nil, netlink.FAMILY_V4)
				for _, r := range routes {
					if r.Dst != nil && r.Dst.String() == "198.18.7.0/24" {
						return true
					}
				}
				return false
			}
			waitFor(t, "the device and its route", func() bool {
				_, err := nl.LinkByName("njsig0")
				return err == nil && routeThere()
			})
			cmd.Process.Signal(sig)
			err = cmd.Wait()
			code := cmd.ProcessState.ExitCode()
			if sig == syscall.SIGTERM && (code != exitFailed || !strings.Contains(stderr.String(), "interrupted")) {
				t.Errorf("after SIGTERM: exit %d (%v), stderr %q; want 1, interrupted", code, err, stderr.String())
			}
			// The kernel deletes a device whose last descriptor closed at
			// once, though not necessarily before wait returns.
			waitFor(t, "the device to go", func() bool {
				_, err := nl.LinkByName("njsig0")
				return err != nil && !routeThere()
			})
		})
	}
}

// TestShell runs commands in shells: the command sees only the device and
// the loopback, gets the peer in its environment, and its exit status is
// netjam's; SIGTERM to netjam reaches the command, and the namespace is
// gone with it.
func TestShell(t *testing.T) {
	testenv.RequireTUN(t)
	out, err := netjamProcess(t, "shell", "-q", "--", "sh", "-c", `ip -o link | wc -l; ip route; echo peer=$NETJAM_PEER; exit 7`).Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Fatalf("exit status %v, want 7; output %s", err, out)
	}
	if got := string(out); !strings.HasPrefix(got, "2\ndefault dev netjam0") || !strings.Contains(got, "peer=10.99.0.2") {
		t.Errorf("inside the shell: %q, want 2 links (lo, netjam0), the default route through netjam0, the peer", got)
	}

	// SIGTERM: passed on to the command, which ends; netjam exits with
	// the command's status, and the namespace is no more (its inode is
	// no process's and nothing is mounted for it).
	cmd := netjamProcess(t, "shell", "-q", "--", "sh", "-c", `readlink /proc/self/ns/net; exec sleep 60`)
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, _ := io.ReadAtLeast(stdout, buf, 1)
	nsID := strings.TrimSpace(string(buf[:n]))
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 128+int(syscall.SIGTERM) {
		t.Errorf("after SIGTERM: exit %d, want %d (the command's status)", code, 128+int(syscall.SIGTERM))
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/ns/net")
	for _, p := range procs {
		if id, _ := os.Readlink(p); id == nsID {
			t.Errorf("%s is still in the shell's namespace %s", p, nsID)
		}
	}
}

// TestShellConfinesTheCommand runs root shells' commands and asks them
// who they are, what capabilities they hold (in effect, and in the
// bounding set that caps what anything they start may get), whether
// no_new_privs is set, whether they lead a session of their own, and
// whether they can enter the host's network namespace. Under sudo
// (SUDO_UID of nobody) the command is that user with no capability at
// all; with --as-root --cap net_raw it is root with CAP_NET_RAW (bit 13)
// alone; root without sudo keeps root's capabilities. Every one leads a
// new session (session=1: its session is its own process id), and no
// confined one can nsenter.
func TestShellConfinesTheCommand(t *testing.T) {
	testenv.RequireTUN(t)
	nsenter := testenv.RequireTool(t, "nsenter", "util-linux")
	// The test's own namespace is the host's, as far as the shell knows.
	hostNS := fmt.Sprintf("/proc/%d/ns/net", os.Getpid())
	script := `id -u; id -g; echo home=$HOME; grep -E '^(CapEff|CapBnd|CapAmb|NoNewPrivs):' /proc/self/status; ` +
		`echo session=$(( $(cut -d' ' -f6 /proc/self/stat) == $$ )); ` +
		nsenter + ` --net=` + hostNS + ` true 2>/dev/null && echo escaped; true`
	caps := func(eff, bnd string, nnp int) string {
		return fmt.Sprintf("CapEff:\t%s\nCapBnd:\t%s\nCapAmb:\t0000000000000000\nNoNewPrivs:\t%d\nsession=1\n", eff, bnd, nnp)
	}
	// Root without sudo holds what the test holds: what this thread
	// holds. (/proc/self is the main thread, which a test of output
	// written under sudo may have left parked with the user's file-system
	// ids and so without the file capabilities: outdir's goroutine with
	// the user's ids, locked to its thread, ended there, and Go parks the
	// main thread rather than end it.)
	runtime.LockOSThread()
	status, _ := os.ReadFile("/proc/thread-self/status")
	runtime.UnlockOSThread()
	rootCaps := regexp.MustCompile(`CapEff:\t(\w+)`).FindSubmatch(status)[1]
	noSudo := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "SUDO_") })
	for _, c := range []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"sudo", nil, []string{"SUDO_UID=65534", "SUDO_GID=65534", "SUDO_USER=nobody"},
			"65534\n65534\nhome=/nonexistent\n" + caps("0000000000000000", "0000000000000000", 1)},
		{"as-root", []string{"--as-root", "--cap", "net_raw"}, []string{"SUDO_UID=65534", "SUDO_GID=65534"},
			"0\n0\nhome=" + os.Getenv("HOME") + "\n" + caps("0000000000002000", "0000000000002000", 1)},
		{"as-root-nothing", []string{"--as-root"}, nil,
			"0\n0\nhome=" + os.Getenv("HOME") + "\n" + caps("0000000000000000", "0000000000000000", 1)},
		{"root", nil, nil, "0\n0\nhome=" + os.Getenv("HOME") + "\n" + caps(string(rootCaps), string(rootCaps), 0) + "escaped\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := netjamProcess(t, append(append([]string{"shell", "-q"}, c.args...), "--", "sh", "-c", script)...)
			cmd.Env = append(append(slices.Clone(noSudo), beNetjam+"=1"), c.env...)
			cmd.Dir = "/"
			out, err := cmd.Output()
			if err != nil || string(out) != c.want {
				t.Errorf("%v: %q, want %q", err, out, c.want)
			}
		})
	}
	// A program root may run and the user may not (in a folder of
	// root's alone): the command cannot run, as a shell says.
	private := filepath.Join(t.TempDir(), "private.sh")
	os.WriteFile(private, []byte("#!/bin/sh\necho ran\n"), 0o755)
	cmd := netjamProcess(t, "shell", "-q", "--", private)
	cmd.Env = append(append(slices.Clone(noSudo), beNetjam+"=1"), "SUDO_UID=65534", "SUDO_GID=65534")
	var errOut strings.Builder
	cmd.Stderr = &errOut
	if out, _ := cmd.Output(); cmd.ProcessState.ExitCode() != confine.ExitCannotRun || len(out) > 0 ||
		!strings.HasSuffix(errOut.String(), "netjam: shell: "+private+": cannot run: permission denied\n") {
		t.Errorf("a program the user may not run: exit %d, output %q, stderr %q; want 126, cannot run", cmd.ProcessState.ExitCode(), out, errOut.String())
	}
	code, _, stderr := netjam(t, "shell", "--as-root", "--cap", "net_rawr", "--", "true")
	if code != exitBadUsage || !strings.Contains(stderr, `--cap: "net_rawr" is not a capability`) {
		t.Errorf("an unknown capability: exit %d, %q", code, stderr)
	}
}

// setuidCopy copies the program at src into a folder every user may
// enter, on a filesystem that honours set-user-ID bits (os.TempDir's, or
// else the package's), owned by root with mode 4755, and returns its
// path. Without such a filesystem the test is skipped.
func setuidCopy(t *testing.T, src string) string {
	t.Helper()
	testenv.RequireTool(t, "setpriv", "util-linux")
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, parent := range []string{os.TempDir(), "."} {
		var st unix.Statfs_t
		if unix.Statfs(parent, &st) != nil || st.Flags&unix.ST_NOSUID != 0 {
			continue
		}
		dir, err := os.MkdirTemp(parent, "netjam-setuid")
		if err != nil {
			continue
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		dir, _ = filepath.Abs(dir)
		bin := filepath.Join(dir, filepath.Base(src))
		if os.Chmod(dir, 0o755) != nil || os.WriteFile(bin, b, 0o755) != nil || os.Chown(bin, 0, 0) != nil || os.Chmod(bin, os.ModeSetuid|0o755) != nil {
			t.Fatalf("making %s set-user-ID root", bin)
		}
		// Every folder above must let nobody through, and the bit must
		// work there: nobody runs it as root.
		if out, err := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", bin, "-u").Output(); err != nil || string(out) != "0\n" {
			continue
		}
		return bin
	}
	testenv.Missing(t, "no folder on a filesystem without nosuid that every user may enter")
	return ""
}

// TestShellSetuidGivesNothing runs a set-user-ID-root copy of id(1) as a
// shell's command under sudo: it must stay the invoking user (no_new_privs
// makes exec ignore the bit), where before it became root and could read
// /etc/shadow.
func TestShellSetuidGivesNothing(t *testing.T) {
	testenv.RequireTUN(t)
	id := setuidCopy(t, testenv.RequireTool(t, "id", "coreutils"))
	cmd := netjamProcess(t, "shell", "-q", "--", "sh", "-c", id+" -u; "+id+" -ru")
	cmd.Env = append(cmd.Env, "SUDO_UID=65534", "SUDO_GID=65534", "SUDO_USER=nobody")
	cmd.Dir = "/"
	out, err := cmd.Output()
	if err != nil || string(out) != "65534\n65534\n" {
		t.Errorf("a set-user-ID-root program in the shell: %v, effective and real uid %q, want 65534 for both", err, out)
	}
}

// TestShellPassesTerminalSignals: the command leads a session of its own,
// so the terminal's Ctrl-C reaches netjam alone, which passes it on to the
// command's whole process group (the child the script waits for ends at
// once, not in 30 s). Ctrl-Z (SIGTSTP) stops neither.
func TestShellPassesTerminalSignals(t *testing.T) {
	testenv.RequireTUN(t)
	// The child says ready itself, so that it is there when Ctrl-C
	// comes: said by the script, the signal could come before the
	// script started the sleep.
	cmd := netjamProcess(t, "shell", "-q", "--", "sh", "-c", `trap 'echo INT; exit 5' INT; sh -c 'echo ready; exec sleep 30'; echo not interrupted`)
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	kill := time.AfterFunc(20*time.Second, func() { cmd.Process.Kill() })
	defer kill.Stop()
	buf := make([]byte, 6)
	if _, err := io.ReadFull(stdout, buf); err != nil || string(buf) != "ready\n" {
		t.Fatalf("the command's first line: %q, %v", buf, err)
	}
	cmd.Process.Signal(syscall.SIGTSTP)
	cmd.Process.Signal(syscall.SIGINT)
	rest, _ := io.ReadAll(stdout)
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 5 || string(rest) != "INT\n" {
		t.Errorf("after Ctrl-Z and Ctrl-C: exit %d, output %q; want the command's trap: 5, \"INT\\n\"", code, rest)
	}
}

// pushInputArg, the first argument of the test binary, makes it try to
// push input into the terminal on its standard input (tryPushInput).
const pushInputArg = "__netjam-test-push-input"

// tryPushInput pushes "x" into the terminal of standard input, as a
// hostile command would push a command line for the user's shell to run
// once netjam has ended, and prints the outcome.
func tryPushInput() int {
	c := byte('x')
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, 0, unix.TIOCSTI, uintptr(unsafe.Pointer(&c)))
	if errno != 0 {
		fmt.Println("TIOCSTI:", errno)
		return 1
	}
	fmt.Println("TIOCSTI: pushed")
	return 0
}

// TestShellCannotPushInput runs netjam on a terminal of the test's (a
// pseudo-terminal, netjam's controlling terminal) and a shell's command
// that tries to push input into it with TIOCSTI: the command leads a
// session of its own, so the terminal is not its controlling one, and
// without CAP_SYS_ADMIN (--as-root keeps none) Linux refuses. In
// netjam's session the push went through (where dev.tty.legacy_tiocsti
// allows it at all).
func TestShellCannotPushInput(t *testing.T) {
	testenv.RequireTUN(t)
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		testenv.Missing(t, fmt.Sprintf("no pseudo-terminal: %v", err))
	}
	defer ptmx.Close()
	if err := unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	pts, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer pts.Close()
	exe, _ := os.Executable()
	cmd := netjamProcess(t, "shell", "-q", "--as-root", "--", exe, pushInputArg)
	cmd.Stdin = pts
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	out, _ := cmd.Output()
	// EPERM; EIO where dev.tty.legacy_tiocsti is 0.
	if got := string(out); got != "TIOCSTI: operation not permitted\n" && got != "TIOCSTI: input/output error\n" {
		t.Errorf("the command pushing input into netjam's terminal: %q, want it refused (operation not permitted)", got)
	}
}

// asNobody returns a command running netjam as user nobody, with no
// capability; dir is a folder nobody may write. Without setpriv the test
// is skipped.
func asNobody(t *testing.T, args ...string) (*exec.Cmd, string) {
	t.Helper()
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		testenv.Missing(t, "setpriv is not installed (apt-get install util-linux)")
	}
	// The test binary's folder is not open to others: copy it.
	exe, _ := os.Executable()
	dir, err := os.MkdirTemp("", "netjam-priv")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o777)
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "netjam")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(setpriv, append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", bin}, args...)...)
	cmd.Env = append(os.Environ(), beNetjam+"=1")
	cmd.Dir = dir
	return cmd, dir
}

// TestShellOutWritesWhatRunWrites: netjam shell --out leaves the folder a
// run leaves: results, plots, report.html and netjam.log (with the info
// lines the terminal did not show).
func TestShellOutWritesWhatRunWrites(t *testing.T) {
	testenv.RequireTUN(t)
	out := filepath.Join(t.TempDir(), "out")
	cmd := netjamProcess(t, "shell", "-q", "--out", out, "--set", "link.delay=5ms",
		"--set", "flows=[{name: probe, type: udp, interval: 10ms, duration: 1s}]", "--", "sleep", "1.5")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	for _, f := range []string{"summary.json", "timeseries.csv", "scenario.yaml", "report.html", "throughput.png", "throughput.svg", "delay.png"} {
		if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(out, "netjam.log")); !strings.Contains(string(b), `"msg":"run end"`) {
		t.Errorf("netjam.log lacks the run's info lines:\n%s", b)
	}
}

// TestShellCapture: a shell's scenario with a capture section writes the
// pcap into --out (it failed with "capture needs an output folder"), and
// without --out netjam says at once that the capture needs it.
func TestShellCapture(t *testing.T) {
	testenv.RequireTUN(t)
	ping := testenv.RequireTool(t, "ping", "iputils-ping")
	dir := t.TempDir()
	path := filepath.Join(dir, "capture.yaml")
	os.WriteFile(path, []byte("name: captured\nduration: 1m\nlink: {delay: 5ms}\ncapture: [client]\n"), 0o644)
	out := filepath.Join(dir, "out")
	cmd := netjamProcess(t, "shell", "-q", "--out", out, path, "--", "sh", "-c", ping+" -n -c 2 -i 0.2 -W 5 $NETJAM_PEER >/dev/null")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("netjam shell with a capture and --out: %v\n%s", err, b)
	}
	// The pcap header (24 bytes), then each packet's record: two echo
	// requests and their replies at least.
	if st, err := os.Stat(filepath.Join(out, "client.pcap")); err != nil || st.Size() < 24+4*(16+84) {
		t.Errorf("client.pcap: %v, want the two pings and their replies in it", err)
	}
	code, _, stderr := netjam(t, "shell", "-q", path, "--", "true")
	if code != exitBadUsage || !strings.Contains(stderr, "netjam: "+path+": capture: netjam shell writes the capture into --out DIR; give one\n") {
		t.Errorf("a capture without --out: exit %d, %q", code, stderr)
	}
}

// TestWithoutPrivilegesExit2 runs TUN mode as an unprivileged user, with
// /dev/net/tun usable by every user and with it root's alone: netjam exits
// 2 and says, once, what is needed and how to get it. netjam run has a
// forward (which needs netjam in the user's own namespace, so no rootless
// run); netjam shell tries a rootless shell.
func TestWithoutPrivilegesExit2(t *testing.T) {
	testenv.RequireTUN(t)
	for _, c := range []struct {
		mode  os.FileMode
		args  []string
		wants []string
	}{
		{0o666, []string{"run", "-q", "--out", "out", "tun.yaml"}, []string{
			"netjam: creating a TUN device needs CAP_NET_ADMIN (create device netjam0: operation not permitted). Either:\n  - run netjam as root: sudo "}},
		// Without -q: the log, the table's line for the skipped run,
		// then the advice, once.
		{0o666, []string{"run", "--out", "out", "tun.yaml"}, []string{
			"netjam: creating a TUN device needs CAP_NET_ADMIN (create device netjam0: operation not permitted). Either:\n  - run netjam as root: sudo "}},
		{0o600, []string{"run", "-q", "--out", "out", "tun.yaml"}, []string{
			"netjam: TUN mode needs read-write access to /dev/net/tun (mode 0666 on most systems) (open /dev/net/tun: permission denied). Either:\n",
			"\n  - make the node usable by every user, as most distributions ship it: sudo chmod 0666 /dev/net/tun\n"}},
		{0o600, []string{"shell", "-q", "--", "true"}, []string{
			"netjam: TUN mode needs read-write access to /dev/net/tun (mode 0666 on most systems) (open /dev/net/tun in the rootless shell's user namespace: permission denied). Either:\n",
			"\n  - make the node usable by every user, as most distributions ship it: sudo chmod 0666 /dev/net/tun\n"}},
	} {
		t.Run(fmt.Sprintf("%s/%#o", c.args[0], c.mode), func(t *testing.T) {
			if c.args[0] == "shell" {
				testenv.RequireUserns(t)
			}
			testenv.SetTUNMode(t, c.mode)
			cmd, dir := asNobody(t, c.args...)
			os.WriteFile(filepath.Join(dir, "tun.yaml"), []byte("name: priv\nduration: 1s\ntun: {forward: [{proto: tcp, listen: 80, to: 127.0.0.1:80}]}\n"), 0o644)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != exitBadUsage {
				t.Fatalf("netjam %s as nobody: %v, want exit 2\n%s", c.args[0], err, out)
			}
			// The final error, netjam's last words.
			s := string(out)
			last := s[strings.LastIndex(s, "\nnetjam: ")+1:]
			for _, w := range c.wants {
				if !strings.Contains(last, w) {
					t.Errorf("netjam %s as nobody does not say %q:\n%s", c.args[0], w, last)
				}
			}
			// Once in all netjam says, at the end; the rest names the
			// cause without the advice.
			if n := strings.Count(s, "Either:"); n != 1 || strings.Count(s, "sudo ") != strings.Count(last, "sudo ") {
				t.Errorf("netjam %s as nobody gives its advice %d times:\n%s", c.args[0], n, s)
			}
		})
	}
}

// TestShellRootless runs netjam shell as an unprivileged user: the shell
// lives in a user namespace of its own, the command crosses the path
// (ping measures its delay) and reaches a server on the host's loopback
// through a forward, which only netjam outside the namespace can reach.
func TestShellRootless(t *testing.T) {
	testenv.RequireTUNForAll(t) // to become nobody and open /dev/net/tun
	testenv.RequireUserns(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "host service")
	}))
	defer srv.Close()
	cmd, _ := asNobody(t, "shell", "-q", "--set", "link.delay=10ms",
		"--set", fmt.Sprintf("tun={forward: [{proto: tcp, listen: 8080, to: %s}]}", srv.Listener.Addr()),
		"--", "sh", "-c", `id -u; grep NoNewPrivs /proc/self/status; echo session=$(( $(cut -d' ' -f6 /proc/self/stat) == $$ )); ping -n -c 10 -i 0.2 -w 10 $NETJAM_PEER | grep -o 'time=[0-9.]*'; curl -s http://$NETJAM_PEER:8080/; exit 3`)
	// The command's output is netjam's stdout; netjam's own log
	// (warnings of a busy machine among them) goes to stderr.
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("rootless shell: %v, want the command's exit status 3\n%s%s", err, out, stderr.Bytes())
	}
	got := string(out)
	t.Logf("rootless shell:\n%s\nstderr:\n%s", got, stderr.Bytes())
	if !strings.HasPrefix(got, "0\nNoNewPrivs:\t1\nsession=1\n") || strings.Count(got, "time=") != 10 || !strings.HasSuffix(got, "host service") {
		t.Errorf("rootless shell output %q: want uid 0 (of the user namespace), no_new_privs, a session of its own, 10 pings, the host service", got)
	}
	// The path's delay, not the machine's load, is what is checked: no
	// reply comes back before 20 ms (a busy machine cannot speed one up),
	// and the fastest of ten is nearer 20 ms than the 10 ms or 30 ms a
	// delay applied once or three times would give. A loaded CI machine
	// (the race pass beside other packages' tests) added 2.5 ms to the
	// fastest of five; the bound leaves it room without hiding a wrong
	// delay.
	var rtts []float64
	for _, m := range regexp.MustCompile(`time=([0-9.]+)`).FindAllStringSubmatch(got, -1) {
		v, _ := strconv.ParseFloat(m[1], 64)
		rtts = append(rtts, v)
	}
	slices.Sort(rtts)
	if len(rtts) == 10 && (rtts[0] < 20 || rtts[0] >= 25) {
		t.Errorf("ping RTTs %v ms across 10 ms each way: want none below 20, the fastest under 25", rtts)
	}
}

// TestRunRootless runs a scenario with kernel flows as an unprivileged
// user: netjam runs again in a user and network namespace of its own,
// where it makes the device; the kernel's TCP and UDP cross the path.
func TestRunRootless(t *testing.T) {
	testenv.RequireTUNForAll(t) // to become nobody and open /dev/net/tun
	testenv.RequireUserns(t)
	cmd, dir := asNobody(t, "run", "-q", "--out", "out", "kernel.yaml")
	os.WriteFile(filepath.Join(dir, "kernel.yaml"), []byte(`name: rootless
duration: 20s
link: {delay: 5ms, loss: 1%}
tun: {}
flows:
  - {name: bulk, type: tcp, stack: kernel, cc: cubic, size: 1MB}
  - {name: probe, type: udp, stack: kernel, interval: 2ms, count: 200}
`), 0o644)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("rootless run: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "out", "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var sum struct {
		Runs []struct {
			Flows []struct {
				Name            string `json:"name"`
				Stack           string `json:"stack"`
				BytesReceived   uint64 `json:"bytes_received"`
				PacketsReceived uint64 `json:"packets_received"`
			}
		}
	}
	if err := json.Unmarshal(b, &sum); err != nil || len(sum.Runs) != 1 || len(sum.Runs[0].Flows) != 2 {
		t.Fatalf("summary: %v\n%s", err, b)
	}
	f := sum.Runs[0].Flows
	if f[0].Stack != "kernel" || f[0].BytesReceived != 1e6 || f[1].PacketsReceived < 180 {
		t.Errorf("rootless kernel flows: %+v", f)
	}
}

// TestShellDelayMatrix: in one netjam shell of configs/delay-matrix.yaml
// (its flows left out), ping sees each path's round trip to the peer's
// address on it: 40 ms to 10.20.0.1 (to-eu), 130 ms to 10.30.0.1
// (to-us), 14 ms to the peer's own 10.99.0.2 (the default path, nearby).
func TestShellDelayMatrix(t *testing.T) {
	testenv.RequireTUN(t)
	testenv.RequireTool(t, "ping", "iputils-ping")
	out, err := netjamProcess(t, "shell", "-q", "--set", "flows=[]", "../../configs/delay-matrix.yaml", "--", "sh", "-c",
		`for a in 10.20.0.1 10.30.0.1 10.99.0.2; do echo "to $a"; ping -n -c 20 -i 0.2 $a; done`).Output()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	want := map[string]float64{"10.20.0.1": 40, "10.30.0.1": 130, "10.99.0.2": 14}
	fastest := map[string]float64{}
	var to string
	for _, line := range strings.Split(string(out), "\n") {
		if a, ok := strings.CutPrefix(line, "to "); ok {
			to = a
		}
		if m := regexp.MustCompile(`time=([0-9.]+) ms`).FindStringSubmatch(line); m != nil {
			v, _ := strconv.ParseFloat(m[1], 64)
			if f, ok := fastest[to]; !ok || v < f {
				fastest[to] = v
			}
		}
	}
	for a, w := range want {
		t.Logf("ping %s: fastest %.3f ms (%.0f ms of round trip)", a, fastest[a], w)
		// The fastest of 20: a loaded machine delays replies, it speeds
		// none up, so a delay left out anywhere shows below w. Each path
		// crosses 4 directions (2 links each way), each a timer of the
		// wall clock that fires a little late (measured 0.6 to 1.0 ms
		// above at a load of 8 on 2 cores, in CI's race pass 1.4 ms,
		// and 4.0 on the 130 ms path with the fastest of 10 and other
		// work beside CI). 4.5 ms of room is less than the smallest
		// error above w but one (the access link's 5 ms applied twice,
		// or a wrong path's 26 ms or more); only the local link's 2 ms
		// applied twice would pass. The access link's 20 Mbit/s adds
		// 0.07 ms of serialization.
		if f, ok := fastest[a]; !ok || f < w || f > w+4.5 {
			t.Errorf("ping %s: fastest %.3f ms, want %.0f to %.1f\n%s", a, f, w, w+4.5, out)
		}
	}
}
