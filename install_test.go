//go:build !race

// The race detector adds nothing to a test of the go command, which
// builds netjam from nothing in a module cache of its own: the first pass
// of the README's test command runs it (its name holds "Install"), the
// race pass leaves it out.

package netjam_test

import (
	"archive/tar"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

// TestGoInstall packs this checkout's committed tree as the go command
// fetches a module (a module zip, served from a file:// proxy), installs
// cmd/netjam from it with `go install github.com/netjam/netjam/cmd/netjam@VERSION`
// into an empty GOPATH and module cache, as a user of a published release
// would, and runs the installed binary on the default scenario. The go
// command refuses a module with a replace directive there, and builds it
// from its zip alone: a package netjam needs that is left out of the zip
// fails here.
//
// Every other module comes from the module cache the tests run with (as a
// proxy, so nothing is fetched that is already here), then from GOPROXY.
func TestGoInstall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds netjam from nothing: not with -short")
	}
	goTool := goCommand(t)
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skipf("packs the committed tree with git: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, ".git")); err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	version := pseudoVersion(t, root)
	const path = "github.com/netjam/netjam"
	m := module.Version{Path: path, Version: version}

	tmp := t.TempDir()
	proxy := filepath.Join(tmp, "proxy")
	dir := filepath.Join(proxy, path, "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	zf, err := os.Create(filepath.Join(dir, version+".zip"))
	if err != nil {
		t.Fatal(err)
	}
	if err := zip.CreateFromDir(zf, m, committedTree(t, root, filepath.Join(tmp, "src"))); err != nil {
		zf.Close()
		t.Fatalf("packing the module: %v", err)
	}
	if err := zf.Close(); err != nil {
		t.Fatal(err)
	}
	gomod, err := exec.Command("git", "-C", root, "show", "HEAD:go.mod").Output()
	if err != nil {
		t.Fatal(err)
	}
	info, _ := json.Marshal(map[string]string{"Version": version, "Time": time.Now().UTC().Format(time.RFC3339)})
	for name, data := range map[string][]byte{"list": []byte(version + "\n"), version + ".mod": gomod, version + ".info": info} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	env := func(name string) string {
		out, err := exec.Command(goTool, "env", name).Output()
		if err != nil {
			t.Fatalf("go env %s: %v", name, err)
		}
		return strings.TrimSpace(string(out))
	}
	proxies := []string{"file://" + filepath.ToSlash(proxy), "file://" + filepath.ToSlash(filepath.Join(env("GOMODCACHE"), "cache", "download"))}
	if p := env("GOPROXY"); p != "" && p != "off" {
		proxies = append(proxies, p)
	}
	gopath := filepath.Join(tmp, "gopath")
	bin := filepath.Join(tmp, "bin")
	cmd := exec.Command(goTool, "install", "-trimpath", path+"/cmd/netjam@"+version)
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(),
		"GOPATH="+gopath, "GOMODCACHE="+filepath.Join(gopath, "pkg", "mod"), "GOBIN="+bin,
		"GOPROXY="+strings.Join(proxies, ","),
		"GONOSUMDB="+path, "GOFLAGS=-modcacherw", "GOWORK=off", "GOTOOLCHAIN=local")
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go install %s/cmd/netjam@%s: %v\n%s", path, version, err, out)
	}
	t.Logf("go install from the module zip: %v", time.Since(start).Round(time.Second))

	// The installed binary, outside the checkout, on the embedded default
	// scenario; the virtual clock keeps it short.
	out := filepath.Join(tmp, "out")
	run := exec.Command(filepath.Join(bin, "netjam"), "run", "--clock", "virtual", "--seed", "1", "-q", "--out", out)
	run.Dir = tmp
	if b, err := run.CombinedOutput(); err != nil {
		t.Fatalf("the installed netjam run: %v\n%s", err, b)
	}
	if _, err := os.Stat(filepath.Join(out, "summary.json")); err != nil {
		t.Errorf("the installed netjam wrote no summary: %v", err)
	}
}

// committedTree writes HEAD's tree of the checkout at root into dir, as
// the module's source is a commit's tree (not what the work tree holds
// beside it), and returns dir.
func committedTree(t *testing.T, root, dir string) string {
	t.Helper()
	archive := exec.Command("git", "-C", root, "archive", "--format=tar", "HEAD")
	stdout, err := archive.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := archive.Start(); err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(stdout)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("git archive: %v", err)
		}
		name := filepath.Join(dir, filepath.FromSlash(h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(name, 0o755)
		case tar.TypeReg:
			var data []byte
			if data, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(name, data, 0o644)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := archive.Wait(); err != nil {
		t.Fatalf("git archive: %v", err)
	}
	return dir
}

// pseudoVersion names HEAD as the go command names an untagged commit:
// v0.0.0-YYYYMMDDHHMMSS-abcdefabcdef, from the commit's time and hash.
func pseudoVersion(t *testing.T, root string) string {
	t.Helper()
	out, err := exec.Command("git", "-C", root, "log", "-1", "--format=%ct %H", "HEAD").Output()
	if err != nil {
		t.Fatalf("git log: %v", err)
	}
	f := strings.Fields(string(out))
	if len(f) != 2 || len(f[1]) < 12 {
		t.Fatalf("git log printed %q", out)
	}
	var sec int64
	if err := json.Unmarshal([]byte(f[0]), &sec); err != nil {
		t.Fatal(err)
	}
	return module.PseudoVersion("", "", time.Unix(sec, 0), f[1][:12])
}
