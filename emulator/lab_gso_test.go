package emulator

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/netjam/netjam/clock"
	"github.com/netjam/netjam/hostcfg"
	"github.com/netjam/netjam/impair"
)

// gsoTransfer builds the lab of y (capturing at the server point into a
// temporary folder), sends data from the client host to the server host
// over one TCP connection, checks that it arrived exactly, closes the lab
// and returns it (for its counters) with the packets captured.
func gsoTransfer(t *testing.T, y string, data []byte) (*lab, [][]byte) {
	t.Helper()
	dir := t.TempDir()
	s := mustPlan(t, y).Runs[0]
	l, err := newLab(s, clock.Real{}, zap.NewNop(), openOut(t, dir), labHooks{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l.start(ctx)
	client, server := l.flowEnds(0)
	ln, err := server.host.ListenTCP(5001, hostcfg.TCPOptions{})
	if err != nil {
		l.close()
		t.Fatal(err)
	}
	got := make(chan []byte, 1)
	go func() {
		defer ln.Close()
		c, err := ln.Accept(ctx)
		if err != nil {
			got <- nil
			return
		}
		defer c.Close()
		b, _ := io.ReadAll(c)
		got <- b
	}()
	c, err := client.host.DialTCP(ctx, netip.AddrPortFrom(server.v4, 5001), hostcfg.TCPOptions{})
	if err != nil {
		l.close()
		t.Fatal(err)
	}
	if _, err := c.Write(data); err != nil {
		t.Error(err)
	}
	c.CloseWrite()
	if b := <-got; !bytes.Equal(b, data) {
		t.Errorf("the server read %d bytes, not the %d sent", len(b), len(data))
	}
	c.Close()
	l.close()
	return l, readPcapFile(t, filepath.Join(dir, "server.pcap"))
}

// readPcapFile returns the packets of a little-endian pcap file.
func readPcapFile(t *testing.T, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 24 || binary.LittleEndian.Uint32(b) != 0xa1b2c3d4 && binary.LittleEndian.Uint32(b) != 0xa1b23c4d {
		t.Fatalf("%s: not a little-endian pcap file", path)
	}
	var ps [][]byte
	for b = b[24:]; len(b) >= 16; {
		n := int(binary.LittleEndian.Uint32(b[8:]))
		if len(b) < 16+n {
			t.Fatalf("%s: a record runs past the end", path)
		}
		ps = append(ps, b[16:16+n])
		b = b[16+n:]
	}
	return ps
}

// checkWire checks the captured packets as a real network between the
// hosts would show them: none larger than the MTU, every TCP checksum
// final, and the payloads of the data direction (to port 5001), placed at
// their sequence numbers, the data sent.
func checkWire(t *testing.T, pkts [][]byte, mtu int, data []byte) {
	t.Helper()
	stream := make([]byte, len(data))
	var isn uint32
	for i, p := range pkts {
		if len(p) > mtu {
			t.Fatalf("packet %d: %d bytes on a path of MTU %d", i, len(p), mtu)
		}
		c := bytes.Clone(p)
		if !impair.CompleteChecksum(c) {
			continue // not TCP
		}
		if !bytes.Equal(c, p) {
			t.Fatalf("packet %d: its TCP checksum is not final", i)
		}
		ip := int(p[0]&0x0f) * 4
		tcp := p[ip:]
		if binary.BigEndian.Uint16(tcp[2:]) != 5001 {
			continue
		}
		seq := binary.BigEndian.Uint32(tcp[4:])
		if tcp[13]&0x02 != 0 { // SYN
			isn = seq + 1
			continue
		}
		payload := tcp[int(tcp[12]>>4)*4:]
		if off := int(seq - isn); len(payload) > 0 && off+len(payload) <= len(stream) {
			copy(stream[off:], payload)
		}
	}
	if !bytes.Equal(stream, data) {
		t.Error("the captured payloads are not the data sent")
	}
}

func gsoData(n int) []byte {
	b := make([]byte, n)
	r := rand.NewChaCha8([32]byte{22})
	r.Read(b)
	return b
}

// TestLabCleanPathDeliversSegmentsWhole: on a path where no stage decides
// per packet, the hosts' large segments (segmentation offload) cross
// whole and reach the receiving host whole, counted as their segments by
// the path and by the host; the capture shows the segments a real
// network would carry.
func TestLabCleanPathDeliversSegmentsWhole(t *testing.T) {
	data := gsoData(4 << 20)
	l, pkts := gsoTransfer(t, `
duration: 60s
link: {delay: 1ms}
capture: [server]
flows: [{name: bulk, type: tcp, size: 4MiB}]
`, data)
	up, down := l.path.Up.Stats(), l.path.Down.Stats()
	if up.WholeGSO == 0 {
		t.Fatal("no large segment crossed the uplink whole")
	}
	_, server := l.flowEnds(0)
	in := server.host.Stats()
	if in.InPackets != up.OutPackets {
		t.Errorf("the server host counted %d packets in, the uplink %d out", in.InPackets, up.OutPackets)
	}
	if in.InBytes >= up.OutBytes {
		t.Errorf("the server host was given %d bytes for the uplink's %d on the wire: no segment reached it whole", in.InBytes, up.OutBytes)
	}
	if in.Malformed+in.ChecksumErrors > 0 {
		t.Errorf("the server host found %d malformed packets and %d checksum errors", in.Malformed, in.ChecksumErrors)
	}
	serverSide, _ := l.deliveryCounts(true)
	clientSide, _ := l.deliveryCounts(false)
	if d := serverSide + clientSide; d > 0 {
		t.Errorf("%d delivery drops on a clean path", d)
	}
	if got, want := uint64(len(pkts)), up.OutPackets+down.InPackets; got != want {
		t.Errorf("the server capture has %d packets, the links say %d", got, want)
	}
	checkWire(t, pkts, l.s.MTU, data)
}

// TestLabImpairedPathSegments: a lossy direction carries the hosts' large
// segments whole (each MTU-sized segment gets its own loss draw, see
// impair.TestWholeGSOMatchesSegments, and a large one is split only where
// one is lost); a stage that decides per packet otherwise (jitter) splits
// them before it, so the hosts segment their data themselves and the
// receiving host takes each packet on its own.
func TestLabImpairedPathSegments(t *testing.T) {
	for _, c := range []struct {
		name, link string
		whole      bool
	}{
		{"loss", "{delay: 1ms, uplink: {loss: 2%}}", true},
		{"jitter", "{delay: {time: 1ms, jitter: 200us}}", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			data := gsoData(1 << 20)
			l, pkts := gsoTransfer(t, `
duration: 60s
link: `+c.link+`
capture: [server]
flows: [{name: bulk, type: tcp, size: 1MiB}]
`, data)
			up, down := l.path.Up.Stats(), l.path.Down.Stats()
			if got := up.WholeGSO > 0; got != c.whole {
				t.Errorf("%d large segments crossed the uplink whole; want some: %v", up.WholeGSO, c.whole)
			}
			// What was in flight when the lab closed is counted as flushed.
			lost, flushed := up.Drops[impair.DropLoss.String()], up.Drops[impair.DropFlushed.String()]
			if (lost > 0) != c.whole || up.InPackets != up.OutPackets+lost+flushed || len(up.Drops) > 2 {
				t.Errorf("uplink: %d in, %d out, drops %v: want every packet out, lost or flushed", up.InPackets, up.OutPackets, up.Drops)
			}
			client, server := l.flowEnds(0)
			if out := client.host.Stats().OutPackets; !c.whole && out != up.InPackets {
				t.Errorf("the client host sent %d packets, the uplink took %d: want the host to segment its data itself on a path that splits", out, up.InPackets)
			}
			// A large segment's bytes are its own (one set of headers),
			// the link's those of its segments on the wire.
			in := server.host.Stats()
			if in.InPackets != up.OutPackets || !c.whole && in.InBytes != up.OutBytes {
				t.Errorf("the server host was given %d packets, %d bytes; the uplink sent %d, %d", in.InPackets, in.InBytes, up.OutPackets, up.OutBytes)
			}
			if got, want := uint64(len(pkts)), up.OutPackets+down.InPackets; got != want {
				t.Errorf("the server capture has %d packets, the links say %d", got, want)
			}
			checkWire(t, pkts, l.s.MTU, data)
		})
	}
}
