//go:build unix

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/netjam/netjam/internal/testenv"
)

// TestShellOutFollowsNoSymlinkOfTheCommand runs netjam shell as root
// under sudo (SUDO_UID of nobody) with --out in a folder nobody owns. The
// command, as nobody, fills the output folder with symbolic links (to a
// file of root's, mode 0600, and to paths outside that do not exist yet),
// then moves the folder aside and puts a new folder of such links in its
// place. netjam writes its results as root once the command has ended:
// into the folder it opened before the command started, replacing the
// links rather than following them, and owned by nobody. Root's file is
// untouched and nothing is made outside.
func TestShellOutFollowsNoSymlinkOfTheCommand(t *testing.T) {
	testenv.RequireTUN(t)
	base, err := os.MkdirTemp("", "netjam-sudo-out")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil { // root's, open to nobody
		t.Fatal(err)
	}
	home := filepath.Join(base, "home") // nobody's
	out := filepath.Join(home, "out")
	for _, d := range []string{home, out} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	secret := filepath.Join(base, "secret")
	const secretText = "root's own\n"
	if err := os.WriteFile(secret, []byte(secretText), 0o600); err != nil {
		t.Fatal(err)
	}
	// Every file netjam writes after the command: to root's file, or to
	// a new file beside it.
	links := map[string]string{
		"summary.json": secret, "report.html": secret, "throughput.png": secret, "netjam.log": secret,
		"timeseries.csv": filepath.Join(base, "new-timeseries"), "scenario.yaml": filepath.Join(base, "new-scenario"),
		"events.jsonl": filepath.Join(base, "new-events"), "throughput.svg": filepath.Join(base, "new-svg"),
	}
	var script strings.Builder
	script.WriteString("set -e\nlinks() {\n")
	for name, target := range links {
		script.WriteString("  ln -sfn " + target + " " + filepath.Join(out, name) + "\n")
	}
	script.WriteString("}\nlinks\nmv " + out + " " + out + ".old\nmkdir " + out + "\nlinks\n")

	cmd := netjamProcess(t, "shell", "-q", "--out", out, "--", "sh", "-c", script.String())
	cmd.Env = append(cmd.Env, "SUDO_UID=65534", "SUDO_GID=65534", "SUDO_USER=nobody")
	cmd.Dir = "/"
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Errorf("netjam shell: %v\n%s", err, stderr.String())
	}

	if b, err := os.ReadFile(secret); err != nil || string(b) != secretText {
		t.Errorf("root's file: %.40q..., %v; want it untouched, %q", b, err, secretText)
	}
	if st, err := os.Stat(secret); err != nil || st.Mode().Perm() != 0o600 || st.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Errorf("root's file: %v, %v; want root's, 0600", st.Mode(), err)
	}
	for _, target := range links {
		if target != secret {
			if _, err := os.Lstat(target); err == nil {
				t.Errorf("%s was made outside the output folder", target)
			}
		}
	}
	// The results are in the folder netjam opened (moved aside), in place
	// of the links, and nobody's.
	for _, name := range []string{"summary.json", "timeseries.csv", "scenario.yaml", "report.html"} {
		st, err := os.Lstat(filepath.Join(out+".old", name))
		if err != nil || !st.Mode().IsRegular() || st.Size() < 100 {
			t.Errorf("%s in the folder netjam opened: %v; want the result", name, err)
			if err == nil {
				t.Errorf("  it is %v, %d bytes", st.Mode(), st.Size())
			}
			continue
		}
		if s := st.Sys().(*syscall.Stat_t); s.Uid != 65534 || s.Gid != 65534 {
			t.Errorf("%s: owned by %d:%d, want the invoking user's, 65534:65534", name, s.Uid, s.Gid)
		}
	}
	// The folder the command put in its place is as the command left it.
	for name, target := range links {
		if got, err := os.Readlink(filepath.Join(out, name)); err != nil || got != target {
			t.Errorf("%s in the command's folder: %q, %v; want the command's link to %s", name, got, err, target)
		}
	}
}

// TestRunUnderSudoWritesAsTheUser: netjam as root under sudo (SUDO_UID of
// nobody) refuses an output folder and a --junit file that nobody may not
// write, and leaves everything it writes (results, capture, log, JUnit
// XML, a sweep's run folders, merge's and plot's files) owned by nobody.
func TestRunUnderSudoWritesAsTheUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("acting for the user who ran sudo needs root")
	}
	base, err := os.MkdirTemp("", "netjam-sudo-run")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o755) // root's: nobody may not write here
	home := filepath.Join(base, "home")
	os.Mkdir(home, 0o755)
	os.Chown(home, 65534, 65534)
	sc := filepath.Join(base, "s.yaml")
	os.WriteFile(sc, []byte("name: s\nclock: virtual\nduration: 1s\nflows: [{name: u, type: udp, rate: 1Mbps, duration: 1s}]\n"), 0o644)
	t.Setenv("SUDO_UID", "65534")
	t.Setenv("SUDO_GID", "65534")

	code, _, errOut := netjam(t, "run", "-q", "--out", filepath.Join(base, "out"), sc)
	if code != exitFailed || !strings.Contains(errOut, "permission denied") || !strings.Contains(errOut, "under sudo netjam writes as the user who ran it, uid 65534") {
		t.Errorf("--out in root's folder: exit %d, %q", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(base, "out")); err == nil {
		t.Error("--out in root's folder: made")
	}
	code, _, errOut = netjam(t, "run", "-q", "--out", filepath.Join(home, "out"), "--junit", filepath.Join(base, "junit.xml"), sc)
	if code != exitFailed || !strings.Contains(errOut, "writing JUnit XML") || !strings.Contains(errOut, "permission denied") {
		t.Errorf("--junit in root's folder: exit %d, %q", code, errOut)
	}
	out := filepath.Join(home, "run")
	if code, _, errOut := netjam(t, "run", "-q", "--out", out, "--capture", "client", "--junit", filepath.Join(home, "junit.xml"), sc); code != 0 {
		t.Fatalf("run: exit %d, %s", code, errOut)
	}
	if code, _, errOut := netjam(t, "plot", out); code != 0 {
		t.Fatalf("plot: exit %d, %s", code, errOut)
	}
	sweep := filepath.Join(home, "sweep")
	if code, _, errOut := netjam(t, "sweep", "-q", "--out", sweep, "--grid", "link.delay=1ms,2ms", sc); code != 0 {
		t.Fatalf("sweep: exit %d, %s", code, errOut)
	}
	if code, _, errOut := netjam(t, "merge", sweep); code != 0 {
		t.Fatalf("merge: exit %d, %s", code, errOut)
	}
	n := 0
	filepath.WalkDir(home, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			t.Error(err)
			return nil
		}
		n++
		st, _ := os.Lstat(path)
		if s := st.Sys().(*syscall.Stat_t); s.Uid != 65534 || s.Gid != 65534 {
			t.Errorf("%s: owned by %d:%d, want 65534:65534", path, s.Uid, s.Gid)
		}
		return nil
	})
	for _, p := range []string{"run/summary.json", "run/client.pcap", "run/netjam.log", "run/report.html", "junit.xml", "sweep/netjam.log", "sweep/sweep.html"} {
		if _, err := os.Stat(filepath.Join(home, p)); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	t.Logf("%d entries, all nobody's", n)
}
