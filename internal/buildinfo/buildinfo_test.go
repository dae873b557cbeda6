package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestFormatVersion(t *testing.T) {
	rev := []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef"}, {Key: "vcs.modified", Value: "true"}}
	for _, tc := range []struct {
		stamped, module string
		settings        []debug.BuildSetting
		ok              bool
		want            string
	}{
		{"v0.1.0", "(devel)", nil, true, "v0.1.0"},
		{"", "v0.2.0", nil, true, "v0.2.0"},
		{"", "(devel)", rev, true, "(devel) (0123456789ab+dirty)"},
		{"", "", nil, true, "(devel)"},
		{"", "", nil, false, "(devel)"},
		{"", "v0.0.0-20260101000000-0123456789ab+dirty", rev, true, "v0.0.0-20260101000000-0123456789ab+dirty"},
	} {
		bi := &debug.BuildInfo{Main: debug.Module{Version: tc.module}, Settings: tc.settings}
		if got := format(tc.stamped, bi, tc.ok); got != tc.want {
			t.Errorf("format(%q, %q, %v) = %q, want %q", tc.stamped, tc.module, tc.ok, got, tc.want)
		}
	}
}
