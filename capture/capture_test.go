package capture

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/netjam/netjam/outdir"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// file is a pcap file as readPcap parses it.
type file struct {
	magic, snaplen, linkType uint32
	records                  []record
}

type record struct {
	sec, frac, capLen, origLen uint32
	data                       []byte
}

// readPcap parses a little-endian pcap file strictly: a header of version
// 2.4, then whole records whose captured length is at most the snap
// length and the original length; anything else is an error.
func readPcap(b []byte) (file, error) {
	var f file
	if len(b) < FileHeaderLen {
		return f, fmt.Errorf("file of %d bytes: no header", len(b))
	}
	le := binary.LittleEndian
	f.magic, f.snaplen, f.linkType = le.Uint32(b), le.Uint32(b[16:]), le.Uint32(b[20:])
	if f.magic != magicNanos && f.magic != magicMicros {
		return f, fmt.Errorf("magic %#x", f.magic)
	}
	if le.Uint16(b[4:]) != 2 || le.Uint16(b[6:]) != 4 || le.Uint64(b[8:]) != 0 {
		return f, fmt.Errorf("header % x", b[:FileHeaderLen])
	}
	b = b[FileHeaderLen:]
	for len(b) > 0 {
		if len(b) < RecordHeaderLen {
			return f, fmt.Errorf("record %d: %d bytes left, no room for a header", len(f.records), len(b))
		}
		r := record{sec: le.Uint32(b), frac: le.Uint32(b[4:]), capLen: le.Uint32(b[8:]), origLen: le.Uint32(b[12:])}
		if r.capLen > f.snaplen || r.capLen > r.origLen || int(r.capLen) > len(b)-RecordHeaderLen {
			return f, fmt.Errorf("record %d: caplen %d, len %d, snaplen %d, %d bytes left", len(f.records), r.capLen, r.origLen, f.snaplen, len(b)-RecordHeaderLen)
		}
		if f.magic == magicNanos && r.frac >= 1e9 || f.magic == magicMicros && r.frac >= 1e6 {
			return f, fmt.Errorf("record %d: fraction %d", len(f.records), r.frac)
		}
		r.data = b[RecordHeaderLen : RecordHeaderLen+r.capLen]
		b = b[RecordHeaderLen+r.capLen:]
		f.records = append(f.records, r)
	}
	return f, nil
}

func mustRead(t testing.TB, path string) file {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := readPcap(b)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return f
}

// ipv4UDP returns an IPv4 UDP packet from 10.0.0.1:5000 to 10.0.0.101:9
// with payload, checksums included.
func ipv4UDP(id uint16, payload []byte) []byte {
	p := make([]byte, 28+len(payload))
	be := binary.BigEndian
	p[0] = 0x45
	be.PutUint16(p[2:], uint16(len(p)))
	be.PutUint16(p[4:], id)
	p[8], p[9] = 64, 17
	copy(p[12:], []byte{10, 0, 0, 1})
	copy(p[16:], []byte{10, 0, 0, 101})
	be.PutUint16(p[10:], ^sum16(p[:20], 0))
	be.PutUint16(p[20:], 5000)
	be.PutUint16(p[22:], 9)
	be.PutUint16(p[24:], uint16(8+len(payload)))
	copy(p[28:], payload)
	pseudo := append(append([]byte{}, p[12:20]...), 0, 17, byte((8+len(payload))>>8), byte(8+len(payload)))
	c := ^sum16(p[20:], sum16(pseudo, 0))
	if c == 0 {
		c = 0xffff
	}
	be.PutUint16(p[26:], c)
	return p
}

// ipv6UDP returns an IPv6 UDP packet from fd00::1 to fd00::101.
func ipv6UDP(payload []byte) []byte {
	p := make([]byte, 48+len(payload))
	be := binary.BigEndian
	p[0] = 0x60
	be.PutUint16(p[4:], uint16(8+len(payload)))
	p[6], p[7] = 17, 64
	p[8], p[9], p[23] = 0xfd, 0, 1
	p[24], p[25], p[38], p[39] = 0xfd, 0, 1, 1
	be.PutUint16(p[40:], 5000)
	be.PutUint16(p[42:], 9)
	be.PutUint16(p[44:], uint16(8+len(payload)))
	copy(p[48:], payload)
	var pseudo []byte
	pseudo = append(pseudo, p[8:40]...)
	pseudo = append(pseudo, 0, 0, byte((8+len(payload))>>8), byte(8+len(payload)), 0, 0, 0, 17)
	c := ^sum16(p[40:], sum16(pseudo, 0))
	if c == 0 {
		c = 0xffff
	}
	be.PutUint16(p[46:], c)
	return p
}

// sum16 adds b to the ones' complement sum s.
func sum16(b []byte, s uint16) uint16 {
	acc := uint32(s)
	for i := 0; i+1 < len(b); i += 2 {
		acc += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		acc += uint32(b[len(b)-1]) << 8
	}
	for acc > 0xffff {
		acc = acc>>16 + acc&0xffff
	}
	return uint16(acc)
}

var epoch = time.Date(2026, 5, 1, 12, 0, 0, 123456789, time.UTC)

func TestWritesWhatItIsGiven(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.pcap")
	w, err := Open(path, Options{Snaplen: 100})
	if err != nil {
		t.Fatal(err)
	}
	short, long := ipv4UDP(1, []byte("hello")), ipv4UDP(2, bytes.Repeat([]byte{0xab}, 400))
	if err := w.WritePacket(epoch, short); err != nil {
		t.Fatal(err)
	}
	if err := w.WritePacket(epoch.Add(1500*time.Millisecond+1), long); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f := mustRead(t, path)
	if f.magic != magicNanos || f.snaplen != 100 || f.linkType != 101 || len(f.records) != 2 {
		t.Fatalf("file %+v", f)
	}
	r0, r1 := f.records[0], f.records[1]
	if r0.sec != uint32(epoch.Unix()) || r0.frac != 123456789 || r0.capLen != 33 || r0.origLen != 33 || !bytes.Equal(r0.data, short) {
		t.Errorf("first record %+v", r0)
	}
	if r1.sec != uint32(epoch.Unix())+1 || r1.frac != 623456790 || r1.capLen != 100 || r1.origLen != 428 || !bytes.Equal(r1.data, long[:100]) {
		t.Errorf("second record %+v", r1)
	}
	st := w.Stats()
	if st != (Stats{Packets: 2, Truncated: 1, Bytes: 24 + 16 + 33 + 16 + 100, Files: 1}) {
		t.Errorf("stats %+v", st)
	}
}

func TestMicrosecondsAndLinkType(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.pcap")
	w, err := Open(path, Options{Microseconds: true, LinkType: LinkTypeIPv6})
	if err != nil {
		t.Fatal(err)
	}
	w.WritePacket(epoch, ipv6UDP([]byte("x")))
	w.WritePacket(time.Unix(-5, 0), ipv6UDP([]byte("before 1970")))
	w.Close()
	f := mustRead(t, path)
	if f.magic != magicMicros || f.snaplen != DefaultSnaplen || f.linkType != 229 {
		t.Fatalf("header %+v", f)
	}
	if r := f.records[0]; r.frac != 123456 {
		t.Errorf("microseconds %d, want 123456", r.frac)
	}
	if r := f.records[1]; r.sec != 0 || r.frac != 0 {
		t.Errorf("a time before 1970 is written as %d.%d, want the epoch", r.sec, r.frac)
	}
}

func TestRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "up.pcap")
	pkt := ipv4UDP(7, make([]byte, 72)) // 100 bytes: records of 116
	// Room for three records per file: 24 + 3*116 = 372.
	w, err := Open(path, Options{MaxFileBytes: 372 + 115, MaxFiles: 3})
	if err != nil {
		t.Fatal(err)
	}
	var errs []error
	for i := range 11 {
		errs = append(errs, w.WritePacket(epoch.Add(time.Duration(i)*time.Millisecond), pkt))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for i, err := range errs {
		if want := error(nil); i >= 9 {
			if !errors.Is(err, ErrFull) {
				t.Errorf("packet %d: %v, want ErrFull", i, err)
			}
		} else if err != want {
			t.Errorf("packet %d: %v", i, err)
		}
	}
	st := w.Stats()
	if st != (Stats{Packets: 9, Bytes: 3 * 372, Files: 3, NotWritten: 2, Full: true}) {
		t.Errorf("stats %+v", st)
	}
	names := []string{"up.pcap", "up.1.pcap", "up.2.pcap"}
	for i, n := range names {
		f := mustRead(t, filepath.Join(dir, n))
		if len(f.records) != 3 {
			t.Fatalf("%s: %d records, want 3", n, len(f.records))
		}
		for j, r := range f.records {
			want := epoch.Add(time.Duration(3*i+j) * time.Millisecond)
			if r.sec != uint32(want.Unix()) || r.frac != uint32(want.Nanosecond()) {
				t.Errorf("%s record %d: time %d.%09d, want %v", n, j, r.sec, r.frac, want)
			}
		}
	}
	if got, _ := filepath.Glob(filepath.Join(dir, "*")); len(got) != 3 {
		t.Errorf("files %q, want %q", got, names)
	}
	if err := w.WritePacket(epoch, pkt); !errors.Is(err, ErrClosed) || w.Stats().NotWritten != 3 {
		t.Errorf("after Close: %v, %+v", err, w.Stats())
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestUnlimitedFilesAndOversizedPacket(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cap") // no extension
	w, err := Open(path, Options{MaxFileBytes: 100})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		// 200 bytes: each file holds one packet, over the limit.
		if err := w.WritePacket(epoch, make([]byte, 200+i)); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	for i := range 5 {
		f := mustRead(t, FileName(path, i))
		if len(f.records) != 1 || f.records[0].origLen != uint32(200+i) {
			t.Errorf("file %d: %+v", i, f.records)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "cap.3")); err != nil {
		t.Error(err)
	}
}

// TestOpenInReplacesLinks: in an output folder, a capture's files (the
// first and those it rotates to) replace links of their names, and what
// the links pointed to is not written.
func TestOpenInReplacesLinks(t *testing.T) {
	base := t.TempDir()
	outside := filepath.Join(base, "outside")
	if err := os.WriteFile(outside, []byte("outside\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := outdir.Make(filepath.Join(base, "out"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, name := range []string{"cap.pcap", "cap.1.pcap"} {
		if err := os.Symlink(outside, filepath.Join(d.Path(), name)); err != nil {
			t.Fatal(err)
		}
	}
	w, err := OpenIn(d, "cap.pcap", Options{MaxFileBytes: 100})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := w.WritePacket(epoch, make([]byte, 200+i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if f := mustRead(t, FileName(d.Join("cap.pcap"), i)); len(f.records) != 1 {
			t.Errorf("file %d: %+v", i, f.records)
		}
	}
	if b, err := os.ReadFile(outside); err != nil || string(b) != "outside\n" {
		t.Errorf("the file the links pointed to: %q, %v", b, err)
	}
}

func TestFileName(t *testing.T) {
	for _, tc := range []struct {
		path string
		i    int
		want string
	}{
		{"a/up.pcap", 0, "a/up.pcap"},
		{"a/up.pcap", 1, "a/up.1.pcap"},
		{"a/up.pcap", 12, "a/up.12.pcap"},
		{"a.d/up", 2, "a.d/up.2"},
		{"up.x.pcapng", 1, "up.x.1.pcapng"},
	} {
		if got := FileName(tc.path, tc.i); got != tc.want {
			t.Errorf("FileName(%q, %d) = %q, want %q", tc.path, tc.i, got, tc.want)
		}
	}
}

func TestBadOptions(t *testing.T) {
	dir := t.TempDir()
	for _, o := range []Options{{Snaplen: -1}, {Snaplen: DefaultSnaplen + 1}, {MaxFileBytes: 40}, {MaxFiles: -2}, {BufferSize: -1}} {
		if _, err := Open(filepath.Join(dir, "x.pcap"), o); err == nil {
			t.Errorf("Open with %+v: no error", o)
		}
	}
	if _, err := Open(filepath.Join(dir, "no", "such", "x.pcap"), Options{}); err == nil {
		t.Error("Open in a missing folder: no error")
	}
}

func TestWriteErrorStopsTheWriter(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full to fail writes on")
	}
	w, err := Open("/dev/full", Options{BufferSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	pkt := make([]byte, 100) // larger than the buffer: written through at once
	err1 := w.WritePacket(epoch, pkt)
	err2 := w.WritePacket(epoch, pkt)
	cerr := w.Close()
	if err1 == nil || err2 != err1 || cerr != err1 {
		t.Fatalf("errors %v, %v, Close %v: want the same write error", err1, err2, cerr)
	}
	if st := w.Stats(); st.Packets != 0 || st.NotWritten != 2 {
		t.Errorf("stats %+v", st)
	}
}

func TestConcurrentWriters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.pcap")
	w, err := Open(path, Options{BufferSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	const writers, each = 8, 400
	var wg sync.WaitGroup
	for g := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				payload := []byte(fmt.Sprintf("writer %d packet %04d", g, i))
				if err := w.WritePacket(epoch.Add(time.Duration(i)), ipv4UDP(uint16(g), payload)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f := mustRead(t, path)
	if len(f.records) != writers*each {
		t.Fatalf("%d records, want %d", len(f.records), writers*each)
	}
	next := make([]int, writers)
	for _, r := range f.records {
		var g, i int
		if _, err := fmt.Sscanf(string(r.data[28:]), "writer %d packet %04d", &g, &i); err != nil || g >= writers || i != next[g] {
			t.Fatalf("record %q out of order or damaged (want packet %d of writer %d)", r.data[28:], next[g], g)
		}
		next[g]++
	}
}

func TestWritePacketDoesNotAllocate(t *testing.T) {
	w, err := Open(filepath.Join(t.TempDir(), "x.pcap"), Options{Snaplen: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	pkt := ipv4UDP(1, make([]byte, 1400))
	now := epoch
	if n := testing.AllocsPerRun(10000, func() {
		now = now.Add(time.Microsecond)
		w.WritePacket(now, pkt)
	}); n != 0 {
		t.Errorf("%v allocations per packet, want 0", n)
	}
}

func BenchmarkWritePacket(b *testing.B) {
	w, err := Open(filepath.Join(b.TempDir(), "x.pcap"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	pkt := ipv4UDP(1, make([]byte, 1472))
	b.SetBytes(int64(len(pkt)))
	b.ReportAllocs()
	now := epoch
	for b.Loop() {
		now = now.Add(time.Microsecond)
		w.WritePacket(now, pkt)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "packets/s")
}

// FuzzWritePacket writes packets cut from arbitrary bytes with arbitrary
// options and checks that every file parses strictly and holds exactly
// the packets the Writer reports, in order, each cut to the snap length.
func FuzzWritePacket(f *testing.F) {
	f.Add([]byte("\x05hello\x00\x03abc"), uint16(0), uint16(0), uint8(0), false)
	f.Add(bytes.Repeat([]byte{0xff, 0x45}, 300), uint16(60), uint16(200), uint8(2), true)
	f.Add([]byte{0, 0, 0}, uint16(1), uint16(41), uint8(1), false)
	f.Fuzz(func(t *testing.T, data []byte, snap, maxFile uint16, maxFiles uint8, micro bool) {
		o := Options{Snaplen: int(snap), MaxFileBytes: int64(maxFile), MaxFiles: int(maxFiles), Microseconds: micro, BufferSize: 32}
		if o.MaxFileBytes > 0 && o.MaxFileBytes < 41 {
			o.MaxFileBytes += 41
		}
		// Packets: a length byte, then that many bytes (or what is left).
		var pkts [][]byte
		for len(data) > 0 {
			n := min(int(data[0]), len(data)-1)
			pkts = append(pkts, data[1:1+n])
			data = data[1+n:]
		}
		// At most 256 packets, so at most 256 files: the rotation paths
		// are all reached with far fewer, and files are slow.
		pkts = pkts[:min(len(pkts), 256)]
		path := filepath.Join(t.TempDir(), "f.pcap")
		w, err := Open(path, o)
		if err != nil {
			t.Fatal(err)
		}
		for i, p := range pkts {
			err := w.WritePacket(time.Unix(int64(i)*7919, int64(i)*999_999_937%1e9), p)
			if err != nil && !errors.Is(err, ErrFull) {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		st := w.Stats()
		if st.Packets+st.NotWritten != uint64(len(pkts)) {
			t.Fatalf("stats %+v for %d packets", st, len(pkts))
		}
		snaplen := o.Snaplen
		if snaplen == 0 {
			snaplen = DefaultSnaplen
		}
		var got []record
		var size uint64
		for i := range st.Files {
			b, err := os.ReadFile(FileName(path, i))
			if err != nil {
				t.Fatal(err)
			}
			fl, err := readPcap(b)
			if err != nil {
				t.Fatalf("file %d: %v", i, err)
			}
			if o.MaxFileBytes > 0 && int64(len(b)) > o.MaxFileBytes && len(fl.records) > 1 {
				t.Fatalf("file %d: %d bytes with %d records, over the limit %d", i, len(b), len(fl.records), o.MaxFileBytes)
			}
			size += uint64(len(b))
			got = append(got, fl.records...)
		}
		if size != st.Bytes || uint64(len(got)) != st.Packets {
			t.Fatalf("files hold %d bytes, %d records; stats %+v", size, len(got), st)
		}
		var truncated uint64
		for i, r := range got {
			p := pkts[i]
			want := p[:min(len(p), snaplen)]
			if !bytes.Equal(r.data, want) || int(r.origLen) != len(p) || r.sec != uint32(i*7919) {
				t.Fatalf("record %d: %+v, want %x (len %d)", i, r, want, len(p))
			}
			if len(want) < len(p) {
				truncated++
			}
		}
		if truncated != st.Truncated {
			t.Fatalf("%d truncated, stats say %d", truncated, st.Truncated)
		}
		if st.Full != (st.NotWritten > 0) {
			t.Fatalf("stats %+v", st)
		}
	})
}

// TestSortInstants: with SortInstants, the packets of one instant are
// written sorted by their bytes whatever order they came in (several
// writers racing, as goroutines on a virtual clock do), instants stay in
// time order, truncation keeps the original length, Flush and Close write
// what is held, and more than maxHeld packets of one instant are all
// written. Without it, packets keep the order they came in.
func TestSortInstants(t *testing.T) {
	pk := func(s string) []byte { return ipv4UDP(1, []byte(s)) }
	t1, t2 := epoch.Add(time.Millisecond), epoch.Add(2*time.Millisecond)
	for _, sorted := range []bool{true, false} {
		path := filepath.Join(t.TempDir(), "x.pcap")
		w, err := Open(path, Options{SortInstants: sorted, Snaplen: 40})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []struct {
			t time.Time
			s string
		}{{t1, "b-a-long-payload"}, {t1, "a"}, {t1, "c"}, {t2, "z"}, {t2, "y"}} {
			if err := w.WritePacket(p.t, pk(p.s)); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		f := mustRead(t, path)
		var got []string
		for _, r := range f.records {
			got = append(got, fmt.Sprintf("%d:%s/%d", r.frac-uint32(epoch.Nanosecond()), r.data[28:], r.origLen-28))
		}
		// Sorted by their bytes: the IPv4 header first (its total
		// length, then its checksum), then the payload.
		want := "1000000:c/1 1000000:a/1 1000000:b-a-long-pay/16 2000000:z/1 2000000:y/1"
		if !sorted {
			want = "1000000:b-a-long-pay/16 1000000:a/1 1000000:c/1 2000000:z/1 2000000:y/1"
		}
		if g := strings.Join(got, " "); g != want {
			t.Errorf("SortInstants %v: records %s, want %s", sorted, g, want)
		}
		for i := 1; sorted && i < len(f.records); i++ {
			a, b := f.records[i-1], f.records[i]
			if a.frac == b.frac && bytes.Compare(a.data, b.data) > 0 {
				t.Errorf("records %d and %d of one instant out of byte order", i-1, i)
			}
		}
		w.Close()
	}
	path := filepath.Join(t.TempDir(), "many.pcap")
	w, err := Open(path, Options{SortInstants: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range maxHeld + 10 {
		w.WritePacket(t1, pk(fmt.Sprintf("%05d", maxHeld+10-i)))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if f := mustRead(t, path); len(f.records) != maxHeld+10 {
		t.Errorf("%d records of one instant written, want %d", len(f.records), maxHeld+10)
	}
}

// TestSortInstantsRacingWriters: writers racing within each instant give
// the same file every time.
func TestSortInstantsRacingWriters(t *testing.T) {
	run := func() []byte {
		path := filepath.Join(t.TempDir(), "x.pcap")
		w, err := Open(path, Options{SortInstants: true})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 50 {
			at := epoch.Add(time.Duration(i) * time.Millisecond)
			var wg sync.WaitGroup
			for g := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					w.WritePacket(at, ipv4UDP(uint16(g), []byte(fmt.Sprintf("writer %d instant %d", g, i))))
				}()
			}
			wg.Wait()
		}
		w.Close()
		b, _ := os.ReadFile(path)
		return b
	}
	first := run()
	for range 5 {
		if !bytes.Equal(run(), first) {
			t.Fatal("two captures of the same packets at the same instants differ")
		}
	}
}
