package emulator

import (
	"testing"

	"github.com/netjam/netjam/outdir"
)

// openOut opens the output folder dir for a test, closed when it ends.
func openOut(t testing.TB, dir string) *outdir.Dir {
	t.Helper()
	d, err := outdir.Make(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}
