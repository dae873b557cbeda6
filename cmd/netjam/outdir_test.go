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
