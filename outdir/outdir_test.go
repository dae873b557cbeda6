//go:build unix

// The tests make FIFOs, devices and symbolic links and check owners: they
// need a Unix file system.

package outdir_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/netjam/netjam/outdir"
)

// folder makes a test's output folder, a folder "outside" beside it, and
// a file in outside that must stay as it is.
func folder(t *testing.T) (d *outdir.Dir, dir, outside, precious string) {
	t.Helper()
	base := t.TempDir()
	dir, outside = filepath.Join(base, "out"), filepath.Join(base, "outside")
	if err := os.Mkdir(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	precious = filepath.Join(outside, "precious")
	if err := os.WriteFile(precious, []byte("precious\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := outdir.Make(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d, dir, outside, precious
}

// untouched fails t when precious was written or outside holds more than
// it.
func untouched(t *testing.T, outside, precious string) {
	t.Helper()
	if b, err := os.ReadFile(precious); err != nil || string(b) != "precious\n" {
		t.Errorf("the file outside: %q, %v", b, err)
	}
	if es, _ := os.ReadDir(outside); len(es) != 1 {
		t.Errorf("outside holds %v, want precious alone", es)
	}
}

// writers are the ways of writing a file through a Dir.
var writers = map[string]func(d *outdir.Dir, name string) error{
	"Create": func(d *outdir.Dir, name string) error {
		f, err := d.Create(name)
		if err != nil {
			return err
		}
		_, err = f.WriteString("result\n")
		return errors.Join(err, f.Close())
	},
	"WriteFile": func(d *outdir.Dir, name string) error { return d.WriteFile(name, []byte("result\n")) },
}

// TestWritesReplaceLinks: a link in the folder, to a file outside, to a
// path outside that does not exist, or to another file of the folder, is
// replaced by the file written, and what it pointed to is not touched;
// so is a hard link to a file outside.
func TestWritesReplaceLinks(t *testing.T) {
	for how, write := range writers {
		t.Run(how, func(t *testing.T) {
			d, dir, outside, precious := folder(t)
			os.Symlink(precious, filepath.Join(dir, "to-file"))
			os.Symlink(filepath.Join(outside, "new"), filepath.Join(dir, "to-nothing"))
			os.Symlink("../outside", filepath.Join(dir, "to-folder"))
			os.WriteFile(filepath.Join(dir, "inside"), []byte("inside\n"), 0o644)
			os.Symlink("inside", filepath.Join(dir, "to-inside"))
			if err := os.Link(precious, filepath.Join(dir, "hard")); err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"to-file", "to-nothing", "to-inside", "hard", "to-folder"} {
				if err := write(d, name); err != nil {
					t.Errorf("%s: %v", name, err)
					continue
				}
				if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(b) != "result\n" {
					t.Errorf("%s: %q, %v", name, b, err)
				}
				if st, _ := os.Lstat(filepath.Join(dir, name)); st == nil || !st.Mode().IsRegular() {
					t.Errorf("%s: not a regular file", name)
				}
			}
			if b, _ := os.ReadFile(filepath.Join(dir, "inside")); string(b) != "inside\n" {
				t.Errorf("the file a link pointed to inside: %q", b)
			}
			untouched(t, outside, precious)
		})
	}
}

// TestWritesLeaveWhatIsNotAFile: a folder, a FIFO or a device in a
// file's place is an error for Create and WriteFile, and stays.
func TestWritesLeaveWhatIsNotAFile(t *testing.T) {
	d, dir, _, _ := folder(t)
	os.Mkdir(filepath.Join(dir, "folder"), 0o755)
	os.WriteFile(filepath.Join(dir, "folder", "x"), nil, 0o644)
	os.Mkdir(filepath.Join(dir, "empty"), 0o755)
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	names := []string{"folder", "empty", "fifo"}
	if os.Geteuid() == 0 {
		// A device node like /dev/null's (1, 3).
		if err := syscall.Mknod(filepath.Join(dir, "null"), syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
			t.Fatal(err)
		}
		names = append(names, "null")
	}
	for how, write := range writers {
		for _, name := range names {
			before, _ := os.Lstat(filepath.Join(dir, name))
			if err := write(d, name); err == nil || !strings.Contains(err.Error(), "in the way") {
				t.Errorf("%s %s: %v, want it in the way", how, name, err)
			}
			if after, err := os.Lstat(filepath.Join(dir, name)); err != nil || after.Mode() != before.Mode() {
				t.Errorf("%s %s: %v after, %v before", how, name, after, before)
			}
		}
	}
}

// TestFolderSwappedAfterOpen: once the folder is open, moving it and
// putting a link to another folder in its place changes nothing: the
// files go into the folder opened.
func TestFolderSwappedAfterOpen(t *testing.T) {
	d, dir, outside, precious := folder(t)
	if err := os.Rename(dir, dir+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, dir); err != nil {
		t.Fatal(err)
	}
	for how, write := range writers {
		if err := write(d, how); err != nil {
			t.Errorf("%s: %v", how, err)
		}
		if _, err := os.Stat(filepath.Join(dir+".moved", how)); err != nil {
			t.Errorf("%s: not in the folder opened: %v", how, err)
		}
	}
	sub, err := d.Sub("sub")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := sub.WriteFile("x", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir+".moved", "sub", "x")); err != nil {
		t.Errorf("sub/x: %v", err)
	}
	untouched(t, outside, precious)
}

// TestReadsRefuseWhatIsNotAFile: Open, ReadFile and Append refuse a link
// (outside or inside), a FIFO (without blocking) and a folder; they read
// and append to a regular file.
func TestReadsRefuseWhatIsNotAFile(t *testing.T) {
	d, dir, outside, precious := folder(t)
	os.Symlink(precious, filepath.Join(dir, "to-file"))
	os.WriteFile(filepath.Join(dir, "log"), []byte("one\n"), 0o644)
	os.Symlink("log", filepath.Join(dir, "to-inside"))
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(filepath.Join(dir, "folder"), 0o755)
	for _, name := range []string{"to-file", "to-inside", "fifo", "folder"} {
		// A link outside is refused by the root itself, with its own error.
		if _, err := d.ReadFile(name); err == nil || name != "to-file" && !errors.Is(err, outdir.ErrNotOurs) {
			t.Errorf("ReadFile %s: %v, want ErrNotOurs", name, err)
		}
		if f, err := d.Append(name); err == nil {
			f.Close()
			t.Errorf("Append %s: opened", name)
		}
	}
	f, err := d.Append("log")
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("two\n")
	f.Close()
	if b, err := d.ReadFile("log"); err != nil || string(b) != "one\ntwo\n" {
		t.Errorf("log: %q, %v", b, err)
	}
	untouched(t, outside, precious)
}

// TestReadFileBound: a file larger than MaxReadBytes (sparse here) is
// refused, not read into memory.
func TestReadFileBound(t *testing.T) {
	d, dir, _, _ := folder(t)
	if err := os.WriteFile(filepath.Join(dir, "big"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(dir, "big"), outdir.MaxReadBytes+1); err != nil {
		t.Fatal(err)
	}
	if _, err := d.ReadFile("big"); err == nil {
		t.Error("read a file past MaxReadBytes")
	}
}

// TestSubRefusesLinks: Sub refuses a link in place of the folder, to a
// folder inside as to one outside, and opens a folder it makes.
func TestSubRefusesLinks(t *testing.T) {
	d, dir, outside, precious := folder(t)
	os.Mkdir(filepath.Join(dir, "real"), 0o755)
	os.Symlink("real", filepath.Join(dir, "to-inside"))
	os.Symlink(outside, filepath.Join(dir, "to-outside"))
	for _, name := range []string{"to-inside", "to-outside"} {
		if sub, err := d.Sub(name); err == nil {
			sub.Close()
			t.Errorf("Sub %s: opened", name)
		}
	}
	for _, name := range []string{"real", "new"} {
		sub, err := d.Sub(name)
		if err != nil {
			t.Fatalf("Sub %s: %v", name, err)
		}
		if sub.Path() != filepath.Join(dir, name) {
			t.Errorf("Sub %s: path %s", name, sub.Path())
		}
		sub.Close()
	}
	untouched(t, outside, precious)
}

// TestNamesStayInside: a name with a "/" or ".." is refused by every
// method that takes a file's name, and Stat takes only local paths.
func TestNamesStayInside(t *testing.T) {
	d, _, outside, precious := folder(t)
	for _, name := range []string{"../outside/precious", "a/b", "..", ".", ""} {
		if err := d.WriteFile(name, nil); err == nil {
			t.Errorf("WriteFile %q: written", name)
		}
		if _, err := d.Create(name); err == nil {
			t.Errorf("Create %q: made", name)
		}
		if _, err := d.Open(name); err == nil {
			t.Errorf("Open %q: opened", name)
		}
		if _, err := d.Sub(name); err == nil {
			t.Errorf("Sub %q: opened", name)
		}
	}
	if _, err := d.Stat("../outside/precious"); err == nil {
		t.Error("Stat ../outside/precious: described")
	}
	untouched(t, outside, precious)
}

// TestScratchLeavesNoName: a scratch file has no name in the folder.
func TestScratchLeavesNoName(t *testing.T) {
	d, dir, _, _ := folder(t)
	f, err := d.Scratch()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("rows\n"); err != nil {
		t.Fatal(err)
	}
	if es, _ := os.ReadDir(dir); len(es) != 0 {
		t.Errorf("the folder holds %v", es)
	}
}

// TestOpenRefusesWhatIsNotAFolder: a file or a FIFO is not a folder (and
// the FIFO does not block the open).
func TestOpenRefusesWhatIsNotAFolder(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "file"), nil, 0o644)
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"file", "fifo"} {
		if _, err := outdir.Open(filepath.Join(dir, name), nil); !errors.Is(err, syscall.ENOTDIR) {
			t.Errorf("Open %s: %v, want ENOTDIR", name, err)
		}
		if _, err := outdir.Make(filepath.Join(dir, name), nil); err == nil {
			t.Errorf("Make %s: opened", name)
		}
	}
	if _, err := outdir.Open(filepath.Join(dir, "missing"), nil); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open of a missing folder: %v", err)
	}
}

// TestGlob lists matching names, sorted.
func TestGlob(t *testing.T) {
	d, dir, _, _ := folder(t)
	for _, n := range []string{"scenario-b.yaml", "scenario.yaml", "summary.json", "scenario-a.yaml"} {
		os.WriteFile(filepath.Join(dir, n), nil, 0o644)
	}
	names, err := d.Glob("scenario*.yaml")
	if err != nil || len(names) != 3 || names[0] != "scenario-a.yaml" || names[2] != "scenario.yaml" {
		t.Errorf("%v, %v", names, err)
	}
}

// nobody is the user the Owner tests write for.
var nobody = &outdir.Owner{UID: 65534, GID: 65534}

// rootBase skips a test that needs root to act for another user, and
// returns a folder of root's, mode 0755, that nobody may reach but not
// write into (t.TempDir's parent is closed to others).
func rootBase(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("writing for another user needs root")
	}
	base, err := os.MkdirTemp("", "outdir-owner")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	return base
}

// owner returns the uid and gid of the entry at path.
func owner(t *testing.T, path string) (uid, gid uint32) {
	t.Helper()
	st, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	s := st.Sys().(*syscall.Stat_t)
	return s.Uid, s.Gid
}

// TestOwnerMakesTheirs: with an Owner, the folders Make and Sub make and
// every file written are the owner's; netjam's own thread keeps root's
// ids.
func TestOwnerMakesTheirs(t *testing.T) {
	base := rootBase(t)
	home := filepath.Join(base, "home")
	os.Mkdir(home, 0o755)
	os.Chown(home, 65534, 65534)
	dir := filepath.Join(home, "a", "b")
	d, err := outdir.Make(dir, nobody)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for how, write := range writers {
		if err := write(d, how); err != nil {
			t.Fatal(err)
		}
	}
	f, err := d.Append("log")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	sub, err := d.Sub("sub")
	if err != nil {
		t.Fatal(err)
	}
	sub.WriteFile("x", nil)
	sub.Close()
	for _, p := range []string{"a", "a/b", "a/b/Create", "a/b/WriteFile", "a/b/log", "a/b/sub", "a/b/sub/x"} {
		if uid, gid := owner(t, filepath.Join(home, p)); uid != 65534 || gid != 65534 {
			t.Errorf("%s: %d:%d, want 65534:65534", p, uid, gid)
		}
	}
	// Back on an ordinary thread, netjam is root as before.
	os.WriteFile(filepath.Join(base, "mine"), nil, 0o644)
	if uid, _ := owner(t, filepath.Join(base, "mine")); uid != 0 {
		t.Errorf("a file netjam made after: uid %d, want 0", uid)
	}
}

// TestOwnerRights: with an Owner, a folder the owner may not write into
// is refused, as is reading a file of another user or one with another
// hard link.
func TestOwnerRights(t *testing.T) {
	base := rootBase(t) // nobody may not write here
	if d, err := outdir.Make(filepath.Join(base, "out"), nobody); !errors.Is(err, fs.ErrPermission) {
		if d != nil {
			d.Close()
		}
		t.Fatalf("Make in root's folder: %v, want a permission error", err)
	}
	if _, err := os.Stat(filepath.Join(base, "out")); err == nil {
		t.Error("Make in root's folder made it")
	}
	// Nor an existing folder of root's, though nobody may open it.
	for _, open := range []func(string, *outdir.Owner) (*outdir.Dir, error){outdir.Open, outdir.Make} {
		if d, err := open(base, nobody); !errors.Is(err, fs.ErrPermission) {
			if d != nil {
				d.Close()
			}
			t.Errorf("opening root's folder: %v, want a permission error", err)
		}
	}
	// A folder of root's that a group of the owner's may write into is
	// theirs to write.
	shared := filepath.Join(base, "shared")
	os.Mkdir(shared, 0o775)
	os.Chown(shared, 0, 4321)
	os.Chmod(shared, 0o775)
	if d, err := outdir.Make(filepath.Join(shared, "out"), &outdir.Owner{UID: 65534, GID: 65534, Groups: []int{4321}}); err != nil {
		t.Errorf("a folder the owner's group may write into: %v", err)
	} else {
		d.Close()
	}
	if d, err := outdir.Make(filepath.Join(shared, "out2"), nobody); !errors.Is(err, fs.ErrPermission) {
		if d != nil {
			d.Close()
		}
		t.Errorf("the same folder without the group: %v, want a permission error", err)
	}
	home := filepath.Join(base, "home")
	os.Mkdir(home, 0o755)
	os.Chown(home, 65534, 65534)
	d, err := outdir.Open(home, nobody)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	secret := filepath.Join(base, "secret")
	os.WriteFile(secret, []byte("secret\n"), 0o600)
	os.Link(secret, filepath.Join(home, "hard"))
	os.WriteFile(filepath.Join(home, "others"), nil, 0o644)
	os.Chown(filepath.Join(home, "others"), 1234, 1234)
	os.WriteFile(filepath.Join(home, "roots"), nil, 0o644)
	for _, name := range []string{"hard", "others"} {
		if _, err := d.ReadFile(name); !errors.Is(err, outdir.ErrNotOurs) {
			t.Errorf("ReadFile %s: %v, want ErrNotOurs", name, err)
		}
	}
	if _, err := d.ReadFile("roots"); err != nil {
		t.Errorf("ReadFile of a file netjam's user made: %v", err)
	}
	// A file the user names is written with their rights: not root's.
	if f, err := outdir.CreateFile(secret, nobody); !errors.Is(err, fs.ErrPermission) {
		if f != nil {
			f.Close()
		}
		t.Errorf("CreateFile of root's file: %v, want a permission error", err)
	}
	f, err := outdir.CreateFile(filepath.Join(home, "junit.xml"), nobody)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if uid, gid := owner(t, filepath.Join(home, "junit.xml")); uid != 65534 || gid != 65534 {
		t.Errorf("CreateFile: %d:%d, want 65534:65534", uid, gid)
	}
	if b, _ := os.ReadFile(secret); string(b) != "secret\n" {
		t.Errorf("root's file: %q", b)
	}
}
