package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netjam/netjam/internal/testenv"
)

// TestShellCurlCrossesAnOutage: a real curl in netjam shell downloads a
// 6 MB file from a server on the host's loopback (through a forward) over
// a 20 Mbit/s path whose timeline cuts it for 2 s mid-download; the
// kernel's TCP waits out the outage and the file arrives whole (its
// SHA-256 is checked). The run's events.jsonl has the outage at its
// times.
func TestShellCurlCrossesAnOutage(t *testing.T) {
	testenv.RequireTUN(t)
	testenv.RequireTool(t, "curl", "curl")
	body := make([]byte, 6<<20)
	r := rand.NewChaCha8([32]byte{7})
	r.Read(body)
	sum := sha256.Sum256(body)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write(body) }))
	defer srv.Close()
	dir := t.TempDir()
	sc := filepath.Join(dir, "outage.yaml")
	if err := os.WriteFile(sc, []byte(fmt.Sprintf(`name: outage
duration: 30s
link: {rate: 20Mbps, delay: 5ms, queue: 100}
tun: {forward: [{proto: tcp, listen: 8080, to: %s}]}
timeline:
  - {at: 1s, for: 2s, set: {link.loss: 100%%}}
`, srv.Listener.Addr())), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	cmd := netjamProcess(t, "shell", "-q", "--out", out, sc, "--",
		"sh", "-c", `curl -sS --max-time 25 http://$NETJAM_PEER:8080/file | sha256sum`)
	got, err := cmd.Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		t.Fatalf("shell: %v\n%s%s", err, got, ee.Stderr)
	} else if err != nil {
		t.Fatal(err)
	}
	if want := hex.EncodeToString(sum[:]); !strings.HasPrefix(string(got), want) {
		t.Errorf("curl's file has SHA-256 %q, want %s", got, want)
	}
	events, err := os.ReadFile(filepath.Join(out, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"time_s":1,"key":"link.loss","old":"","new":"100%"`, `"time_s":3,"key":"link.loss","old":"100%","new":""`} {
		if !strings.Contains(string(events), want) {
			t.Errorf("events.jsonl has no %s:\n%s", want, events)
		}
	}
}
