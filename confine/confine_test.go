package confine

import (
	"errors"
	"os/exec"
	"reflect"
	"testing"
)

// TestUserArg: the user netjam started as Arg is to become crosses its
// argument whole, and a malformed argument is refused.
func TestUserArg(t *testing.T) {
	for _, u := range []User{{UID: 1000, GID: 1000}, {UID: 65534, GID: 100, Groups: []uint32{27, 44, 4294967294}}} {
		s := u.String()
		got, err := parseUser(s)
		if err != nil || got.UID != u.UID || got.GID != u.GID || !reflect.DeepEqual(got.Groups, u.Groups) {
			t.Errorf("%+v as %q: back as %+v, %v", u, s, got, err)
		}
	}
	for _, s := range []string{"", "1000", "1000:", "a:1", "1:2:", "1:2:3,x", "1:2:3:4", "-1:0", "4294967296:0"} {
		if _, err := parseUser(s); err == nil {
			t.Errorf("%q: no error", s)
		}
	}
	if code := Main([]string{"", "", "true"}); code != ExitCannotRun {
		t.Errorf("a malformed confine call: exit %d, want %d", code, ExitCannotRun)
	}
}

// TestParseCaps: --cap takes names as people write them, lists, and
// repeats, and refuses what is not a capability.
func TestParseCaps(t *testing.T) {
	got, err := ParseCaps([]string{"net_raw,CAP_NET_BIND_SERVICE", " cap_net_raw ", "sys_admin"})
	if want := []int{10, 13, 21}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, %v; want %v", got, err, want)
	}
	if _, err := ParseCaps([]string{"net_rawr"}); err == nil || err.Error() != `--cap: "net_rawr" is not a capability (expected a name such as net_raw, net_bind_service, sys_ptrace)` {
		t.Errorf("an unknown capability: %v", err)
	}
}

// TestStartError: a command not found exits 127, one that cannot be run
// 126, as shells say them.
func TestStartError(t *testing.T) {
	_, notFound := exec.LookPath("netjam-no-such-command")
	for _, c := range []struct {
		err  error
		code int
		msg  string
	}{
		{notFound, ExitNotFound, "shell: x: command not found"},
		{&exec.Error{Name: "x", Err: errors.New("permission denied")}, ExitCannotRun, "shell: x: cannot run: permission denied"},
	} {
		if e := StartError("x", c.err); e.ExitCode() != c.code || e.Error() != c.msg {
			t.Errorf("%v: exit %d, %q; want %d, %q", c.err, e.ExitCode(), e.Error(), c.code, c.msg)
		}
	}
}
