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
