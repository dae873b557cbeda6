package main

import (
	"reflect"
	"testing"
)

// TestCommandUserArg: the user netjam started as confineArg is to become
// crosses its argument whole, and a malformed argument is refused.
func TestCommandUserArg(t *testing.T) {
	for _, u := range []commandUser{{uid: 1000, gid: 1000}, {uid: 65534, gid: 100, groups: []uint32{27, 44, 4294967294}}} {
		s := u.String()
		got, err := parseCommandUser(s)
		if err != nil || got.uid != u.uid || got.gid != u.gid || !reflect.DeepEqual(got.groups, u.groups) {
			t.Errorf("%+v as %q: back as %+v, %v", u, s, got, err)
		}
	}
	for _, s := range []string{"", "1000", "1000:", "a:1", "1:2:", "1:2:3,x", "1:2:3:4", "-1:0", "4294967296:0"} {
		if _, err := parseCommandUser(s); err == nil {
			t.Errorf("%q: no error", s)
		}
	}
	if code := runConfined([]string{"", "", "true"}); code != exitCannotRun {
		t.Errorf("a malformed confine call: exit %d, want %d", code, exitCannotRun)
	}
}
