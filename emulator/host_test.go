package emulator

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/zap"

	"github.com/netjam/netjam/outdir"
	"github.com/netjam/netjam/scenario"
)

// TestAdviceOnce: a missing privilege is said in plain words with its
// advice once however many runs it stopped, after the other errors; only
// tells whether it was all there was to say.
func TestAdviceOnce(t *testing.T) {
	pe := func() error {
		return &PrivilegeError{Op: "create device netjam0", Err: syscall.EPERM, Need: "creating a TUN device needs CAP_NET_ADMIN.",
			Fixes: []string{"run netjam as root", "sudo setcap cap_net_admin+ep netjam"}}
	}
	advice := "creating a TUN device needs CAP_NET_ADMIN (create device netjam0: operation not permitted). Either:\n  - run netjam as root\n  - sudo setcap cap_net_admin+ep netjam"
	for _, tc := range []struct {
		err             error
		privilege, only bool
		want            string
	}{
		{fmt.Errorf("run a: %w", pe()), true, true, advice},
		{errors.Join(fmt.Errorf("run a: %w", pe()), fmt.Errorf("run b: %w", pe())), true, true, "2 runs were skipped: " + advice},
		{errors.Join(fmt.Errorf("run a: %w", pe()), errors.New("run b: flow x: broken pipe")), true, false, "run b: flow x: broken pipe\n" + advice},
		{errors.New("run b: flow x: broken pipe"), false, false, "run b: flow x: broken pipe"},
	} {
		msg, privilege, only := Advice(tc.err)
		if msg != tc.want || privilege != tc.privilege || only != tc.only {
			t.Errorf("Advice(%q) = %q, %v, %v; want %q, %v, %v", tc.err, msg, privilege, only, tc.want, tc.privilege, tc.only)
		}
	}
}

// TestValidate: netjam validate's line for a file says what it holds,
// its sweep counted; the file's warnings come apart; an error is the
// file's.
func TestValidate(t *testing.T) {
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.yaml"), filepath.Join(dir, "bad.yaml")
	os.WriteFile(good, []byte("name: g\nlink: {uplink: {loss: 1%}}\nsweep: {grid: {link.delay: [1ms, 2ms]}, seeds: 3}\n"), 0o644)
	os.WriteFile(bad, []byte("name: b\nlink: {loss: 200%}\n"), 0o644)
	ok, warnings, err := Validate(good, []string{"link.loss=0%"})
	if err != nil || ok != "ok (g, 1 run; a sweep of 6 runs)" || len(warnings) != 1 {
		t.Errorf("got %q, %q, %v", ok, warnings, err)
	}
	if _, _, err := Validate(bad, nil); err == nil || !strings.Contains(err.Error(), "200%") {
		t.Errorf("a bad file: %v", err)
	}
}

// TestSweepRun: a sweep's run writes its results into its folder, then
// what comes after, and returns the expectations it did not meet.
func TestSweepRun(t *testing.T) {
	plan, err := scenario.Parse("s.yaml", []byte("clock: virtual\nduration: 300ms\nflows: [{name: u, type: udp, rate: 1Mbps, duration: 300ms}]\nexpect: [flows.u.throughput > 1Gbps]\n"), scenario.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir, err := outdir.Make(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	after := false
	unmet, err := SweepRun("v", func(d *outdir.Dir) error {
		_, err := d.Stat("summary.json")
		after = err == nil
		return nil
	})(context.Background(), plan, dir, zap.NewNop())
	if err != nil || len(unmet) != 1 || !after {
		t.Errorf("unmet %q, %v; after it saw summary.json: %v", unmet, err, after)
	}
}
