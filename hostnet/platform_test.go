package hostnet

import (
	"errors"
	"testing"
)

// TestNotLinuxError checks the one error of every part of hostnet that
// needs Linux on another system (the _other.go files): it says so first,
// names what was asked for and the system, says what runs instead, and
// matches ErrNeedsLinux and errors.ErrUnsupported.
func TestNotLinuxError(t *testing.T) {
	err := error(&NotLinuxError{Op: "opening a TUN device", GOOS: "darwin", GOARCH: "arm64"})
	want := "TUN mode needs Linux: opening a TUN device is not available on darwin/arm64 (TUN devices, network namespaces and kernel flows are Linux's); lab scenarios (without a tun: section) and the Go API run here"
	if err.Error() != want {
		t.Errorf("error:\n got %s\nwant %s", err, want)
	}
	if !errors.Is(err, ErrNeedsLinux) || !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("errors.Is(%v, ErrNeedsLinux), errors.Is(err, errors.ErrUnsupported) = %v, %v, want true", err, errors.Is(err, ErrNeedsLinux), errors.Is(err, errors.ErrUnsupported))
	}
	if errors.Is(err, ErrPrivilege) {
		t.Error("a system without TUN mode is not a missing privilege (the CLI would advise sudo)")
	}
}
