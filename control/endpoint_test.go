package control

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netjam/netjam/outdir"
)

// TestReadToken: a token file's token, trimmed; a file too long for one
// refused after reading no more than the bound.
func TestReadToken(t *testing.T) {
	dir := t.TempDir()
	ok, big := filepath.Join(dir, "ok"), filepath.Join(dir, "big")
	os.WriteFile(ok, []byte("  abc\n"), 0o600)
	os.WriteFile(big, []byte(strings.Repeat("x", maxTokenFile+1)), 0o600)
	if got, err := ReadToken(ok); got != "abc" || err != nil {
		t.Errorf("got %q, %v", got, err)
	}
	if _, err := ReadToken(big); err == nil || err.Error() != big+" is more than 4096 bytes: a token file holds one token" {
		t.Errorf("a file too big: %v", err)
	}
	if _, err := ReadToken(filepath.Join(dir, "none")); err == nil {
		t.Error("a missing file: no error")
	}
}

// TestOpenAPI: a TCP endpoint given no token gets one, which its dashboard's
// URL carries; one given a token keeps it; TLS and a token are asked for
// together.
func TestOpenAPI(t *testing.T) {
	s, err := openAPI("127.0.0.1:0", Endpoint{}, nil, func() {})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !s.Made || s.Token == "" || s.Dashboard() != s.URL()+"/?token="+s.Token || s.Where() != s.Addr() {
		t.Errorf("made %v, token %q, dashboard %s, where %s", s.Made, s.Token, s.Dashboard(), s.Where())
	}
	given, err := openAPI("127.0.0.1:0", Endpoint{Token: "t"}, nil, func() {})
	if err != nil {
		t.Fatal(err)
	}
	defer given.Close()
	if given.Made || given.Token != "t" || given.Dashboard() != given.URL()+"/" {
		t.Errorf("a token given: made %v, token %q, dashboard %s", given.Made, given.Token, given.Dashboard())
	}
	if _, err := loadTLS("cert.pem", ""); err == nil || !strings.Contains(err.Error(), "give both") {
		t.Errorf("a certificate without its key: %v", err)
	}
	if w := plainWarning("--control", "192.0.2.1:80", Endpoint{Token: "t"}); !strings.Contains(w, "serves plain HTTP") {
		t.Errorf("no warning for a token in clear: %q", w)
	}
	if w := plainWarning("--control", "127.0.0.1:80", Endpoint{Token: "t"}); w != "" {
		t.Errorf("a warning for loopback: %q", w)
	}
}

// TestStart: what a run's flags ask for is served and said: the API with
// the token made in the output folder, the dashboard with --ui, the
// metrics; a shell (Quiet) says nothing of a unix socket; --ui refuses a
// unix socket.
func TestStart(t *testing.T) {
	dir, err := outdir.Make(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	var said strings.Builder
	srv, api, end, err := Start(Options{API: "127.0.0.1:0", UI: true, Metrics: "127.0.0.1:0", Stop: func() {}, Say: &said, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	token, _ := ReadToken(dir.Join(TokenFile))
	want := "netjam: control API at " + api.Addr() + " (its token in " + dir.Join(TokenFile) + ")\nnetjam: dashboard at " + api.Dashboard() + "\nnetjam: metrics at http://"
	if !api.Made || token != api.Token || !strings.HasPrefix(said.String(), want) {
		t.Errorf("said %q, want it to start %q; token file %q", said.String(), want, token)
	}
	srv.Close()
	end()
	if _, err := dir.Stat(TokenFile); err == nil {
		t.Error("the token's file outlives the run")
	}
	said.Reset()
	sock := "unix:" + filepath.Join(t.TempDir(), "c.sock")
	srv, _, end, err = Start(Options{API: sock, Quiet: true, Stop: func() {}, Say: &said})
	if err != nil || said.Len() > 0 {
		t.Errorf("a shell's socket: %v, said %q", err, said.String())
	}
	srv.Close()
	end()
	if _, _, _, err := Start(Options{API: sock, UI: true, Stop: func() {}, Say: &said}); err == nil || !strings.HasPrefix(err.Error(), "--ui: a browser reaches a TCP address only") {
		t.Errorf("--ui on a unix socket: %v", err)
	}
}

// TestShellSocket: a shell's bare --control is a socket named for the
// process, in its output folder or else the temporary folder.
func TestShellSocket(t *testing.T) {
	name := fmt.Sprintf("netjam-%d.sock", os.Getpid())
	if got := ShellSocket("/out"); got != "unix:/out/"+name {
		t.Errorf("with --out: %s", got)
	}
	if got := ShellSocket(""); got != "unix:"+filepath.Join(os.TempDir(), name) {
		t.Errorf("without: %s", got)
	}
}
