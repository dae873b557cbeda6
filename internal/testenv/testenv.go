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
	"testing"
)

// RequireEnv is the variable that turns skips into failures.
const RequireEnv = "NETJAM_REQUIRE_TUN"

// TUNPrivileged reports whether this process can make TUN devices and
// network namespaces: it is root and /dev/net/tun exists.
func TUNPrivileged() bool {
	_, err := os.Stat("/dev/net/tun")
	return os.Geteuid() == 0 && err == nil
}

// RequireTUN skips t (or fails it, see Missing) unless TUNPrivileged.
func RequireTUN(t testing.TB) {
	t.Helper()
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
