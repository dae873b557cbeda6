package flows

import "testing"

func TestUnfinished(t *testing.T) {
	for _, tc := range []struct {
		received, size uint64
		want           string
	}{
		{1258291, 5 << 20, "unfinished: 1.2 of 5.0 MiB"},
		{914556, 5 << 20, "unfinished: 0.9 of 5.0 MiB"},
		{1234567, 5e6, "unfinished: 1.2 of 5.0 MB"},
		{300, 2000, "unfinished: 0.3 of 2.0 kB"},
		{300, 900, "unfinished: 300 of 900 B"},
		{1234567, 0, "unfinished: 1.2 MB"},
		{12, 0, "unfinished: 12 B"},
		{3 << 30, 4 << 30, "unfinished: 3.0 of 4.0 GiB"},
	} {
		if got := Unfinished(tc.received, tc.size); got != tc.want {
			t.Errorf("Unfinished(%d, %d) = %q, want %q", tc.received, tc.size, got, tc.want)
		}
	}
}
