// Package capture writes packets to pcap files, the classic libpcap
// format that Wireshark, tshark and tcpdump read.
//
// A Writer takes raw IP packets (IPv4 or IPv6, no link-layer header:
// LINKTYPE_RAW by default), each with the time to record for it: the
// emulator passes the packet's exact logical time, so a capture shows
// what the emulated path did to the nanosecond, not when the process
// happened to get to it. Timestamps are written with nanosecond
// resolution by default (the pcap variant with magic 0xa1b23c4d, which
// libpcap 1.5 and later and Wireshark read).
//
// A Writer bounds what it keeps and what it writes: a buffer of fixed size
// (nothing is allocated per packet once it is open), a snap length per
// packet, and optionally a size limit per file with a maximum number of
// files. When a file is full, the next packet goes to the next file
// (name.pcap, then name.1.pcap, name.2.pcap, ...); when the last allowed
// file is full, the Writer stops writing and counts the packets it did not
// write (Stats.NotWritten). It never overwrites what it wrote: the first
// packets of a run are usually the ones that matter (a handshake, the
// start of a queue build-up).
//
// A Writer is safe for concurrent use: one mutex guards it, held for the
// copy of one packet into the buffer (and, once per buffer size, a write
// to the file).
package capture

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/netjam/netjam/outdir"
)

// LinkType is the link-layer header type of a capture's packets (pcap's
// LINKTYPE_ values, https://www.tcpdump.org/linktypes.html).
type LinkType uint32

// Link types of raw IP packets.
const (
	// LinkTypeRaw is raw IP: each packet is IPv4 or IPv6, told apart by
	// its version nibble. The default.
	LinkTypeRaw LinkType = 101
	// LinkTypeIPv4 and LinkTypeIPv6 are raw IP of one version only.
	LinkTypeIPv4 LinkType = 228
	LinkTypeIPv6 LinkType = 229
)

// Sizes of the pcap format.
const (
	// FileHeaderLen is the size of a pcap file's header.
	FileHeaderLen = 24
	// RecordHeaderLen is the size of each packet record's header.
	RecordHeaderLen = 16
)

// Defaults of Options.
const (
	// DefaultSnaplen is tcpdump's default snap length: larger than any IP
	// packet, so nothing is truncated.
	DefaultSnaplen = 262144
	// DefaultBufferSize is the write buffer's size.
	DefaultBufferSize = 64 << 10
)

// The magic numbers of the two pcap variants, written little-endian.
const (
	magicMicros = 0xa1b2c3d4
	magicNanos  = 0xa1b23c4d
)

// Options configure a Writer. The zero value writes raw IP with
// nanosecond timestamps, no truncation and no size limit.
type Options struct {
	// Snaplen is the largest number of bytes written of a packet; a
	// longer packet is truncated and its record keeps its original length
	// (Wireshark shows "Packet size limited during capture"). 0 means
	// DefaultSnaplen, which is also the largest allowed.
	Snaplen int
	// MaxFileBytes limits the size of each file, headers included: a
	// packet that would make the file larger goes to the next file. A
	// file holds at least one packet, even one larger than the limit
	// (with Snaplen at most MaxFileBytes-40 no file exceeds it). 0 means
	// no limit: one file.
	MaxFileBytes int64
	// MaxFiles is the number of files that may be written, the first
	// included; once the last is full, packets are counted in
	// Stats.NotWritten and not written. 0 means no limit. It has no
	// effect without MaxFileBytes.
	MaxFiles int
	// LinkType is the packets' link type; 0 means LinkTypeRaw.
	LinkType LinkType
	// Microseconds writes timestamps with microsecond resolution (the
	// original pcap format, magic 0xa1b2c3d4) for tools too old for
	// nanoseconds; the default is nanoseconds.
	Microseconds bool
	// BufferSize is the size of the write buffer, the memory a Writer
	// holds for packets; 0 means DefaultBufferSize.
	BufferSize int
	// SortInstants holds the packets of one timestamp until one of a
	// later timestamp comes (or Flush, or Close) and writes them sorted
	// by their bytes. On a virtual clock (clock.Virtual) many packets
	// share an instant, and the goroutines that record them do so in
	// whatever order the scheduler runs them: sorted, two runs of one
	// seed write the same file. It holds at most maxHeld packets or
	// maxHeldBytes, and writes what it holds when either is reached.
	SortInstants bool
}

// The bounds of what SortInstants holds.
const (
	maxHeld      = 4096
	maxHeldBytes = 8 << 20
)

// Stats are a Writer's counters.
type Stats struct {
	// Packets is the number of packets written, truncated or not.
	Packets uint64
	// Truncated is how many of them were cut to Snaplen.
	Truncated uint64
	// Bytes is the number of bytes written to the files, headers
	// included (some may still be in the buffer until Flush or Close).
	Bytes uint64
	// Files is the number of files opened.
	Files int
	// NotWritten counts the packets passed to WritePacket and not
	// written: every allowed file was full (Full), a write had failed, or
	// the Writer was closed. They are in no file.
	NotWritten uint64
	// Full reports that the last allowed file is full: no more packets
	// will be written.
	Full bool
}

// Errors of WritePacket. Both mean the packet was counted in
// Stats.NotWritten.
var (
	// ErrFull is returned for a packet that was not written because
	// every file the Options allow is full.
	ErrFull = errors.New("capture: every file is full (Options.MaxFiles of Options.MaxFileBytes)")
	// ErrClosed is returned for a packet that came after Close.
	ErrClosed = errors.New("capture: writer closed")
)

// Writer writes packets to a pcap file, rotating to further files when
// Options limit their size. Its methods may be called from several
// goroutines.
type Writer struct {
	create  func(name string) (*os.File, error) // makes a file of the capture
	name    string                              // the first file's name; the others derive from it
	o       Options
	hdr     [FileHeaderLen]byte // the file header, the same in every file
	maxFile int64               // o.MaxFileBytes, or no limit

	mu     sync.Mutex // guards everything below
	f      *os.File   // the current file; nil once full, failed or closed
	w      *bufio.Writer
	size   int64 // bytes in the current file, buffered ones included
	rec    [RecordHeaderLen]byte
	err    error // the first write error: no more writes after it
	closed bool
	stats  Stats

	// held are the packets of one instant that SortInstants holds, their
	// captured bytes in heldBuf; reused from instant to instant.
	held    []heldPacket
	heldBuf []byte
}

// heldPacket is a packet SortInstants holds: its time, its captured
// bytes (heldBuf[off:off+n]) and its original length.
type heldPacket struct {
	t       time.Time
	off, n  int
	origLen int
}

// Open creates the capture file path (truncating it if it exists, as a
// shell's redirection does) and writes its header. Further files, when
// Options limit the file size, are named after it: path name.pcap gives
// name.1.pcap, name.2.pcap, and so on. Open does not remove files of an
// earlier capture with the same name.
func Open(path string, o Options) (*Writer, error) {
	dir := filepath.Dir(path)
	return open(filepath.Base(path), o, func(name string) (*os.File, error) {
		return os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	})
}

// OpenIn is Open for the file name in the output folder d, whose files it
// makes as outdir.Dir.Create does: new, in place of a file or a link of
// the name, never through the link. d must stay open until the Writer is
// closed.
func OpenIn(d *outdir.Dir, name string, o Options) (*Writer, error) {
	return open(name, o, d.Create)
}

func open(name string, o Options, create func(string) (*os.File, error)) (*Writer, error) {
	if o.Snaplen < 0 || o.MaxFileBytes < 0 || o.MaxFiles < 0 || o.BufferSize < 0 {
		return nil, fmt.Errorf("capture: negative option in %+v", o)
	}
	if o.Snaplen > DefaultSnaplen {
		// libpcap's readers cap the snap length at 262144 bytes.
		return nil, fmt.Errorf("capture: Snaplen %d is over the format's limit of %d", o.Snaplen, DefaultSnaplen)
	}
	if o.Snaplen == 0 {
		o.Snaplen = DefaultSnaplen
	}
	if o.LinkType == 0 {
		o.LinkType = LinkTypeRaw
	}
	if o.BufferSize == 0 {
		o.BufferSize = DefaultBufferSize
	}
	if o.MaxFileBytes > 0 && o.MaxFileBytes < FileHeaderLen+RecordHeaderLen+1 {
		return nil, fmt.Errorf("capture: MaxFileBytes %d is too small to hold a packet (at least %d)", o.MaxFileBytes, FileHeaderLen+RecordHeaderLen+1)
	}
	w := &Writer{create: create, name: name, o: o, maxFile: o.MaxFileBytes}
	if w.maxFile == 0 {
		w.maxFile = 1<<63 - 1
	}
	magic := uint32(magicNanos)
	if o.Microseconds {
		magic = magicMicros
	}
	le := binary.LittleEndian
	le.PutUint32(w.hdr[0:], magic)
	le.PutUint16(w.hdr[4:], 2) // version 2.4
	le.PutUint16(w.hdr[6:], 4)
	// thiszone and sigfigs (8:16) are 0: timestamps are UTC.
	le.PutUint32(w.hdr[16:], uint32(o.Snaplen))
	le.PutUint32(w.hdr[20:], uint32(o.LinkType))
	if err := w.openFile(0); err != nil {
		return nil, err
	}
	return w, nil
}

// FileName returns the name of the file of index i of a capture whose
// first file is path: path itself for 0, else path with ".i" before its
// extension (name.pcap gives name.1.pcap; name gives name.1).
func FileName(path string, i int) string {
	if i == 0 {
		return path
	}
	ext := filepath.Ext(path)
	return fmt.Sprintf("%s.%d%s", strings.TrimSuffix(path, ext), i, ext)
}

// openFile creates file i and writes its header. w.mu is held, or w is
// not shared yet.
func (w *Writer) openFile(i int) error {
	f, err := w.create(FileName(w.name, i))
	if err != nil {
		return fmt.Errorf("capture: %w", err)
	}
	if w.w == nil {
		w.w = bufio.NewWriterSize(f, w.o.BufferSize)
	} else {
		w.w.Reset(f)
	}
	w.f = f
	w.size = FileHeaderLen
	w.stats.Files++
	w.stats.Bytes += FileHeaderLen
	_, err = w.w.Write(w.hdr[:])
	return err // bufio.Writer.Write into an empty buffer of 24 bytes or more cannot fail
}

// WritePacket writes pkt, recorded at time t, cutting it to Options.Snaplen.
// It returns nil when the packet was written (to the buffer: see Flush),
// else ErrFull, ErrClosed or the write error that stopped the Writer; the
// packet is then counted in Stats.NotWritten. After a write error (a full
// disk, say) every call returns that error, and so does Close.
//
// t is written as seconds and nanoseconds (or microseconds) since the Unix
// epoch, seconds modulo 2^32 as the format has it; a t before 1970 is
// written as the epoch. pkt is not retained.
func (w *Writer) WritePacket(t time.Time, pkt []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.o.SortInstants && !w.closed {
		return w.hold(t, pkt)
	}
	return w.write(t, pkt[:min(len(pkt), w.o.Snaplen)], len(pkt))
}

// hold keeps pkt among the packets of its instant, after writing those of
// an earlier one (or all, when the bounds are reached).
func (w *Writer) hold(t time.Time, pkt []byte) error {
	var err error
	if len(w.held) > 0 && (!t.Equal(w.held[0].t) || len(w.held) >= maxHeld || len(w.heldBuf)+len(pkt) > maxHeldBytes) {
		err = w.writeHeld()
	}
	c := pkt[:min(len(pkt), w.o.Snaplen)]
	w.held = append(w.held, heldPacket{t: t, off: len(w.heldBuf), n: len(c), origLen: len(pkt)})
	w.heldBuf = append(w.heldBuf, c...)
	return err
}

// writeHeld writes the packets held, sorted by their bytes, and returns
// the first error.
func (w *Writer) writeHeld() error {
	slices.SortStableFunc(w.held, func(a, b heldPacket) int {
		return bytes.Compare(w.heldBuf[a.off:a.off+a.n], w.heldBuf[b.off:b.off+b.n])
	})
	var first error
	for _, h := range w.held {
		if err := w.write(h.t, w.heldBuf[h.off:h.off+h.n], h.origLen); err != nil && first == nil {
			first = err
		}
	}
	w.held, w.heldBuf = w.held[:0], w.heldBuf[:0]
	return first
}

// write writes a packet of origLen bytes captured as c. w.mu is held.
func (w *Writer) write(t time.Time, c []byte, origLen int) error {
	switch {
	case w.closed:
		w.stats.NotWritten++
		return ErrClosed
	case w.err != nil:
		w.stats.NotWritten++
		return w.err
	case w.f == nil:
		w.stats.NotWritten++
		return ErrFull
	}
	capLen := len(c)
	recLen := int64(RecordHeaderLen + capLen)
	if w.size+recLen > w.maxFile && w.size > FileHeaderLen {
		if err := w.rotate(); err != nil {
			w.stats.NotWritten++
			return err
		}
	}
	var sec, frac int64
	if t.Unix() >= 0 {
		sec, frac = t.Unix(), int64(t.Nanosecond())
	}
	if w.o.Microseconds {
		frac /= 1000
	}
	le := binary.LittleEndian
	le.PutUint32(w.rec[0:], uint32(sec))
	le.PutUint32(w.rec[4:], uint32(frac))
	le.PutUint32(w.rec[8:], uint32(capLen))
	le.PutUint32(w.rec[12:], uint32(origLen))
	_, err := w.w.Write(w.rec[:])
	if err == nil {
		_, err = w.w.Write(c)
	}
	if err != nil {
		w.stats.NotWritten++
		return w.fail(err)
	}
	w.size += recLen
	w.stats.Bytes += uint64(recLen)
	w.stats.Packets++
	if capLen < origLen {
		w.stats.Truncated++
	}
	return nil
}

// rotate closes the current file and opens the next one, or marks the
// Writer full when the last allowed file is done. It returns ErrFull or
// a write error, nil when a new file is open.
func (w *Writer) rotate() error {
	if err := w.closeFile(); err != nil {
		return w.fail(err)
	}
	if w.o.MaxFiles > 0 && w.stats.Files >= w.o.MaxFiles {
		w.stats.Full = true
		return ErrFull
	}
	if err := w.openFile(w.stats.Files); err != nil {
		return w.fail(err)
	}
	return nil
}

// fail records the Writer's first write error and stops it: the file is
// closed (what reached it stays readable up to the last whole record; a
// partial last record is reported as cut short by readers) and no further
// packet is written. It returns the recorded error.
func (w *Writer) fail(err error) error {
	if w.err == nil {
		w.err = fmt.Errorf("capture: %w", err)
	}
	if w.f != nil {
		w.f.Close()
		w.f = nil
	}
	return w.err
}

// closeFile flushes and closes the current file.
func (w *Writer) closeFile() error {
	if w.f == nil {
		return nil
	}
	err := w.w.Flush()
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	w.f = nil
	return err
}

// Flush writes the buffered packets to the current file, so that a
// reader of the file (tshark -r while the run goes on) sees them.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.held) > 0 {
		w.writeHeld() // an error stays in w.err, returned below
	}
	if w.f == nil || w.err != nil {
		return w.err
	}
	if err := w.w.Flush(); err != nil {
		return w.fail(err)
	}
	return nil
}

// Close flushes and closes the current file. It returns the first write
// error the Writer met, if any. Later calls return nil; later packets are
// counted in Stats.NotWritten.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	if len(w.held) > 0 {
		w.writeHeld() // an error stays in w.err, returned below
	}
	w.closed = true
	if err := w.closeFile(); err != nil && w.err == nil {
		w.err = fmt.Errorf("capture: %w", err)
	}
	return w.err
}

// Stats returns the Writer's counters.
func (w *Writer) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats
}
