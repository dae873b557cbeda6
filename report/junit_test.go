package report

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	junit "github.com/joshdk/go-junit"

	"github.com/netjam/netjam/internal/testenv"
)

// TestJUnit writes the JUnit XML of a folder with a passing variant, one
// with a failed and an uncheckable expectation, a failed run and a skipped
// one, and reads it back with go-junit, a consumer CI tools use.
func TestJUnit(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, SummaryFile), []byte(`{"scenario": "ci", "netjam_version": "v1", "runs": [
  {"variant": "clean", "seed": 7, "duration_s": 10, "expectations": [
    {"expect": "flows.bulk.throughput > 4Mbps", "figure": "flows.bulk.throughput_bps", "got": 9.1e6, "got_text": "9.10Mbps", "pass": true}]},
  {"variant": "lossy", "seed": 7, "duration_s": 10.5, "expectations": [
    {"expect": "flows.bulk.throughput > 4Mbps", "figure": "flows.bulk.throughput_bps", "got": 3.2e6, "got_text": "3.20Mbps", "pass": false},
    {"expect": "flows.bulk.goodput > 1Mbps", "pass": false, "error": "flows.bulk has no figure \"goodput\""}]},
  {"variant": "broken", "seed": 7, "duration_s": 2, "error": "run ci/broken: flow bulk: connection reset"},
  {"variant": "tun", "seed": 7, "skipped": "TUN mode needs CAP_NET_ADMIN"}
]}`), 0o644)
	var b bytes.Buffer
	if err := JUnit(&b, openDir(t, dir)); err != nil {
		t.Fatal(err)
	}
	t.Logf("JUnit:\n%s", b.String())
	// The schema of the format CI systems read, checked by xmllint.
	xmllint := testenv.RequireTool(t, "xmllint", "libxml2-utils")
	file := filepath.Join(dir, "junit.xml")
	os.WriteFile(file, b.Bytes(), 0o644)
	if out, err := exec.Command(xmllint, "--noout", "--schema", "testdata/junit.xsd", file).CombinedOutput(); err != nil {
		t.Errorf("xmllint: %v\n%s", err, out)
	}
	suites, err := junit.Ingest(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	type tc struct{ suite, name, status, message string }
	var got []tc
	for _, s := range suites {
		for _, c := range s.Tests {
			msg := c.Message
			if c.Error != nil {
				msg = c.Error.Error()
			}
			got = append(got, tc{s.Name, c.Name, string(c.Status), msg})
		}
	}
	want := []tc{
		{"ci/clean", "run", "passed", ""},
		{"ci/clean", "flows.bulk.throughput > 4Mbps", "passed", ""},
		{"ci/lossy", "run", "passed", ""},
		{"ci/lossy", "flows.bulk.throughput > 4Mbps", "failed", "expected flows.bulk.throughput > 4Mbps\nflows.bulk.throughput_bps is 3.20Mbps"},
		{"ci/lossy", "flows.bulk.goodput > 1Mbps", "error", `flows.bulk has no figure "goodput"`},
		{"ci/broken", "run", "error", "run ci/broken: flow bulk: connection reset"},
		{"ci/tun", "run", "skipped", "TUN mode needs CAP_NET_ADMIN"},
	}
	if len(got) != len(want) {
		t.Fatalf("test cases:\n%v\nwant\n%v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("test case %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if s := suites[1]; s.Totals.Tests != 3 || s.Totals.Failed != 1 || s.Totals.Error != 1 || s.Properties["seed"] != "7" {
		t.Errorf("suite %s: totals %+v, properties %v", s.Name, s.Totals, s.Properties)
	}
}
