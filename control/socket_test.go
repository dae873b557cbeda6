//go:build linux

package control

import (
	"bytes"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// dirEvents watches dir with inotify, and returns a function that gives,
// for each name, the events seen since (IN_CREATE, IN_ATTRIB,
// IN_MOVED_TO).
func dirEvents(t *testing.T, dir string) func() map[string][]uint32 {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.Skipf("inotify: %v", err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_CREATE|unix.IN_ATTRIB|unix.IN_MOVED_TO); err != nil {
		t.Fatal(err)
	}
	return func() map[string][]uint32 {
		seen := map[string][]uint32{}
		buf := make([]byte, 64<<10)
		n, err := unix.Read(fd, buf)
		if err != nil && err != unix.EAGAIN {
			t.Fatal(err)
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := string(bytes.TrimRight(buf[off+unix.SizeofInotifyEvent:off+unix.SizeofInotifyEvent+int(ev.Len)], "\x00"))
			seen[name] = append(seen[name], ev.Mask&(unix.IN_CREATE|unix.IN_ATTRIB|unix.IN_MOVED_TO))
			off += unix.SizeofInotifyEvent + int(ev.Len)
		}
		return seen
	}
}

// TestSocketModeFromTheStart: the control socket appears at its path
// whole, mode 0600, even under umask 0: it is moved there (IN_MOVED_TO),
// never created there and changed after (IN_CREATE, then IN_ATTRIB for
// the chmod: before, for a moment under umask 0, anyone could connect).
// No private folder is left beside it, and Close removes it.
func TestSocketModeFromTheStart(t *testing.T) {
	dir := t.TempDir()
	events := dirEvents(t, dir)
	old := syscall.Umask(0)
	ln, err := Listen("unix:"+filepath.Join(dir, "c.sock"), ListenOptions{})
	syscall.Umask(old)
	if err != nil {
		t.Fatal(err)
	}
	seen := events()["c.sock"]
	if len(seen) != 1 || seen[0] != unix.IN_MOVED_TO {
		t.Errorf("events at c.sock: %#x, want one IN_MOVED_TO (%#x): never created there with another mode", seen, unix.IN_MOVED_TO)
	}
	fi, err := os.Lstat(filepath.Join(dir, "c.sock"))
	if err != nil || fi.Mode() != os.ModeSocket|0o600 {
		t.Errorf("the socket under umask 0: %v %v, want a socket of mode 0600", fi.Mode(), err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("the folder holds %v, want the socket alone", ents)
	}
	if got := ln.Addr().String(); got != filepath.Join(dir, "c.sock") {
		t.Errorf("Addr: %q", got)
	}
	s := Serve(ln, Endpoint{}, func() {})
	if code := unixStatus(t, filepath.Join(dir, "c.sock")); code != http.StatusConflict {
		t.Errorf("GET /v1/status on the socket: %d", code)
	}
	s.Close()
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("after Close the folder holds %v", ents)
	}
}

// unixStatus is the status of GET /v1/status on the socket at path.
func unixStatus(t *testing.T, path string) int {
	t.Helper()
	client := unixClient(path)
	defer client.CloseIdleConnections()
	resp, err := client.Get("http://netjam/v1/status")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestSocketInUse: a second run given the socket a live run answers on is
// refused, saying so, and the first goes on answering (before, the second
// silently took the path over); a stale socket (nobody listening: a run
// that was killed) is replaced; a file that is not a socket, or a
// symbolic link, is refused and left as it is.
func TestSocketInUse(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.sock")
	ln, err := Listen("unix:"+path, ListenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := Serve(ln, Endpoint{}, func() {})
	defer s.Close()
	if _, err := Listen("unix:"+path, ListenOptions{}); err == nil || !strings.Contains(err.Error(), "--control unix:"+path+": a running netjam (or another program) answers on this socket") {
		t.Errorf("a second run on a live socket: %v", err)
	}
	if code := unixStatus(t, path); code != http.StatusConflict {
		t.Errorf("the first run after the second tried: %d", code)
	}

	stale := filepath.Join(dir, "stale.sock")
	sl, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	sl.SetUnlinkOnClose(false)
	sl.Close()
	ln2, err := Listen("unix:"+stale, ListenOptions{})
	if err != nil {
		t.Fatalf("a stale socket: %v", err)
	}
	s2 := Serve(ln2, Endpoint{}, func() {})
	defer s2.Close()
	if code := unixStatus(t, stale); code != http.StatusConflict {
		t.Errorf("on a stale socket's path: %d", code)
	}

	target := filepath.Join(dir, "target")
	os.WriteFile(target, []byte("keep"), 0o644)
	os.Symlink(target, filepath.Join(dir, "link.sock"))
	for _, name := range []string{"target", "link.sock"} {
		if _, err := Listen("unix:"+filepath.Join(dir, name), ListenOptions{}); err == nil || !strings.Contains(err.Error(), "the file exists and is not a socket") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "link.sock")); err != nil || string(b) != "keep" {
		t.Errorf("the link and its target after the refusals: %q %v", b, err)
	}
	long := "unix:/tmp/" + strings.Repeat("x", 120)
	if _, err := Listen(long, ListenOptions{}); err == nil || !strings.Contains(err.Error(), "at most 107 bytes") {
		t.Errorf("a path too long: %v", err)
	}
}

// TestSocketOwner: as root, a socket for another user (a shell's command
// under sudo) is theirs from the start, mode 0600; a symbolic link to a
// root file swapped in for it afterwards is not followed by anything
// netjam does: the file keeps its owner and content, and Close leaves
// what is not its socket.
func TestSocketOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to hand a socket to another user")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "c.sock")
	ln, err := Listen("unix:"+path, ListenOptions{Owner: &Owner{UID: 65534, GID: 65534}})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(path)
	if st, ok := fi.Sys().(*syscall.Stat_t); err != nil || !ok || st.Uid != 65534 || st.Gid != 65534 || fi.Mode() != os.ModeSocket|0o600 {
		t.Errorf("the socket: %v %v %+v, want nobody's, mode 0600", err, fi.Mode(), fi.Sys())
	}
	secret := filepath.Join(t.TempDir(), "shadow")
	os.WriteFile(secret, []byte("root's"), 0o600)
	os.Rename(path, filepath.Join(dir, "moved.sock"))
	os.Symlink(secret, path)
	s := Serve(ln, Endpoint{}, func() {})
	s.Close()
	fi, err = os.Stat(secret)
	if st := fi.Sys().(*syscall.Stat_t); err != nil || st.Uid != 0 {
		t.Errorf("the file a link swapped in led to: owner %d %v, want root's", st.Uid, err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "root's" {
		t.Errorf("after Close, the link swapped in: %q %v, want it left", b, err)
	}
}
