package netjam_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"io"
	"math/big"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/netjam/netjam"
	"github.com/netjam/netjam/netjamtest"
)

// TestQUICThroughLoss runs a quic-go client over a PacketConn of the path
// against a quic-go server on the host's loopback, through 5% loss each
// way: a 1 MB echo comes back whole, and the path lost packets on the way.
func TestQUICThroughLoss(t *testing.T) {
	// quic-go warns that it cannot size a PacketConn's buffers: true, and
	// nothing to fix here (the near side's socket is gVisor's).
	t.Setenv("QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING", "true")
	srvTLS, cliTLS := selfSigned(t)
	ln, err := quic.ListenAddr("127.0.0.1:0", srvTLS, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	served := make(chan error, 1)
	go func() {
		c, err := ln.Accept(ctx)
		if err != nil {
			served <- err
			return
		}
		defer c.CloseWithError(0, "")
		s, err := c.AcceptStream(ctx)
		if err != nil {
			served <- err
			return
		}
		_, err = io.Copy(s, s) // echo until the client's FIN
		s.Close()
		served <- err
		<-ctx.Done()
	}()

	p := netjamtest.New(t, netjam.Link{Delay: 10 * time.Millisecond, Loss: 0.05, Seed: 1})
	pc, err := p.ListenPacket("udp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	tr := &quic.Transport{Conn: pc}
	defer tr.Close()
	c, err := tr.Dial(ctx, ln.Addr(), cliTLS, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseWithError(0, "")
	s, err := c.OpenStreamSync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 1<<20)
	rand.Read(data)
	go func() {
		s.Write(data)
		s.Close()
	}()
	got, err := io.ReadAll(s)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("echo: %d of %d bytes back, equal %v, %v", len(got), len(data), bytes.Equal(got, data), err)
	}
	cancel()
	if err := <-served; err != nil {
		t.Errorf("server: %v", err)
	}
	st := p.Stats()
	if st.Uplink.Drops["loss"] == 0 || st.Downlink.Drops["loss"] == 0 || st.Relay.UDP.Relayed == 0 {
		t.Errorf("drops up %v, down %v, UDP sessions relayed %d: want losses both ways and a relayed session", st.Uplink.Drops, st.Downlink.Drops, st.Relay.UDP.Relayed)
	}
	t.Logf("1 MB echoed over QUIC through 5%% loss: uplink %d packets, %d lost; downlink %d, %d lost",
		st.Uplink.PacketsIn, st.Uplink.Drops["loss"], st.Downlink.PacketsIn, st.Downlink.Drops["loss"])
}

// selfSigned returns a server TLS config with a fresh certificate for
// localhost and a client config that trusts it, both speaking ALPN "echo".
func selfSigned(t *testing.T) (*tls.Config, *tls.Config) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), DNSNames: []string{"localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, NextProtos: []string{"echo"}},
		&tls.Config{RootCAs: pool, ServerName: "localhost", NextProtos: []string{"echo"}}
}
