package proxy_test

import (
	"crypto/sha256"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/netjam/netjam/proxy"
)

// startServer starts a proxy server with its API on a loopback port and
// returns the API's address.
func startServer(t testing.TB, o proxy.Options) (*proxy.Server, string) {
	t.Helper()
	if o.Version == "" {
		o.Version = "test"
	}
	srv, err := proxy.New(o)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := proxy.ListenAPI("127.0.0.1:0", false)
	if err != nil {
		t.Fatal(err)
	}
	hs := srv.Serve(ln, proxy.Guard{})
	t.Cleanup(func() {
		hs.Close()
		srv.Close()
	})
	return srv, ln.Addr().String()
}

// body returns n bytes that are the same for the same n.
func body(n int) []byte {
	r := rand.New(rand.NewPCG(uint64(n), 7))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// upstream is an HTTP server on loopback: / answers "hello", /bytes?n=N
// answers body(N).
func upstream(t testing.TB) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/bytes" {
			n, _ := strconv.Atoi(r.URL.Query().Get("n"))
			w.Header().Set("Content-Length", strconv.Itoa(n))
			w.Write(body(n))
			return
		}
		io.WriteString(w, "hello")
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// freeAddr returns a loopback address nothing listens on now.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := ln.Addr().String()
	ln.Close()
	return a
}

// client makes a new connection for each request, so that each crosses
// the path's handshake too.
var client = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

func sum(b []byte) [32]byte { return sha256.Sum256(b) }

// tcpServer is a TCP server on loopback that serves each connection
// with serve (which closes it), until the test ends; it returns its
// address.
func tcpServer(t testing.TB, serve func(c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serve(c)
		}
	}()
	return ln.Addr().String()
}

// echoUpstream is a TCP server on loopback that sends back what it
// reads, on each connection.
func echoUpstream(t testing.TB) string {
	return tcpServer(t, func(c net.Conn) {
		defer c.Close()
		io.Copy(c, c)
	})
}

// echo writes n bytes on c and reads until n came back, the connection
// ended (eof) or 5 s passed; it returns the bytes that came back.
func echo(t testing.TB, c net.Conn, n int) (got int, eof bool) {
	t.Helper()
	if _, err := c.Write(make([]byte, n)); err != nil {
		t.Fatalf("write %d bytes: %v", n, err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, n)
	for got < n {
		k, err := c.Read(buf[got:])
		got += k
		if err == io.EOF {
			return got, true
		}
		if err != nil {
			t.Fatalf("after %d of %d bytes echoed: %v", got, n, err)
		}
	}
	return got, false
}
