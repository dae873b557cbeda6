package netjam_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
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

// Start builds a path from a Link: here 30 ms each way, an asymmetric
// rate and a fixed seed, so that every random decision repeats.
func ExampleStart() {
	p, err := netjam.Start(context.Background(), netjam.Link{
		Delay: 30 * time.Millisecond,
		Up:    &netjam.Direction{Delay: 30 * time.Millisecond, Rate: 2e6},
		Down:  &netjam.Direction{Delay: 30 * time.Millisecond, Rate: 20e6, Loss: 0.01},
		Seed:  7,
	})
	if err != nil {
		panic(err)
	}
	defer p.Close()
	st := p.Stats()
	fmt.Println("uplink:", st.Uplink.Configured.Summary)
	fmt.Println("downlink:", st.Downlink.Configured.Summary)
	// Output:
	// uplink: rate 2Mbps, queue droptail 1000p, delay 30ms
	// downlink: loss 1%, rate 20Mbps, queue droptail 1000p, delay 30ms
}

// Load takes a scenario file's whole link, with `netjam run --set`'s
// overrides after it.
func ExampleLoad() {
	p, err := netjam.Load(context.Background(), "testdata/mobile.yaml", "link.downlink.rate=5Mbps")
	if err != nil {
		panic(err)
	}
	defer p.Close()
	st := p.Stats()
	fmt.Println("seed", p.Seed())
	fmt.Println("uplink:", st.Uplink.Configured.Summary)
	fmt.Println("downlink:", st.Downlink.Configured.Summary)
	// Output:
	// seed 7
	// uplink: rate 2Mbps, queue droptail 1000p, delay 40ms
	// downlink: loss gemodel p 1% r 30% 1-h 100% 1-k 0%, rate 5Mbps, queue droptail 1000p, delay 40ms
}

// Dial connects across the path to a real server: here an echo server on
// the host's loopback, 25 ms away each way.
func ExamplePath_Dial() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			io.Copy(c, c) // echo
			c.Close()
		}
	}()

	p, err := netjam.Start(context.Background(), netjam.Link{Delay: 25 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	defer p.Close()
	c, err := p.Dial("tcp", ln.Addr().String())
	if err != nil {
		panic(err)
	}
	defer c.Close()
	start := time.Now()
	c.Write([]byte("ping"))
	buf := make([]byte, 4)
	io.ReadFull(c, buf)
	fmt.Println(string(buf), "after a round trip:", time.Since(start) >= 50*time.Millisecond)
	// Output: ping after a round trip: true
}

// DialContext with "udp" gives a connected UDP socket whose datagrams
// cross the path; the context bounds the dial.
func ExamplePath_DialContext() {
	srv, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	go func() {
		buf := make([]byte, 1500)
		n, from, err := srv.ReadFrom(buf)
		if err == nil {
			srv.WriteTo(buf[:n], from) // echo
		}
	}()

	p, err := netjam.Start(context.Background(), netjam.Link{Delay: 10 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := p.DialContext(ctx, "udp", srv.LocalAddr().String())
	if err != nil {
		panic(err)
	}
	defer c.Close()
	c.Write([]byte("hello over udp"))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 1500)
	n, err := c.Read(buf)
	if err != nil {
		panic(err)
	}
	fmt.Println(string(buf[:n]))
	// Output: hello over udp
}

// ListenPacket gives an unconnected UDP socket behind the path, as QUIC
// clients want one: ReadFrom returns the real address that answered.
func ExamplePath_ListenPacket() {
	srv, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	go func() {
		buf := make([]byte, 1500)
		n, from, err := srv.ReadFrom(buf)
		if err == nil {
			srv.WriteTo(buf[:n], from) // echo
		}
	}()

	p, err := netjam.Start(context.Background(), netjam.Link{Delay: 10 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	defer p.Close()
	pc, err := p.ListenPacket("udp", ":0")
	if err != nil {
		panic(err)
	}
	defer pc.Close()
	pc.WriteTo([]byte("datagram"), srv.LocalAddr())
	pc.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 1500)
	n, from, err := pc.ReadFrom(buf)
	if err != nil {
		panic(err)
	}
	fmt.Println(string(buf[:n]), "from the server:", from.String() == srv.LocalAddr().String())
	// Output: datagram from the server: true
}

// Seed is the seed a path's random decisions came from: a Link without
// one gets one picked, which a failing test can print and a rerun set.
func ExamplePath_Seed() {
	p, err := netjam.Start(context.Background(), netjam.Link{Loss: 0.05})
	if err != nil {
		panic(err)
	}
	seed := p.Seed()
	p.Close()

	again, err := netjam.Start(context.Background(), netjam.Link{Loss: 0.05, Seed: seed})
	if err != nil {
		panic(err)
	}
	defer again.Close()
	fmt.Println("picked one:", seed != 0, "; repeated:", again.Seed() == seed)
	// Output: picked one: true ; repeated: true
}

// Set changes a running path as a scenario's link keys would, and keeps
// its connections; a bad key or value changes nothing.
func ExamplePath_Set() {
	p, err := netjam.Start(context.Background(), netjam.Link{Delay: 20 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	defer p.Close()
	if err := p.Set("uplink.loss", "100%"); err != nil { // the uplink goes dark
		panic(err)
	}
	fmt.Println("uplink:", p.Stats().Uplink.Configured.Summary)
	if err := p.Set("uplink.loss", "0%"); err != nil { // and comes back
		panic(err)
	}
	fmt.Println("uplink:", p.Stats().Uplink.Configured.Summary)
	fmt.Println(p.Set("uplink.loss", "150%") != nil)
	// Output:
	// uplink: loss 100%, delay 20ms
	// uplink: delay 20ms
	// true
}

// Close ends the path: its connections close, and it makes no more.
func ExamplePath_Close() {
	p, err := netjam.Start(context.Background(), netjam.Link{})
	if err != nil {
		panic(err)
	}
	p.Close()
	_, err = p.Dial("tcp", "127.0.0.1:80")
	fmt.Println(errors.Is(err, netjam.ErrClosed))
	// Output: true
}
