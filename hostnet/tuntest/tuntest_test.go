package tuntest_test

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/netjam/netjam/hostnet/tuntest"
	"github.com/netjam/netjam/netif"
)

// TestDevice moves a packet each way, refuses GSO, and checks that Close
// wakes a blocked reader and ends both directions.
func TestDevice(t *testing.T) {
	got := make(chan []byte, 1)
	d := tuntest.New("mem0", func(p []byte) { got <- p })
	if d.Name() != "mem0" || d.Offload() {
		t.Fatalf("name %q, offload %v", d.Name(), d.Offload())
	}
	if n, err := d.WritePacket([][]byte{[]byte("to the "), nil, []byte("kernel")}, netif.GSO{}); err != nil || n != 13 || string(<-got) != "to the kernel" {
		t.Fatalf("write: %d, %v", n, err)
	}
	if _, err := d.WritePacket([][]byte{[]byte("x")}, netif.GSO{MSS: 1000}); !errors.Is(err, tuntest.ErrOffload) {
		t.Errorf("a GSO packet: %v", err)
	}
	if !d.Send([]byte("from the kernel")) {
		t.Fatal("Send on an open device")
	}
	buf := make([]byte, 4)
	if n, g, err := d.ReadPacket(buf); err != nil || n != 4 || string(buf) != "from" || g != (netif.GSO{}) {
		t.Fatalf("read into a short buffer: %d %q %+v %v", n, buf, g, err)
	}

	read := make(chan error)
	go func() { _, _, err := d.ReadPacket(buf); read <- err }()
	time.Sleep(10 * time.Millisecond) // let it block
	d.Close()
	if err := <-read; !errors.Is(err, os.ErrClosed) {
		t.Errorf("a blocked read after Close: %v", err)
	}
	if d.Send([]byte("late")) {
		t.Error("Send after Close")
	}
	if _, err := d.WritePacket([][]byte{[]byte("late")}, netif.GSO{}); !errors.Is(err, os.ErrClosed) {
		t.Errorf("write after Close: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
}
