package netjam_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/netjam/netjam/internal/testenv"
)

// childEnv marks the test binary run again as an unprivileged user.
const childEnv = "NETJAM_API_UNPRIVILEGED"

// TestAsUnprivilegedUser runs this package's tests again as the user
// nobody, with no capability: a Path needs no privilege at all. (Run by a
// user who is not root, every test here already is that test.)
func TestAsUnprivilegedUser(t *testing.T) {
	if os.Getenv(childEnv) == "1" {
		t.Skip("already the unprivileged run")
	}
	if os.Geteuid() != 0 {
		t.Skip("not root: every test of this package already ran unprivileged")
	}
	setpriv := testenv.RequireTool(t, "setpriv", "util-linux")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The test binary's folder is not open to others: copy it.
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "netjam.test")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all",
		bin, "-test.run=^(TestHTTPThroughPath|TestUDPThroughPath|TestListenThroughPath|TestDialRefused|Example)$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	t.Logf("as nobody:\n%s", out)
	if err != nil {
		t.Fatalf("the tests failed as an unprivileged user: %v", err)
	}
}
