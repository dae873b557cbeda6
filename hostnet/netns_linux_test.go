package hostnet

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/netjam/netjam/internal/testenv"
)

// netnsHelperEnv makes the test binary TestNetnsHelperProcess.
const netnsHelperEnv = "NETJAM_NETNS_HELPER"

// TestNetnsNeverOnMainThread enters fresh namespaces many times in a
// process with one P, where the goroutine that enters one easily runs on
// the main thread: Go parks a main thread whose locked goroutine ends
// instead of ending it, and the process's own /proc/PID/ns/net (the main
// thread's) would then point into the namespace for good. It must not
// move.
func TestNetnsNeverOnMainThread(t *testing.T) {
	testenv.RequireTUN(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestNetnsHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), netnsHelperEnv+"=1", "GOMAXPROCS=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "stayed") {
		t.Errorf("helper: %v\n%s", err, out)
	}
}

// TestNetnsHelperProcess is the helper of TestNetnsNeverOnMainThread.
func TestNetnsHelperProcess(t *testing.T) {
	if os.Getenv(netnsHelperEnv) == "" {
		t.Skip("the helper process of TestNetnsNeverOnMainThread, run by it")
	}
	runtime.GOMAXPROCS(1)
	own, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	for i := range 50 {
		n, err := NewNetns()
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		if err := n.Do(func() error { return nil }); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		n.Close()
		if now, _ := os.Readlink("/proc/self/ns/net"); now != own {
			fmt.Printf("the process's namespace moved from %s to %s after %d namespaces\n", own, now, i+1)
			os.Exit(1)
		}
	}
	fmt.Println("stayed")
	os.Exit(0)
}

// TestNetnsStartWithHosts starts commands in a fresh namespace with a
// hosts file of their own (a folder of files for /etc): they resolve its names, see only the
// namespace's devices, and the host's /etc/hosts and mounts stay as they
// were.
func TestNetnsStartWithHosts(t *testing.T) {
	testenv.RequireTUN(t)
	if _, err := exec.LookPath("getent"); err != nil {
		t.Skip("no getent")
	}
	before, err := os.ReadFile("/etc/hosts")
	if err != nil {
		t.Skip("no /etc/hosts to mount over")
	}
	mountsBefore, _ := os.ReadFile("/proc/self/mountinfo")
	n, err := NewNetns()
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	etc := t.TempDir()
	if err := os.WriteFile(etc+"/hosts", []byte("127.0.0.1 localhost\n10.99.0.2 server\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Files /etc does not have are left out.
	if err := os.WriteFile(etc+"/netjam-no-such-file", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		var out strings.Builder
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := n.Start(cmd, etc); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out.String())
		}
		return out.String()
	}
	if out := run("getent", "hosts", "server"); !strings.Contains(out, "10.99.0.2") {
		t.Errorf("getent hosts server in the namespace: %q, want 10.99.0.2", out)
	}
	if out := run("cat", "/proc/net/dev"); strings.Count(out, ":") != 1 || !strings.Contains(out, "lo:") {
		t.Errorf("the command sees other devices than the namespace's loopback:\n%s", out)
	}
	if after, _ := os.ReadFile("/etc/hosts"); string(after) != string(before) {
		t.Errorf("the host's /etc/hosts changed")
	}
	if mountsAfter, _ := os.ReadFile("/proc/self/mountinfo"); string(mountsAfter) != string(mountsBefore) {
		t.Errorf("the host's mounts changed:\n%s\nwas\n%s", mountsAfter, mountsBefore)
	}
}
