package layering

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/netjam/netjam/"

// gvisor is where netjam's patched copy of gVisor lives, inside the module.
const gvisor = module + "third_party/gvisor/"

// pkg is what go list says of a package.
type pkg struct {
	ImportPath string
	Imports    []string // direct imports
	Deps       []string // every package it depends on, transitively
	Error      *listError
	DepsErrors []*listError
}

// listError is an error go list found, as an import cycle.
type listError struct {
	ImportStack []string
	Err         string
}

func (e *listError) String() string {
	if len(e.ImportStack) == 0 {
		return e.Err
	}
	return e.Err + ": " + strings.Join(e.ImportStack, " -> ")
}

// The rules, each a package of the module and what it must not import.
var (
	// noGVisor must not depend on gVisor, even through another package:
	// they are tested without it, the hot path's packages must not pull
	// in a network stack, and the vocabulary (a scenario, the hosts'
	// settings and counters, a run's summary) and what only reads or
	// serves it (the report, a sweep, the control API) need none.
	noGVisor = []string{"impair", "wifi", "topology", "hostnet", "netif",
		"hostcfg", "summary", "scenario", "control", "report", "sweep", "blueprint"}
	// gvisorOnlyThrough may depend on gVisor only through the packages
	// listed: every other package it imports is in noGVisor's sense free
	// of it. The command line runs runs, so its binary links gVisor, but
	// only as the emulator and the proxy (the emulator's Bench) bring it.
	gvisorOnlyThrough = map[string][]string{"cmd/netjam": {"emulator", "proxy"}}
	// notDirectly must not import these packages themselves, for the
	// reason given: the command line reaches devices and hosts through
	// the emulator's API; a sweep is given how to run one run.
	notDirectly = map[string]banned{
		"cmd/netjam": {[]string{"stack", "hostnet"}, "it goes through the emulator"},
		"sweep":      {[]string{"emulator", "stack", "hostnet"}, "the command line gives it how to run a run"},
	}
	// testOnly are imported by tests only: no package of the module's
	// binary may depend on them (a browser driver in netjam).
	testOnly = []string{module + "internal/browsertest", "github.com/chromedp/"}
	binary   = "cmd/netjam"
)

// banned is what a package must not import, and why.
type banned struct {
	pkgs []string
	why  string
}

// TestImportRules fails when a package of the module breaks an import
// rule, or when go list finds an import cycle (or any other error).
func TestImportRules(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list the packages with:", err)
	}
	cmd := exec.Command(goCmd, "list", "-e", "-json=ImportPath,Imports,Deps,Error,DepsErrors", module+"...")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs, err := decode(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range append(slices.Clone(noGVisor), binary, "emulator", "proxy") {
		if !slices.ContainsFunc(pkgs, func(p pkg) bool { return p.ImportPath == module+name }) {
			t.Errorf("go list does not list %s%s, which a rule names", module, name)
		}
	}
	for _, v := range violations(pkgs) {
		t.Error(v)
	}
}

// TestViolations checks the checker on packages that break each rule.
func TestViolations(t *testing.T) {
	pkgs := []pkg{
		{ImportPath: module + "impair", Deps: []string{"time", gvisor + "_pkg/buffer"}},
		{ImportPath: module + "topology", Deps: []string{module + "stack", gvisor + "_pkg/tcpip"}},
		{ImportPath: module + "wifi", Deps: []string{module + "impair", "time"}},
		{ImportPath: module + "cmd/netjam", Imports: []string{module + "control", module + "emulator", module + "hostnet", module + "proxy"}, Deps: []string{module + "stack", "github.com/chromedp/chromedp"}},
		{ImportPath: module + "sweep", Imports: []string{module + "scenario", module + "emulator"}},
		{ImportPath: module + "control", Imports: []string{module + "summary"}, Deps: []string{module + "summary", gvisor + "_pkg/tcpip"}},
		{ImportPath: module + "proxy", Deps: []string{gvisor + "_pkg/tcpip"}},
		{ImportPath: module + "report", Deps: []string{module + "summary"}},
		{ImportPath: module + "a", Error: &listError{[]string{"a", "b", "a"}, "import cycle not allowed"}},
		{ImportPath: module + "b", DepsErrors: []*listError{{nil, "import cycle not allowed"}}},
	}
	want := []string{
		module + "impair depends on " + gvisor + "_pkg/buffer (no gVisor in impair)",
		module + "topology depends on " + gvisor + "_pkg/tcpip (no gVisor in topology)",
		module + "cmd/netjam imports " + module + "control, which brings in gVisor (gVisor only through emulator, proxy)",
		module + "cmd/netjam imports " + module + "hostnet (it goes through the emulator)",
		module + "cmd/netjam depends on github.com/chromedp/chromedp (tests only)",
		module + "sweep imports " + module + "emulator (the command line gives it how to run a run)",
		module + "control depends on " + gvisor + "_pkg/tcpip (no gVisor in control)",
		module + "a: import cycle not allowed: a -> b -> a",
		module + "b: import cycle not allowed",
	}
	if got := violations(pkgs); !slices.Equal(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// decode reads go list -json's stream of packages.
func decode(b []byte) ([]pkg, error) {
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(b)))
	for {
		var p pkg
		err := dec.Decode(&p)
		if errors.Is(err, io.EOF) {
			return pkgs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("go list's output: %w", err)
		}
		pkgs = append(pkgs, p)
	}
}

// gvisorDep returns a package of gVisor that p depends on, if any.
func gvisorDep(p pkg) (string, bool) {
	for _, d := range p.Deps {
		if strings.HasPrefix(d, gvisor) {
			return d, true
		}
	}
	return "", false
}

// gvisorElsewhere returns a violation for each package p imports,
// besides those of through, that is gVisor's or depends on it.
func gvisorElsewhere(p pkg, through []string, byPath map[string]pkg) []string {
	var out []string
	for _, imp := range p.Imports {
		if slices.Contains(through, strings.TrimPrefix(imp, module)) {
			continue
		}
		_, deps := gvisorDep(byPath[imp])
		if deps || strings.HasPrefix(imp, gvisor) {
			out = append(out, fmt.Sprintf("%s imports %s, which brings in gVisor (gVisor only through %s)", p.ImportPath, imp, strings.Join(through, ", ")))
		}
	}
	return out
}

// violations returns every broken rule of pkgs, in their order. An import
// cycle shows as an error of a package on it.
func violations(pkgs []pkg) []string {
	var out []string
	byPath := make(map[string]pkg, len(pkgs))
	for _, p := range pkgs {
		byPath[p.ImportPath] = p
	}
	for _, p := range pkgs {
		name := strings.TrimPrefix(p.ImportPath, module)
		if slices.Contains(noGVisor, name) {
			if d, ok := gvisorDep(p); ok {
				out = append(out, fmt.Sprintf("%s depends on %s (no gVisor in %s)", p.ImportPath, d, name))
			}
		}
		if through, ok := gvisorOnlyThrough[name]; ok {
			out = append(out, gvisorElsewhere(p, through, byPath)...)
		}
		rule := notDirectly[name]
		for _, b := range rule.pkgs {
			if slices.Contains(p.Imports, module+b) {
				out = append(out, fmt.Sprintf("%s imports %s%s (%s)", p.ImportPath, module, b, rule.why))
			}
		}
		if name == binary {
			for _, d := range p.Deps {
				if slices.ContainsFunc(testOnly, func(prefix string) bool { return strings.HasPrefix(d, prefix) }) {
					out = append(out, fmt.Sprintf("%s depends on %s (tests only)", p.ImportPath, d))
				}
			}
		}
		if p.Error != nil {
			out = append(out, p.ImportPath+": "+p.Error.String())
		}
		for _, e := range p.DepsErrors {
			out = append(out, p.ImportPath+": "+e.String())
		}
	}
	return out
}
