//go:build linux

package main

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/netjam/netjam/internal/testenv"
)

// swapWhenItAppears swaps the file name in dir, as soon as it appears
// (inotify), for a symbolic link to target, as a user who owns dir
// could; it returns a function that stops watching and reports whether
// it swapped.
func swapWhenItAppears(t *testing.T, dir, name, target string) func() bool {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.Skipf("inotify: %v", err)
	}
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_CREATE|unix.IN_MOVED_TO); err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	stop := make(chan struct{})
	swapped := make(chan bool, 1)
	go func() {
		defer unix.Close(fd)
		buf := make([]byte, 4096)
		for {
			select {
			case <-stop:
				swapped <- false
				return
			default:
			}
			unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 100)
			n, _ := unix.Read(fd, buf)
			for off := 0; off+unix.SizeofInotifyEvent <= n; {
				ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
				got := string(bytes.TrimRight(buf[off+unix.SizeofInotifyEvent:off+unix.SizeofInotifyEvent+int(ev.Len)], "\x00"))
				off += unix.SizeofInotifyEvent + int(ev.Len)
				if got != name {
					continue
				}
				tmp := filepath.Join(dir, ".swap")
				os.Symlink(target, tmp)
				os.Rename(tmp, filepath.Join(dir, name))
				swapped <- true
				return
			}
		}
	}()
	return func() bool {
		close(stop)
		return <-swapped
	}
}

// TestShellSocketSwapped: under sudo, netjam shell hands its control
// socket to the invoking user without changing the owner of anything by
// its path: a symbolic link to a root file (/etc/shadow, here a file of
// the test's) swapped in for the socket the moment it appears, as the
// user who owns the socket's folder could, leaves the file root's and
// whole. Before, the shell chowned the socket's path just before it
// started the command, and gave the file to the user.
func TestShellSocketSwapped(t *testing.T) {
	testenv.RequireTUN(t)
	dir := t.TempDir()
	shadow := filepath.Join(t.TempDir(), "shadow")
	if err := os.WriteFile(shadow, []byte("root:secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	done := swapWhenItAppears(t, dir, "c.sock", shadow)
	cmd := netjamProcess(t, "shell", "-q", "--control", "unix:"+filepath.Join(dir, "c.sock"), "--", "true")
	cmd.Env = append(cmd.Env, "SUDO_UID=65534", "SUDO_GID=65534", "SUDO_USER=nobody")
	cmd.Dir = "/"
	out, err := cmd.CombinedOutput()
	if !done() {
		t.Fatalf("the socket never appeared: %v\n%s", err, out)
	}
	fi, serr := os.Stat(shadow)
	if st := fi.Sys().(*syscall.Stat_t); serr != nil || st.Uid != 0 || st.Gid != 0 || fi.Mode().Perm() != 0o600 {
		t.Errorf("the file a link swapped in for the socket led to: %v, owner %d:%d, mode %v; want root's, 0600 (the shell: %v\n%s)", serr, st.Uid, st.Gid, fi.Mode(), err, out)
	}
	if b, _ := os.ReadFile(shadow); string(b) != "root:secret" {
		t.Errorf("the file a link led to holds %q", b)
	}
}

// TestShellTCPControlToken: netjam shell --control HOST:PORT without
// --control-token makes a token: it prints the dashboard's URL with it,
// the API refuses a request without it, and the command finds it in
// $NETJAM_CONTROL_TOKEN, beside $NETJAM_CONTROL.
func TestShellTCPControlToken(t *testing.T) {
	testenv.RequireTUN(t)
	cmd := netjamProcess(t, "shell", "-q", "--control", "127.0.0.1:0", "--", "sh", "-c",
		`test -n "$NETJAM_CONTROL_TOKEN" && echo token; echo "$NETJAM_CONTROL" | grep -q '^127.0.0.1:[1-9]' && echo addr; sleep 3`)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	sc := bufio.NewScanner(stderr)
	dashboard := ""
	for dashboard == "" && sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), "netjam: dashboard at "); ok {
			dashboard = u
		}
	}
	go io.Copy(io.Discard, stderr)
	base, token, ok := strings.Cut(dashboard, "/?token=")
	if !ok || !strings.HasPrefix(base, "http://127.0.0.1:") {
		t.Fatalf("no dashboard URL with a token printed: %q", dashboard)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	status := func(auth string) int {
		req, _ := http.NewRequest("GET", base+"/v1/status", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := status(""); code != 401 {
		t.Errorf("GET /v1/status without the token: %d, want 401", code)
	}
	// The endpoint is up before the path is: 409 (no run in progress)
	// until the run starts, which a loaded machine delays.
	code := status("Bearer " + token)
	for deadline := time.Now().Add(10 * time.Second); code == 409 && time.Now().Before(deadline); code = status("Bearer " + token) {
		time.Sleep(50 * time.Millisecond)
	}
	if code != 200 {
		t.Errorf("GET /v1/status with the token: %d, want 200", code)
	}
	if err := cmd.Wait(); err != nil || out.String() != "token\naddr\n" {
		t.Errorf("the command: %v, %q", err, out.String())
	}
}

// selfSigned writes a self-signed certificate for 127.0.0.1, and its key,
// into dir, and returns their paths.
func selfSigned(t *testing.T, dir string) (cert, key string) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "netjam test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), 0o600)
	return cert, key
}

// TestControlTLS: with --control-tls-cert and --control-tls-key the TCP
// control endpoint and --metrics serve HTTPS (and nothing else), and say
// so (https://); netjam ctl reaches it at https://HOST:PORT, trusting the
// certificate through $SSL_CERT_FILE. One of the two flags alone is a
// usage error.
func TestControlTLS(t *testing.T) {
	dir := t.TempDir()
	cert, key := selfSigned(t, dir)
	if code, _, stderr := netjam(t, "run", "-q", "--control", "127.0.0.1:0", "--control-tls-cert", cert, "--duration", "1s", "--out", filepath.Join(dir, "x")); code != exitBadUsage || !strings.Contains(stderr, "give both") {
		t.Errorf("--control-tls-cert alone: exit %d, %s", code, stderr)
	}
	out, file := filepath.Join(dir, "out"), filepath.Join(dir, "tls.yaml")
	os.WriteFile(file, []byte("name: tls\nduration: 3s\nflows: [{name: u, type: udp, rate: 1Mbps, duration: 3s}]\n"), 0o644)
	run := netjamProcess(t, "run", file, "-q", "--control", "127.0.0.1:0", "--metrics", "127.0.0.1:0", "--control-tls-cert", cert, "--control-tls-key", key, "--out", out)
	stderr, err := run.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	defer run.Process.Kill()
	sc := bufio.NewScanner(stderr)
	var api, metrics string
	for (api == "" || metrics == "") && sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), "netjam: control API at "); ok {
			api, _, _ = strings.Cut(u, " ")
		}
		if u, ok := strings.CutPrefix(sc.Text(), "netjam: metrics at "); ok {
			metrics = u
		}
	}
	go io.Copy(io.Discard, stderr)
	if !strings.HasPrefix(api, "https://127.0.0.1:") || !strings.HasPrefix(metrics, "https://127.0.0.1:") {
		t.Fatalf("the endpoints: %q, %q; want https://", api, metrics)
	}
	if resp, err := http.Get("http://" + strings.TrimPrefix(api, "https://") + "/v1/status"); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("plain HTTP to the TLS endpoint: %d", resp.StatusCode)
		}
	}
	ctl := netjamProcess(t, "ctl", "--control", api, "--control-token", filepath.Join(out, "control.token"), "get")
	ctl.Env = append(ctl.Env, "SSL_CERT_FILE="+cert)
	if b, err := ctl.CombinedOutput(); err != nil && !strings.Contains(string(b), "no run in progress") {
		t.Errorf("ctl over TLS: %v\n%s", err, b)
	}
	ctl = netjamProcess(t, "ctl", "--control", api, "--control-token", filepath.Join(out, "control.token"), "get")
	if b, err := ctl.CombinedOutput(); err == nil || !strings.Contains(string(b), "certificate") {
		t.Errorf("ctl over TLS, the certificate not trusted: %v\n%s", err, b)
	}
	pool := x509.NewCertPool()
	b, _ := os.ReadFile(cert)
	pool.AppendCertsFromPEM(b)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer client.CloseIdleConnections()
	if resp, err := client.Get(metrics); err != nil {
		t.Errorf("the metrics over TLS: %v", err)
	} else if resp.Body.Close(); resp.StatusCode != 200 {
		t.Errorf("the metrics over TLS: %d", resp.StatusCode)
	}
	if err := run.Wait(); err != nil {
		t.Errorf("the run: %v", err)
	}
}
