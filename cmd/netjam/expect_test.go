package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	junit "github.com/joshdk/go-junit"
)

// TestExpectationsExit3 runs a scenario whose expectations hold in one
// variant and not in the other: netjam run exits 3, says which did not
// hold and what the run got, and writes JUnit XML a CI tool reads; the
// passing variant alone exits 0.
func TestExpectationsExit3(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "ci.yaml")
	os.WriteFile(file, []byte(`name: ci
duration: 3s
link: {delay: 5ms}
flows: [{name: probe, type: udp, interval: 10ms, count: 50}]
expect:
  - flows.probe.delay_ms.p95 < 200ms
  - flows.probe.loss == 0%
variants:
  - {name: clean}
  - {name: slow, set: {link.delay: 300ms}}
`), 0o644)
	xmlFile := filepath.Join(dir, "junit.xml")
	code, stdout, stderr := netjam(t, "run", file, "--out", filepath.Join(dir, "out"), "--junit", xmlFile, "--seed", "1")
	if code != exitExpect {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitExpect, stdout, stderr)
	}
	if !strings.Contains(stderr, "netjam: 1 expectation(s) not met:\n  ci/slow: flows.probe.delay_ms.p95 < 200ms: FAIL (got 3") {
		t.Errorf("stderr does not say which expectation failed:\n%s", stderr)
	}
	if !regexp.MustCompile(`\nclean +flows\.probe\.delay_ms\.p95 < 200ms +[0-9.]+ms +pass\n`).MatchString(stdout) ||
		!regexp.MustCompile(`\nslow +flows\.probe\.delay_ms\.p95 < 200ms +[3-9][0-9][0-9]\.[0-9]+ms +FAIL \(got [3-9][0-9][0-9]\.[0-9]+ms\)\n`).MatchString(stdout) {
		t.Errorf("stdout lacks the expectations table:\n%s", stdout)
	}
	b, err := os.ReadFile(xmlFile)
	if err != nil {
		t.Fatal(err)
	}
	suites, err := junit.Ingest(b)
	if err != nil || len(suites) != 2 {
		t.Fatalf("JUnit: %v, %d suites\n%s", err, len(suites), b)
	}
	if s := suites[0]; s.Name != "ci/clean" || s.Totals.Tests != 3 || s.Totals.Passed != 3 {
		t.Errorf("suite %s: %+v", s.Name, s.Totals)
	}
	if s := suites[1]; s.Name != "ci/slow" || s.Totals.Tests != 3 || s.Totals.Failed != 1 || s.Tests[1].Status != junit.StatusFailed {
		t.Errorf("suite %s: %+v", s.Name, s.Totals)
	}

	code, stdout, stderr = netjam(t, "run", file, "-q", "--out", filepath.Join(dir, "out2"), "--variant", "clean")
	if code != exitOK {
		t.Errorf("the clean variant alone: exit %d, want 0\n%s%s", code, stdout, stderr)
	}
}

// An expectation the figures of a run cannot satisfy whatever the run (a
// figure the summary lacks, a unit of another kind) stops run, sweep,
// shell and validate before anything runs, where it used to be found
// "not checked" once the run was over.
func TestExpectationsCheckedBeforeTheRun(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "bad.yaml")
	os.WriteFile(file, []byte(`duration: 30s
flows: [{name: bulk, type: tcp, duration: 30s}]
expect:
  - flows.bulk.throughput > 1ms
`), 0o644)
	want := file + `: expect[0]: "flows.bulk.throughput > 1ms": flows.bulk.throughput_bps is a rate, but 1ms is a duration`
	out := filepath.Join(dir, "out")
	for _, args := range [][]string{
		{"validate", file},
		{"run", file, "--out", out},
		{"sweep", file, "--grid", "link.loss=1%,2%", "--out", out},
		{"shell", file, "--", "true"},
	} {
		start := time.Now()
		code, _, stderr := netjam(t, args...)
		if code != exitBadUsage || !strings.Contains(stderr, want) || time.Since(start) > 10*time.Second {
			t.Errorf("netjam %s: exit %d after %v, want %d at once saying\n%s\ngot:\n%s", args[0], code, time.Since(start), exitBadUsage, want, stderr)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a run wrote its folder")
	}
}
