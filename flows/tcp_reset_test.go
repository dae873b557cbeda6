package flows

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/netjam/netjam/clock"
)

// A reset ends the flow at once, both ends, and Run reports no error;
// the summary says when, and the flow did not complete. Over loopback
// kernel sockets (Reset through SO_LINGER 0).
func TestTCPBulkReset(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	send, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	recv := <-accepted
	defer send.Close()
	defer recv.Close()
	f, err := NewTCPBulk(TCPBulkSpec{Name: "bulk", Duration: time.Minute}, clock.Real{}, send, recv, nil)
	if err != nil {
		t.Fatal(err)
	}
	if f.Reset() {
		t.Error("Reset before the flow started reported true")
	}
	done := make(chan error, 1)
	go func() { done <- f.Run(context.Background()) }()
	deadline := time.Now().Add(10 * time.Second)
	for f.Summary().BytesReceived < 1<<20 {
		if time.Now().After(deadline) {
			t.Fatal("no MiB received in 10 s")
		}
		time.Sleep(time.Millisecond)
	}
	if !f.Reset() {
		t.Fatal("Reset of a running flow reported false")
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run after a reset: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not end within 10 s of the reset")
	}
	s := f.Summary()
	if s.ResetAtS <= 0 || s.Completed {
		t.Errorf("summary: reset at %v s, completed %v", s.ResetAtS, s.Completed)
	}
	if f.Reset() {
		t.Error("a second Reset reported true")
	}
}
