// Package testenv is what netjam's tests need of the machine they run on:
// root with a TUN device node, and external programs (iperf3, ping,
// setpriv...). A missing piece skips the test with its reason and how to
// get it, or fails the test when NETJAM_REQUIRE_TUN=1 (as in CI), so that
// a machine that should have everything cannot pass by skipping.
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// RequireEnv is the variable that turns skips into failures.
const RequireEnv = "NETJAM_REQUIRE_TUN"

// TUNPrivileged reports whether this process can make TUN devices and
// network namespaces: it runs on Linux, is root and /dev/net/tun exists.
func TUNPrivileged() bool {
	_, err := os.Stat("/dev/net/tun")
	return runtime.GOOS == "linux" && os.Geteuid() == 0 && err == nil
}

// RequireTUN skips t (or fails it, see Missing) unless TUNPrivileged.
func RequireTUN(t testing.TB) {
	t.Helper()
	if runtime.GOOS != "linux" {
		Missing(t, "TUN mode needs Linux, and this is "+runtime.GOOS)
	}
	if os.Geteuid() != 0 {
		Missing(t, "not running as root: TUN devices and network namespaces need CAP_NET_ADMIN and CAP_SYS_ADMIN (run: sudo go test ./...)")
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		Missing(t, fmt.Sprintf("no TUN device node: %v (sudo modprobe tun; in a container: --device /dev/net/tun)", err))
	}
}

// RequireTool returns the path of a program the test runs, from the
// Debian package pkg.
func RequireTool(t testing.TB, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(t, fmt.Sprintf("%s is not installed (apt-get install %s)", name, pkg))
	}
	return p
}

// Missing skips t for reason, or fails it when NETJAM_REQUIRE_TUN=1.
func Missing(t testing.TB, reason string) {
	t.Helper()
	if os.Getenv(RequireEnv) == "1" {
		t.Fatalf("%s=1, but %s", RequireEnv, reason)
	}
	t.Skipf("skipped: %s; set %s=1 to make this a failure", reason, RequireEnv)
}

// TUNNode is the TUN device node whose mode the privilege tests depend on.
const TUNNode = "/dev/net/tun"

// tunLockPath is the lock that orders the tests of every package (each a
// process of its own, run in parallel by go test) around TUNNode's mode.
var tunLockPath = filepath.Join(os.TempDir(), "netjam-test-dev-net-tun.lock")

// lockTUNNode takes the lock on TUNNode's mode, shared or exclusive, for
// the rest of t; the lock goes with the descriptor when t ends, or when
// the process does.
func lockTUNNode(t testing.TB, exclusive bool) {
	t.Helper()
	f, err := os.OpenFile(tunLockPath, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatalf("lock on %s's mode: %v", TUNNode, err)
	}
	err = lockFile(f, exclusive)
	if err != nil {
		f.Close()
		t.Fatalf("lock on %s's mode: %v", TUNNode, err)
	}
	t.Cleanup(func() { f.Close() })
}

// SetTUNMode gives TUNNode the permission bits mode for the rest of t and
// restores the bits it had when t ends. It holds an exclusive lock all
// that time, so that no test of another package sees a mode it did not
// ask for. It needs root (RequireTUN first).
func SetTUNMode(t testing.TB, mode os.FileMode) {
	t.Helper()
	lockTUNNode(t, true)
	fi, err := os.Stat(TUNNode)
	if err != nil {
		t.Fatal(err)
	}
	old := fi.Mode().Perm()
	if err := os.Chmod(TUNNode, mode); err != nil {
		t.Fatal(err)
	}
	// Cleanups run last in, first out: the mode is back before the lock goes.
	t.Cleanup(func() {
		if err := os.Chmod(TUNNode, old); err != nil {
			t.Errorf("restoring %s to mode %#o: %v", TUNNode, old, err)
		}
	})
}

// RequireTUNForAll skips t (or fails it, see Missing) unless TUNNode is
// readable and writable by every user, as the tests that run netjam as
// the unprivileged user nobody need. It holds a shared lock for the rest
// of t, so that SetTUNMode in another package waits for t to end.
func RequireTUNForAll(t testing.TB) {
	t.Helper()
	RequireTUN(t)
	lockTUNNode(t, false)
	fi, err := os.Stat(TUNNode)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm()&0o006 != 0o006 {
		Missing(t, fmt.Sprintf("%s is mode %#o: running netjam as an unprivileged user needs it usable by every user (sudo chmod 0666 %s, as most distributions ship it and .ci/run does)", TUNNode, fi.Mode().Perm(), TUNNode))
	}
}

// RequireUserns skips t (or fails it, see Missing) unless unprivileged
// users may make user namespaces, as rootless shells and runs need.
func RequireUserns(t testing.TB) {
	t.Helper()
	if b, err := os.ReadFile("/proc/sys/kernel/unprivileged_userns_clone"); err == nil && strings.TrimSpace(string(b)) == "0" {
		Missing(t, "unprivileged user namespaces are off (kernel.unprivileged_userns_clone=0)")
	}
}
