package hostnet

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Netns is a Linux network namespace that netjam opens sockets and starts
// processes in: the namespace of a TUN device (kernel flows must send from
// where the device's routes are) or the fresh namespace of a shell.
//
// A namespace is entered only on a thread of its own that is thrown away
// afterwards (Do), so no other goroutine ever runs in it by accident. A nil
// *Netns is the caller's own namespace.
type Netns struct {
	h    netns.NsHandle
	path string
}

// NewNetns makes a fresh network namespace with its loopback device up and
// nothing else: no device, no route. It is anonymous (no file under
// /var/run/netns): the kernel frees it once it is closed and the last
// process in it has ended, so a crash cannot leave it behind. Making one
// needs CAP_SYS_ADMIN; the error then wraps ErrPrivilege.
func NewNetns() (*Netns, error) {
	var h netns.NsHandle
	var err error
	onThread(func() {
		if h, err = netns.New(); err != nil {
			return
		}
		var lo netlink.Link
		if lo, err = netlink.LinkByName("lo"); err == nil {
			err = netlink.LinkSetUp(lo)
		}
	})
	if err != nil {
		if h.IsOpen() {
			h.Close()
		}
		if errors.Is(err, os.ErrPermission) {
			return nil, &PrivilegeError{Op: "making a network namespace", Err: err, Need: "CAP_SYS_ADMIN",
				Fixes: []string{"run netjam as root: sudo " + exeName() + " ...",
					"or in a user namespace where you are root: unshare --user --map-root-user --net " + exeName() + " ..."}}
		}
		return nil, fmt.Errorf("making a network namespace: %w", err)
	}
	return &Netns{h: h, path: fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), int(h))}, nil
}

// OpenNetns opens the existing namespace at path (/var/run/netns/NAME,
// /proc/PID/ns/net).
func OpenNetns(path string) (*Netns, error) {
	h, err := netns.GetFromPath(path)
	if err != nil {
		return nil, fmt.Errorf("network namespace %s: %w", path, err)
	}
	return &Netns{h: h, path: path}, nil
}

// Path names the namespace for TUNConfig.Netns and for other processes
// (nsenter --net=PATH); "" for a nil Netns.
func (n *Netns) Path() string {
	if n == nil {
		return ""
	}
	return n.path
}

// Do runs f in the namespace: sockets f opens live in it for good, and
// processes f starts run in it. f runs on a goroutine locked to a thread
// that is discarded when f returns. For a nil Netns, f runs in the
// caller's namespace.
func (n *Netns) Do(f func() error) error {
	if n == nil {
		return f()
	}
	var err error
	onThread(func() {
		if err = netns.Set(n.h); err != nil {
			err = fmt.Errorf("entering network namespace %s: %w", n.path, err)
			return
		}
		err = f()
	})
	return err
}

// Close releases netjam's handle on the namespace; a namespace of NewNetns
// goes away when nothing else holds it. Idempotent; nil-safe.
func (n *Netns) Close() error {
	if n == nil || !n.h.IsOpen() {
		return nil
	}
	err := n.h.Close()
	n.h = netns.None()
	return err
}

// onThread runs f on a goroutine locked to a thread of its own, which ends
// with the goroutine (it exits still locked), so whatever f does to the
// thread's namespace never reaches another goroutine.
//
// That thread must not be the process's main thread: Go does not end the
// main thread when a goroutine locked to it exits, it parks it, and the
// main thread's namespaces are the process's own (/proc/PID/ns/net, what
// nsenter --target PID and every child started from it would see). Any
// goroutine can run on the main thread (with one P it is the usual case),
// so when the new goroutine finds itself there it keeps the main thread
// locked while f runs on another goroutine, which then cannot be placed
// there, and lets it go unchanged.
func onThread(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			onThread(f)
			runtime.UnlockOSThread()
			return
		}
		f()
	}()
	<-done
}

// Start starts cmd in the namespace, as Do(cmd.Start) does; with etc
// (a folder: "" for none), in a mount namespace of its own where each
// file of etc is bind-mounted over the file of its name in /etc (hosts,
// resolv.conf), as `ip netns exec` does with /etc/netns/NAME. A file
// whose namesake /etc does not have is left out. The mount namespace is
// made on the discarded thread, every mount in it a slave of the host's
// (what the host mounts later reaches it; nothing mounted in it reaches
// the host), so the files are seen by cmd and its children only. Making
// it needs CAP_SYS_ADMIN in the namespace's owning user namespace.
func (n *Netns) Start(cmd *exec.Cmd, etc string) error {
	if etc == "" {
		return n.Do(cmd.Start)
	}
	files, err := os.ReadDir(etc)
	if err != nil {
		return fmt.Errorf("files for the command's /etc: %w", err)
	}
	onThread(func() {
		if err = privateEtc(etc, files); err != nil {
			return
		}
		if n != nil {
			if err = netns.Set(n.h); err != nil {
				err = fmt.Errorf("entering network namespace %s: %w", n.path, err)
				return
			}
		}
		err = cmd.Start()
	})
	return err
}

// privateEtc moves the calling thread into a new mount namespace where
// each regular file of dir (files) is mounted over its namesake in /etc.
func privateEtc(dir string, files []os.DirEntry) error {
	// A thread shares its file system attributes with the process's
	// other threads; unsharing the mount namespace unshares them too,
	// for this thread alone.
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("the command's /etc: making a mount namespace: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("the command's /etc: making the mounts private: %w", err)
	}
	for _, f := range files {
		if !f.Type().IsRegular() {
			continue
		}
		target := filepath.Join("/etc", f.Name())
		err := unix.Mount(filepath.Join(dir, f.Name()), target, "", unix.MS_BIND, "")
		if errors.Is(err, unix.ENOENT) {
			continue // /etc has no such file (or it is a dangling link)
		}
		if err != nil {
			return fmt.Errorf("the command's /etc: mounting over %s: %w", target, err)
		}
	}
	return nil
}
