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
