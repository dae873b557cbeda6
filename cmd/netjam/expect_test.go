package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

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
