package outdir

import (
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// asUser runs f on a thread of its own whose file-system ids and groups
// are o's: what f makes is o's, and the kernel checks o's rights, ACLs
// included (from a file-system uid other than 0, Linux takes away the
// capabilities that override them). The thread never returns to Go's
// pool: its goroutine ends locked to it, and Go then ends the thread.
func asUser(o *Owner, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // not unlocked: see above
		if err := becomeUser(o); err != nil {
			errc <- err
			return
		}
		errc <- f()
	}()
	return <-errc
}

// mayWrite says why the calling thread may not make files in the folder
// root, or nil: asked of the folder's descriptor, not its path, which may
// name another folder by now. AT_EACCESS asks with the thread's own
// (file-system) ids rather than the process's real ones.
func mayWrite(root *os.Root) error {
	f, err := root.Open(".")
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Faccessat2(int(f.Fd()), "", unix.W_OK|unix.X_OK, unix.AT_EACCESS|unix.AT_EMPTY_PATH)
}

// becomeUser gives the calling thread o's groups and file-system ids.
// These system calls act on the calling thread alone (Go's syscall.Setuid
// and syscall.Setgroups change every thread of the process).
func becomeUser(o *Owner) error {
	if err := unix.Setgroups(o.Groups); err != nil {
		return fmt.Errorf("taking the groups of uid %d: %w", o.UID, err)
	}
	unix.Setfsgid(o.GID)
	unix.Setfsuid(o.UID)
	// setfsuid and setfsgid report no failure: ask what the ids are now
	// (-1 changes nothing).
	gid, _ := unix.SetfsgidRetGid(-1)
	uid, _ := unix.SetfsuidRetUid(-1)
	if uid != o.UID || gid != o.GID {
		return fmt.Errorf("taking the file-system ids %d:%d: got %d:%d (netjam needs root for them)", o.UID, o.GID, uid, gid)
	}
	return nil
}

// fileOwner returns the owner of fi and its count of hard links.
func fileOwner(fi fs.FileInfo) (uid int, nlink uint64, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return int(st.Uid), uint64(st.Nlink), true
}
