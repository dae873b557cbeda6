package netjam_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/netjam/netjam"
)

// An HTTP client reaches a server on the host's loopback through 50 ms of
// delay each way and 1% loss; the round trips show in the time it takes.
func Example() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello through the path")
	}))
	defer srv.Close()

	p, err := netjam.Start(context.Background(), netjam.Link{Delay: 50 * time.Millisecond, Loss: 0.01, Seed: 1})
	if err != nil {
		panic(err)
	}
	defer p.Close()
	tr := &http.Transport{DialContext: p.DialContext}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	start := time.Now()
	resp, err := client.Get(srv.URL)
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.Status, string(body))
	fmt.Println("at least two round trips:", time.Since(start) >= 200*time.Millisecond)
	// Output:
	// 200 OK hello through the path
	// at least two round trips: true
}

// A server inside the path, reached from a real client through it.
func ExamplePath_Listen() {
	p, err := netjam.Start(context.Background(), netjam.Link{Delay: 20 * time.Millisecond, Rate: 5e6})
	if err != nil {
		panic(err)
	}
	defer p.Close()
	ln, err := p.Listen("tcp", ":0")
	if err != nil {
		panic(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "served from behind the path")
	})}
	go srv.Serve(ln)
	defer srv.Close()

	resp, err := http.Get("http://" + ln.Addr().String()) // an ordinary client of the host
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	http.DefaultClient.CloseIdleConnections()
	fmt.Println(string(body))
	// Output: served from behind the path
}

// Stats shows what the path did to the traffic: here, a 10 Mbit/s
// downlink that carried a 1 MB response.
func ExamplePath_Stats() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(make([]byte, 1_000_000))
	}))
	defer srv.Close()
	p, err := netjam.Start(context.Background(), netjam.Link{Rate: 10e6})
	if err != nil {
		panic(err)
	}
	defer p.Close()
	tr := &http.Transport{DialContext: p.DialContext}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
	if err != nil {
		panic(err)
	}
	n, _ := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	st := p.Stats()
	fmt.Println(n, "bytes;", st.Downlink.Configured.Summary, "; more than 1 MB crossed it:", st.Downlink.BytesOut > 1_000_000)
	// Output: 1000000 bytes; rate 10Mbps, queue droptail 1000p ; more than 1 MB crossed it: true
}
