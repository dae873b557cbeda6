package emulator

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
)

// nodeHelperEnv makes the test binary TestNodeHelperProcess, in the mode
// it names, as a node's command.
const nodeHelperEnv = "NETJAM_NODE_HELPER"

// TestNodeHelperProcess is a node's command in the tests of other
// protocols than TCP: "quic" echoes one QUIC stream on UDP port 4433;
// "raw" prints the payload of the first IPv4 packet of protocol 253
// (RFC 3692's experimental number) it receives.
func TestNodeHelperProcess(t *testing.T) {
	mode := os.Getenv(nodeHelperEnv)
	if mode == "" {
		t.Skip("a node's command in TestNodesCarryOtherProtocols, run by it")
	}
	var err error
	switch mode {
	case "quic":
		err = quicEcho()
	case "raw":
		err = rawReceive()
	}
	if err != nil {
		fmt.Println("helper:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// quicEcho accepts one QUIC connection on :4433 and echoes its first
// stream until the client's FIN.
func quicEcho() error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), DNSNames: []string{"server"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	ln, err := quic.ListenAddr(":4433", &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, NextProtos: []string{"echo"}}, nil)
	if err != nil {
		return err
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := ln.Accept(ctx)
	if err != nil {
		return err
	}
	s, err := c.AcceptStream(ctx)
	if err != nil {
		return err
	}
	n, err := io.Copy(s, s)
	s.Close()
	fmt.Printf("quic: echoed %d bytes\n", n)
	<-c.Context().Done() // until the client closes
	return err
}

// rawReceive prints the first packet of protocol 253 that arrives.
func rawReceive() error {
	c, err := net.ListenPacket("ip4:253", "0.0.0.0")
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Println("raw: listening")
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	buf := make([]byte, 2048)
	n, from, err := c.ReadFrom(buf)
	if err != nil {
		return err
	}
	fmt.Printf("raw: %q from %v\n", buf[:n], from)
	return nil
}

// TestNodesCarryOtherProtocols: between the client's kernel and nodes'
// everything IP passes as packets, not only what netjam's peer would
// terminate: a QUIC transfer (quic-go's client in the client's
// namespace, its server a node's command) of 1 MB across 10 ms each way,
// and a packet of IP protocol 253 on a raw socket.
func TestNodesCarryOtherProtocols(t *testing.T) {
	ns := testNetns(t)
	t.Setenv("QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING", "true")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var nodeOut lockedBuffer
	y := fmt.Sprintf(`
duration: 60s
link: {delay: 10ms}
tun: {netns: %s}
nodes:
  - {name: server, env: {%[2]s: quic}, run: "exec %[3]s -test.run=^TestNodeHelperProcess$ -test.count=1"}
  - {name: sink, env: {%[2]s: raw}, run: "exec %[3]s -test.run=^TestNodeHelperProcess$ -test.count=1"}
`, ns.Path(), nodeHelperEnv, exe)
	sum, err := Run(context.Background(), mustPlan(t, y), Options{NodeOutput: &nodeOut, Attached: func(ctx context.Context) error {
		if err := quicAcross(ctx, ns); err != nil {
			return err
		}
		if err := rawAcross(ctx, ns); err != nil {
			return err
		}
		for !strings.Contains(nodeOut.String(), "raw: \"") || !strings.Contains(nodeOut.String(), "quic: echoed") {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			time.Sleep(50 * time.Millisecond)
		}
		return nil
	}})
	out := nodeOut.String()
	if err != nil {
		t.Fatalf("run: %v\nnodes:\n%s", err, out)
	}
	t.Logf("nodes:\n%s", out)
	if !strings.Contains(out, "server| quic: echoed 1000000 bytes") {
		t.Error("the node's QUIC server did not echo the 1 MB")
	}
	if !strings.Contains(out, `sink| raw: "protocol 253 across netjam" from 10.99.0.1`) {
		t.Error("the node did not get the protocol 253 packet")
	}
	if ts := sum.Runs[0].TUN; ts.Relay.UDP.Served+ts.Relay.UDP.Relayed != 0 {
		t.Errorf("the relay saw UDP: %+v", ts.Relay.UDP)
	}
}

// quicAcross echoes 1 MB over QUIC with the server node, from a UDP
// socket of the client's namespace, and checks what comes back.
func quicAcross(ctx context.Context, ns interface{ Do(func() error) error }) error {
	var pc net.PacketConn
	if err := ns.Do(func() error {
		var err error
		pc, err = net.ListenPacket("udp", ":0")
		return err
	}); err != nil {
		return err
	}
	defer pc.Close()
	tr := &quic.Transport{Conn: pc}
	defer tr.Close()
	var c *quic.Conn
	var err error
	for range 50 { // until the node's server listens
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		c, err = tr.Dial(dctx, &net.UDPAddr{IP: net.IPv4(10, 99, 0, 2), Port: 4433},
			&tls.Config{InsecureSkipVerify: true, NextProtos: []string{"echo"}}, nil) // a test's own server: the transport is what is tested
		cancel()
		if err == nil {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("quic dial: %w", err)
	}
	defer c.CloseWithError(0, "")
	s, err := c.OpenStreamSync(ctx)
	if err != nil {
		return err
	}
	msg := bytes.Repeat([]byte("quic across "), 1_000_000/12+1)[:1_000_000]
	go func() {
		s.Write(msg)
		s.Close()
	}()
	got, err := io.ReadAll(s)
	if err != nil {
		return fmt.Errorf("quic read: %w", err)
	}
	if !bytes.Equal(got, msg) {
		return fmt.Errorf("quic: %d bytes came back, not the 1 MB sent", len(got))
	}
	return nil
}

// rawAcross sends a packet of IP protocol 253 to the sink node (10.99.0.3)
// from a raw socket of the client's namespace, until the node says it
// got one.
func rawAcross(ctx context.Context, ns interface{ Do(func() error) error }) error {
	var c net.PacketConn
	if err := ns.Do(func() error {
		var err error
		c, err = net.ListenPacket("ip4:253", "10.99.0.1")
		return err
	}); err != nil {
		return err
	}
	defer c.Close()
	_, err := c.WriteTo([]byte("protocol 253 across netjam"), &net.IPAddr{IP: net.IPv4(10, 99, 0, 3)})
	return err
}
