//go:build linux

package control

import (
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A control socket is made where nobody else can reach it and moved
// whole into place, so that no one ever sees it with another mode or
// owner, and nothing done to it afterwards goes by a path that someone
// else could have swapped:
//
//  1. the folder the socket goes in is opened, and held: every later step
//     (the move, the removal at Close) works relative to it, wherever its
//     path points by then;
//  2. what is at the socket's path is looked at: a socket a live process
//     answers on is refused (another run's), a stale one (nobody
//     listening: a run that was killed) is removed, anything else is
//     refused;
//  3. a private folder (mode 0700, netjam's own) is made beside it, and
//     the socket bound inside it (through /proc/self/fd, which also keeps
//     the bound path short), then set to mode 0600 and, for a shell
//     under sudo, handed to the invoking user: no one but netjam can
//     reach the socket or swap it for a symbolic link in between, and
//     the umask plays no part;
//  4. the socket is renamed into place without replacing anything
//     (RENAME_NOREPLACE: a run that took the path in the meantime wins),
//     and the private folder removed.
//
// This is why a run under sudo no longer changes the owner of a path
// after the fact: a socket swapped for a link to /etc/shadow gave that
// file to the user.

// Owner is a user and group a unix socket is handed to: the invoking user
// of a shell run under sudo, whose command uses the socket.
type Owner struct{ UID, GID int }

// maxSocketPath is the longest path a unix socket can be reached at
// (sun_path's 108 bytes, with the terminating NUL).
const maxSocketPath = 107

// socketListener is a control socket's listener: Close removes the socket
// from the folder it was made in, if it is still this socket.
type socketListener struct {
	*net.UnixListener
	path     string   // the socket's path, as given
	dir      *os.File // the folder it is in, held open
	name     string   // its name in dir
	dev, ino uint64   // its inode
	once     sync.Once
}

// Addr is the socket's path, as clients reach it.
func (l *socketListener) Addr() net.Addr { return &net.UnixAddr{Name: l.path, Net: "unix"} }

// Close stops listening and removes the socket, unless what is at its
// name now is something else (then it is not netjam's to remove).
func (l *socketListener) Close() error {
	err := l.UnixListener.Close()
	l.once.Do(func() {
		dfd := int(l.dir.Fd())
		var st unix.Stat_t
		if unix.Fstatat(dfd, l.name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Dev == l.dev && st.Ino == l.ino {
			unix.Unlinkat(dfd, l.name, 0)
		}
		l.dir.Close()
	})
	return err
}

// listenUnix makes the control socket at path (see the top of this
// file), owned by owner when not nil.
func listenUnix(path string, owner *Owner) (net.Listener, error) {
	dirPath, name := filepath.Split(path)
	switch {
	case name == "" || name == "." || name == "..":
		return nil, errors.New("needs a file name for the socket (unix:PATH)")
	case len(path) > maxSocketPath:
		return nil, fmt.Errorf("a unix socket's path is at most %d bytes, this one has %d: give a shorter one", maxSocketPath, len(path))
	}
	if dirPath == "" {
		dirPath = "."
	}
	dir, err := os.Open(dirPath)
	if err != nil {
		return nil, err
	}
	if fi, err := dir.Stat(); err != nil || !fi.IsDir() {
		dir.Close()
		return nil, fmt.Errorf("%s is not a folder", dirPath)
	}
	l, err := placeSocket(dir, path, name, owner)
	if err != nil {
		dir.Close()
		return nil, err
	}
	return l, nil
}

// placeSocket makes the socket name in dir (path is how it is reached).
func placeSocket(dir *os.File, path, name string, owner *Owner) (*socketListener, error) {
	dfd := int(dir.Fd())
	if err := clearSocketPath(dfd, path, name); err != nil {
		return nil, err
	}
	priv, pfd, err := privateFolder(dfd)
	if err != nil {
		return nil, err
	}
	defer func() {
		unix.Close(pfd)
		unix.Unlinkat(dfd, priv, unix.AT_REMOVEDIR)
	}()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: fmt.Sprintf("/proc/self/fd/%d/s", pfd), Net: "unix"})
	if err != nil {
		return nil, err
	}
	// The socket is removed by name in its folder (Close), not by the
	// path it was bound at, which names another file once pfd is closed.
	ln.SetUnlinkOnClose(false)
	fail := func(err error) (*socketListener, error) {
		ln.Close()
		unix.Unlinkat(pfd, "s", 0)
		return nil, err
	}
	if err := unix.Fchmodat(pfd, "s", 0o600, 0); err != nil {
		return fail(fmt.Errorf("chmod: %w", err))
	}
	if owner != nil {
		if err := unix.Fchownat(pfd, "s", owner.UID, owner.GID, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fail(fmt.Errorf("handing the socket to user %d: %w", owner.UID, err))
		}
	}
	var st unix.Stat_t
	if err := unix.Fstatat(pfd, "s", &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fail(err)
	}
	err = unix.Renameat2(pfd, "s", dfd, name, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EEXIST) {
		// A socket appeared since clearSocketPath: another run's,
		// unless it is already stale.
		if err = clearSocketPath(dfd, path, name); err == nil {
			err = unix.Renameat2(pfd, "s", dfd, name, unix.RENAME_NOREPLACE)
		}
	}
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		// A file system without RENAME_NOREPLACE (NFS): the path was
		// clear a moment ago.
		err = unix.Renameat(pfd, "s", dfd, name)
	}
	if err != nil {
		return fail(err)
	}
	return &socketListener{UnixListener: ln, path: path, dir: dir, name: name, dev: st.Dev, ino: st.Ino}, nil
}

// privateFolder makes a folder only netjam may enter (mode 0700) in the
// folder dfd, and returns its name and a descriptor of it.
func privateFolder(dfd int) (string, int, error) {
	for range 10 {
		name := ".netjam-" + rand.Text()[:10]
		err := unix.Mkdirat(dfd, name, 0o700)
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		if err != nil {
			return "", -1, fmt.Errorf("a private folder for the socket: %w", err)
		}
		pfd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			unix.Unlinkat(dfd, name, unix.AT_REMOVEDIR)
			return "", -1, err
		}
		return name, pfd, nil
	}
	return "", -1, errors.New("a private folder for the socket: no free name")
}

// clearSocketPath makes way for the socket at name in the folder dfd
// (path, as given): nothing there, or a stale socket, removed; a socket
// that a process answers on, or anything but a socket, is an error.
func clearSocketPath(dfd int, path, name string) error {
	var st unix.Stat_t
	err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil
	case err != nil:
		return err
	case st.Mode&unix.S_IFMT != unix.S_IFSOCK:
		return errors.New("the file exists and is not a socket")
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	switch {
	case err == nil:
		c.Close()
		return errors.New("a running netjam (or another program) answers on this socket: give another path, or end that run first")
	case errors.Is(err, syscall.ECONNREFUSED):
		// Nobody listens: a socket left by a run that was killed.
		if err := unix.Unlinkat(dfd, name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("removing the stale socket: %w", err)
		}
		return nil
	}
	return fmt.Errorf("a socket is there, and netjam cannot tell whether it is in use (%v): remove it, or give another path", err)
}
