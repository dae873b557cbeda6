// Package outdir is the one place netjam writes a run's results: an
// output folder opened once, and files made in it without following
// symbolic links.
//
// netjam may write as root into a folder that someone else can change
// while it does: under sudo the folder is the invoking user's, and the
// command of netjam shell, running as that user, can replace the folder's
// entries (or the folder itself) with links to root's files while the run
// goes on. So:
//
//   - The folder is opened once, as an os.Root, before anything else runs;
//     every file is named relative to it, and nothing reaches outside it,
//     whatever the folder's path names later.
//   - A file is never opened for writing while it exists: it is made new
//     with O_CREATE|O_EXCL (after removing whatever had its name: a link
//     is removed, never followed), or written whole under a temporary name
//     and renamed over the name. An existing entry might be a hard link to
//     another's file, or a FIFO whose open would block forever.
//   - A file is read (or appended to) only when it is a regular file
//     reached without a link; for another user, only when it is theirs or
//     netjam's and has no other hard link.
//   - With an Owner (netjam as root under sudo) the folder is made and
//     opened with that user's rights, so netjam writes only where the user
//     could, and the folders it makes are theirs; what netjam then makes
//     in the folder is given to them through its descriptor (fchown),
//     never by name.
package outdir

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// Permissions of what a Dir makes, before the umask.
const (
	filePerm    = 0o644
	dirPerm     = 0o755
	scratchPerm = 0o600
)

// MaxReadBytes bounds what ReadFile reads: a results file is far smaller,
// and a file grown (or made sparse) to fill memory is refused instead.
const MaxReadBytes = 256 << 20

// createTries bounds how often Create removes an entry that another
// process puts back under the name before the file is made.
const createTries = 3

// ErrNotOurs is the error for an existing entry that a Dir will not read
// or append to: a symbolic link, not a regular file, or (for an Owner)
// another user's file or one with other hard links.
var ErrNotOurs = errors.New("not a file netjam made")

// Owner is the user a Dir writes for: the user who ran netjam through
// sudo. Their rights decide where the folder may be, and what the Dir
// makes belongs to them.
type Owner struct {
	UID, GID int
	Groups   []int // supplementary groups, which may grant the folder's rights
}

// Dir is an open output folder. Its methods take a file's name within the
// folder, one path element (no "/"); Stat takes a local relative path. A
// Dir may be used from several goroutines.
type Dir struct {
	root  *os.Root
	path  string // the path it was opened by, for messages
	owner *Owner // nil: what it makes stays netjam's
}

// Make makes the folder path (with its missing parents) and opens it.
// With an owner, both happen with the owner's rights: the folders made
// are theirs, and a folder they may not write into, new or not, is
// refused (a permission error).
func Make(path string, owner *Owner) (*Dir, error) {
	return open(path, owner, true)
}

// Open opens the folder path, which must exist, as Make does.
func Open(path string, owner *Owner) (*Dir, error) {
	return open(path, owner, false)
}

func open(path string, owner *Owner, mkdir bool) (*Dir, error) {
	var root *os.Root
	do := func() error {
		if mkdir {
			if err := os.MkdirAll(path, dirPerm); err != nil {
				return err
			}
		}
		// os.OpenRoot opens path without O_DIRECTORY: a FIFO there would
		// block it. (One swapped in after this check, by someone who may
		// change the folder's parent, holds up this run only.)
		if fi, err := os.Stat(path); err != nil {
			return err
		} else if !fi.IsDir() {
			return &fs.PathError{Op: "open", Path: path, Err: syscall.ENOTDIR}
		}
		var err error
		if root, err = os.OpenRoot(path); err != nil {
			return err
		}
		if owner != nil {
			// A folder that exists already was not made with the
			// owner's rights: ask them of the folder opened.
			if err := mayWrite(root); err != nil {
				root.Close()
				return &fs.PathError{Op: "open", Path: path, Err: err}
			}
		}
		return nil
	}
	var err error
	if owner != nil {
		err = asUser(owner, do)
	} else {
		err = do()
	}
	if err != nil {
		return nil, err
	}
	return &Dir{root: root, path: path, owner: owner}, nil
}

// CreateFile opens the file at path for writing as a shell's redirection
// does (made, or emptied; a link is followed, a device written to): for a
// file the user names, such as --junit's, outside any output folder. With
// an owner, it is opened with the owner's rights, so it is a file they
// could write, and a file it makes is theirs.
func CreateFile(path string, owner *Owner) (*os.File, error) {
	var f *os.File
	do := func() (err error) {
		f, err = os.Create(path)
		return err
	}
	var err error
	if owner != nil {
		err = asUser(owner, do)
	} else {
		err = do()
	}
	return f, err
}

// Path is the path the folder was opened by. It is for messages: the
// folder may have been moved since, and the Dir still writes into it.
func (d *Dir) Path() string { return d.path }

// Join is the path of the file name in the folder, for messages.
func (d *Dir) Join(name string) string { return filepath.Join(d.path, name) }

// Close closes the folder. Files opened through it stay open.
func (d *Dir) Close() error { return d.root.Close() }

// Create makes the file name, empty, for writing: for files written as
// they grow (a log, a capture). A file or a link that had the name is
// removed first (the link itself, not what it points to); a folder, a
// device, a FIFO or a socket is an error.
func (d *Dir) Create(name string) (*os.File, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	for range createTries {
		f, err := d.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, filePerm)
		if err == nil {
			return d.own(f)
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, d.err("create", name, err)
		}
		if err := d.replaceable(name); err != nil {
			return nil, err
		}
		// The entry goes, a link itself (not what it points to).
		if err := d.root.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, d.err("replace", name, err)
		}
	}
	return nil, d.err("create", name, errors.New("another process keeps putting an entry in its place"))
}

// WriteFile writes b as the file name: into a new file of a temporary
// name, renamed over the name, so that a reader sees the old file or the
// whole new one. What may have the name is as for Create.
func (d *Dir) WriteFile(name string, b []byte) error {
	return d.writeFile(name, b, filePerm)
}

// WritePrivate writes b as the file name as WriteFile does, readable by
// its owner only (mode 0600) from the moment it is made: for a secret,
// such as a control endpoint's token.
func (d *Dir) WritePrivate(name string, b []byte) error {
	return d.writeFile(name, b, scratchPerm)
}

// Remove removes the file name, or a link in its place (not what it
// points to); a name that is not there is not an error.
func (d *Dir) Remove(name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	if err := d.replaceable(name); err != nil {
		return err
	}
	if err := d.root.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return d.err("remove", name, err)
	}
	return nil
}

func (d *Dir) writeFile(name string, b []byte, perm os.FileMode) error {
	if err := checkName(name); err != nil {
		return err
	}
	f, tmp, err := d.temp(os.O_WRONLY, perm)
	if err != nil {
		return d.err("create", name, err)
	}
	_, err = f.Write(b)
	err = errors.Join(err, f.Close())
	if err == nil {
		err = d.replaceable(name)
	}
	if err == nil {
		err = d.root.Rename(tmp, name)
	}
	if err != nil {
		d.root.Remove(tmp)
		return d.err("write", name, err)
	}
	return nil
}

// Scratch makes a nameless file to write and read back (data that does
// not fit in memory): made under a temporary name and unlinked at once, it
// lasts as long as its descriptor.
func (d *Dir) Scratch() (*os.File, error) {
	f, tmp, err := d.temp(os.O_RDWR, scratchPerm)
	if err != nil {
		return nil, d.err("create", "scratch file", err)
	}
	if err := d.root.Remove(tmp); err != nil {
		f.Close()
		return nil, d.err("remove", tmp, err)
	}
	return f, nil
}

// Append opens the file name for appending, making it when missing: a log
// that several runs add to. An existing file must be one Open would read.
func (d *Dir) Append(name string) (*os.File, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	f, err := d.root.OpenFile(name, os.O_WRONLY|os.O_APPEND|os.O_CREATE|os.O_EXCL, filePerm)
	if err == nil {
		return d.own(f)
	}
	if !errors.Is(err, fs.ErrExist) {
		return nil, d.err("create", name, err)
	}
	return d.openExisting(name, os.O_WRONLY|os.O_APPEND)
}

// Open opens the file name for reading. It must be a regular file that
// the name reaches without a symbolic link; with an Owner, one of theirs
// or of netjam's user, with no other hard link. Otherwise the error wraps
// ErrNotOurs.
func (d *Dir) Open(name string) (*os.File, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	return d.openExisting(name, os.O_RDONLY)
}

// ReadFile reads the file name as Open opens it, up to MaxReadBytes.
func (d *Dir) ReadFile(name string) ([]byte, error) {
	return d.ReadFileMax(name, MaxReadBytes)
}

// ReadFileMax reads the file name as Open opens it, and refuses it when
// it holds more than max bytes (at most MaxReadBytes): for a file whose
// writer bounds it lower, such as a run's summary.
func (d *Dir) ReadFileMax(name string, max int) ([]byte, error) {
	max = min(max, MaxReadBytes)
	f, err := d.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tooLarge := d.err("read", name, fmt.Errorf("more than %d bytes (%d MiB): netjam writes none that big", max, max>>20))
	if fi, err := f.Stat(); err == nil && fi.Size() > int64(max) {
		return nil, tooLarge
	}
	// Bounded again as read: the file may grow meanwhile.
	b, err := io.ReadAll(io.LimitReader(f, int64(max)+1))
	if err != nil {
		return nil, d.err("read", name, err)
	}
	if len(b) > max {
		return nil, tooLarge
	}
	return b, nil
}

// Stat describes the entry at name, a local relative path in the folder,
// without following a link at its end.
func (d *Dir) Stat(name string) (fs.FileInfo, error) {
	if !filepath.IsLocal(name) {
		return nil, d.err("stat", name, errors.New("not a path inside the folder"))
	}
	fi, err := d.root.Lstat(name)
	if err != nil {
		return nil, d.err("stat", name, err)
	}
	return fi, nil
}

// Glob returns the names in the folder that match pattern (as
// filepath.Match has it), sorted.
func (d *Dir) Glob(pattern string) ([]string, error) {
	f, err := d.root.Open(".")
	if err != nil {
		return nil, d.err("open", ".", err)
	}
	defer f.Close()
	all, err := f.Readdirnames(-1)
	if err != nil {
		return nil, d.err("read", ".", err)
	}
	var names []string
	for _, n := range all {
		ok, err := filepath.Match(pattern, n)
		if err != nil {
			return nil, err
		}
		if ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names, nil
}

// Sub makes the folder name in d when missing and opens it; a folder it
// makes is the Owner's. A symbolic link in its place is refused (the
// error wraps ErrNotOurs).
func (d *Dir) Sub(name string) (*Dir, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	made := true
	if err := d.root.Mkdir(name, dirPerm); err != nil {
		if !errors.Is(err, fs.ErrExist) {
			return nil, d.err("mkdir", name, err)
		}
		made = false
	}
	r, err := d.root.OpenRoot(name)
	if err != nil {
		return nil, d.err("open", name, err)
	}
	sub := &Dir{root: r, path: d.Join(name), owner: d.owner}
	// OpenRoot follows a link that stays inside d: refuse one, and an
	// entry swapped for another since.
	li, lerr := d.root.Lstat(name)
	fi, ferr := r.Stat(".")
	switch {
	case lerr != nil || ferr != nil:
		err = errors.Join(lerr, ferr)
	case li.Mode()&fs.ModeSymlink != 0 || !os.SameFile(li, fi):
		err = fmt.Errorf("%w: a symbolic link, or replaced while opened", ErrNotOurs)
	case made && d.owner != nil && ownedBy(fi, os.Geteuid()):
		err = sub.chownSelf()
	}
	if err != nil {
		r.Close()
		return nil, d.err("open", name, err)
	}
	return sub, nil
}

// chownSelf gives the folder to the Owner, through a descriptor of it.
func (d *Dir) chownSelf() error {
	f, err := d.root.Open(".")
	if err != nil {
		return err
	}
	return errors.Join(f.Chown(d.owner.UID, d.owner.GID), f.Close())
}

// own gives the file f, just made, to the Owner, closing it on failure.
func (d *Dir) own(f *os.File) (*os.File, error) {
	if d.owner == nil {
		return f, nil
	}
	if err := f.Chown(d.owner.UID, d.owner.GID); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// temp makes a new file of a random name beginning with ".netjam-",
// opened with flag, and the Owner's.
func (d *Dir) temp(flag int, perm os.FileMode) (*os.File, string, error) {
	for range 100 {
		var r [8]byte
		for i := range r {
			r[i] = byte(rand.Uint32())
		}
		name := ".netjam-" + hex.EncodeToString(r[:]) + ".tmp"
		f, err := d.root.OpenFile(name, flag|os.O_CREATE|os.O_EXCL, perm)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, "", err
		}
		f, err = d.own(f)
		if err != nil {
			d.root.Remove(name)
			return nil, "", err
		}
		return f, name, nil
	}
	return nil, "", errors.New("no free temporary name")
}

// openExisting opens the existing file name with flag, and checks it is
// one to read or append to (see Open).
func (d *Dir) openExisting(name string, flag int) (*os.File, error) {
	// O_NONBLOCK: a FIFO in the file's place does not block the open; the
	// checks below refuse it. It changes nothing for a regular file.
	f, err := d.root.OpenFile(name, flag|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, d.err("open", name, err)
	}
	if err := d.check(f, name); err != nil {
		f.Close()
		return nil, d.err("open", name, err)
	}
	return f, nil
}

// check says why the file f, opened as name, is not one to read or
// append to, or nil.
func (d *Dir) check(f *os.File, name string) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	// The root follows a link that stays inside the folder: the entry
	// itself must be the file opened.
	li, err := d.root.Lstat(name)
	if err != nil {
		return err
	}
	if li.Mode()&fs.ModeSymlink != 0 || !os.SameFile(fi, li) {
		return fmt.Errorf("%w: a symbolic link", ErrNotOurs)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w: a %s", ErrNotOurs, kind(fi.Mode()))
	}
	if d.owner == nil {
		return nil
	}
	uid, nlink, ok := fileOwner(fi)
	switch {
	case !ok:
		return fmt.Errorf("%w: no owner to check", ErrNotOurs)
	case nlink > 1:
		// A hard link to another's file, which the user could not read.
		return fmt.Errorf("%w: it has %d hard links", ErrNotOurs, nlink)
	case uid != d.owner.UID && uid != os.Geteuid():
		return fmt.Errorf("%w: it belongs to uid %d", ErrNotOurs, uid)
	}
	return nil
}

// replaceable says why the entry name, if there is one, is not one to
// replace with a new file: a file or a link may go, but a folder, a
// device, a FIFO or a socket is in the way (an output folder has none
// unless someone put it there, and a device is not netjam's to remove).
func (d *Dir) replaceable(name string) error {
	fi, err := d.root.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return d.err("replace", name, err)
	case fi.Mode().IsRegular() || fi.Mode()&fs.ModeSymlink != 0:
		return nil
	}
	return d.err("replace", name, fmt.Errorf("in the way: a %s, not a file", kind(fi.Mode())))
}

// kind names the type of a file mode, for messages.
func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "folder"
	case m&fs.ModeNamedPipe != 0:
		return "FIFO"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return m.Type().String()
}

// ownedBy reports whether fi's owner is uid.
func ownedBy(fi fs.FileInfo, uid int) bool {
	owner, _, ok := fileOwner(fi)
	return ok && owner == uid
}

// err is the error of op on name, with the file's whole path.
func (d *Dir) err(op, name string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return &fs.PathError{Op: op, Path: d.Join(name), Err: err}
}

// checkName refuses a name that is not one element of a path.
func checkName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') {
		return fmt.Errorf("outdir: %q is not a file name", name)
	}
	return nil
}
