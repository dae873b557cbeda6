package main

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

// beNetjam, set in a child's environment, makes the test binary run as
// netjam with the child's arguments.
const beNetjam = "NETJAM_TEST_BE_NETJAM"

// netjamProcess returns a command running netjam with args.
func netjamProcess(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), beNetjam+"=1")
	return cmd
}

// waitFor polls cond for up to 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
