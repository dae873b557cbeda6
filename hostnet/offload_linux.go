package hostnet

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/netjam/netjam/netif"
)

// Segmentation and checksum offload on a TUN device.
//
// Without offload, one MTU-sized packet per read(2) and write(2). With
// TUNConfig.Offload, every packet carries a virtio-net header
// (IFF_VNET_HDR), and the kernel may hand over, and take, TCP segments of
// up to 64 KiB that stand for many MTU-sized ones (TSO, TUN_F_TSO4 and
// TUN_F_TSO6) with checksums left to the receiver (TUN_F_CSUM), as
// wireguard-go and gVisor's fdbased endpoint use it: a 64 KiB segment is
// one system call instead of 45. water cannot set IFF_VNET_HDR, so a
// device with offload is opened with the TUNSETIFF ioctl directly; one
// without is opened with water.

// Linux's TUN interface (linux/if_tun.h, linux/virtio_net.h).
const (
	iffVnetHdr = 0x4000
	tunFCsum   = 0x01
	tunFTSO4   = 0x02
	tunFTSO6   = 0x04

	vnetHdrLen         = 10 // struct virtio_net_hdr
	vnetFlagNeedsCsum  = 1
	vnetGSONone        = 0
	vnetGSOTCPv4       = 1
	vnetGSOTCPv6       = 4
	vnetGSOUDPL4       = 5
	udpChecksumOffset  = 6
	vnetGSOECN         = 0x80
	tcpChecksumOffset  = 16
	ip6AddrGenModeNone = 1 // IN6_ADDR_GEN_MODE_NONE
)

// openVnet opens /dev/net/tun with IFF_VNET_HDR for the device name (""
// lets the kernel choose), non-blocking and close-on-exec, and asks for
// checksum and TCP segmentation offload. tso reports whether the kernel
// agreed. Errors have water's shapes: the open's a bare Errno, an ioctl's
// an *os.SyscallError, so openError reads them alike.
func openVnet(name string, persistent bool) (f *os.File, ifname string, tso bool, err error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, "", false, err
	}
	fail := func(op string, err error) (*os.File, string, bool, error) {
		unix.Close(fd)
		return nil, "", false, os.NewSyscallError(op, err)
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return fail("ioctl", err)
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI | iffVnetHdr)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		return fail("ioctl", err)
	}
	if persistent {
		// As water does: keep a persistent device persistent.
		if err := unix.IoctlSetInt(fd, unix.TUNSETPERSIST, 1); err != nil {
			return fail("ioctl", err)
		}
	}
	tso = unix.IoctlSetInt(fd, unix.TUNSETOFFLOAD, tunFCsum|tunFTSO4|tunFTSO6) == nil
	return os.NewFile(uintptr(fd), "/dev/net/tun"), ifr.Name(), tso, nil
}

// ReadPacket reads one packet as Read does, with its GSO description. On
// a device with offload the packet may be a TCP segment of up to 64 KiB
// (buf needs netif.MaxGSOPacket bytes) and its TCP or UDP checksum may be
// left to the receiver (NeedsCsum, also for an ordinary packet); the
// caller splits or completes it. Without offload the GSO is always zero.
func (t *TUN) ReadPacket(buf []byte) (int, netif.GSO, error) {
	if !t.vnet {
		n, err := t.f.Read(buf)
		return n, netif.GSO{}, err
	}
	io := ioStates.Get().(*ioState)
	defer io.put()
	hdr := &io.hdr
	io.iov[0].Base = &hdr[0]
	io.iov[0].SetLen(vnetHdrLen)
	io.n = 1
	if len(buf) > 0 {
		io.iov[1].Base = &buf[0]
		io.iov[1].SetLen(len(buf))
		io.n = 2
	}
	if err := t.raw.Read(io.readFn); err != nil {
		return 0, netif.GSO{}, err
	}
	return t.readResult(io, len(buf))
}

// readResult interprets a readv(2) of the virtio-net header and a buffer
// of bufLen bytes. The count readv returns is checked against what was
// offered before it is used as a length: a short read (no whole header)
// or a count past the buffer (which a kernel bug or a changed header size
// would give) is an error, never a slice past the packet.
func (t *TUN) readResult(io *ioState, bufLen int) (int, netif.GSO, error) {
	n, errno, hdr := io.done, io.errno, &io.hdr
	switch {
	case errno != 0:
		return 0, netif.GSO{}, &os.PathError{Op: "readv", Path: t.name, Err: errno}
	case n < vnetHdrLen || n > uintptr(vnetHdrLen+bufLen):
		return 0, netif.GSO{}, &os.PathError{Op: "readv", Path: t.name, Err: fmt.Errorf("%w: %d bytes from a read of %d", syscall.EIO, n, vnetHdrLen+bufLen)}
	}
	return int(n) - vnetHdrLen, decodeVnet(hdr), nil
}

// decodeVnet reads the GSO description of a virtio-net header the kernel
// wrote.
func decodeVnet(hdr *[vnetHdrLen]byte) netif.GSO {
	var g netif.GSO
	if hdr[0]&vnetFlagNeedsCsum != 0 {
		g.NeedsCsum = true
		g.CsumStart = int(uint16(hdr[6]) | uint16(hdr[7])<<8)
		g.CsumOffset = int(uint16(hdr[8]) | uint16(hdr[9])<<8)
	}
	if typ := hdr[1] &^ vnetGSOECN; typ == vnetGSOTCPv4 || typ == vnetGSOTCPv6 {
		g.MSS = int(uint16(hdr[4]) | uint16(hdr[5])<<8) // host order: little-endian here
	}
	return g
}

// WritePacket hands the kernel one packet given as slices, as WriteVec
// does, with its GSO description. On a device with offload, a packet with
// g.MSS set is a TCP segment of up to 64 KiB that the kernel treats as
// its MSS-sized segments (receiving them at once, as GRO would); its TCP
// checksum field must hold the pseudo-header's sum, which the kernel
// completes (g.NeedsCsum). Without offload g must be zero.
func (t *TUN) WritePacket(pkt [][]byte, g netif.GSO) (int, error) {
	if !t.vnet {
		if g != (netif.GSO{}) {
			return 0, fmt.Errorf("hostnet: TUN %s: a GSO packet on a device without offload", t.name)
		}
		return t.WriteVec(pkt)
	}
	io := ioStates.Get().(*ioState)
	defer io.put()
	var first []byte
	if len(pkt) > 0 {
		first = pkt[0]
	}
	if err := encodeVnet(&io.hdr, first, g); err != nil {
		return 0, fmt.Errorf("hostnet: TUN %s: %w", t.name, err)
	}
	n, err := t.writev(io, true, pkt)
	return max(0, n-vnetHdrLen), err
}

// encodeVnet writes into hdr the virtio-net header of a packet described
// by g whose first slice is first: for a TCP segment standing for several
// (g.MSS) or one whose checksum the kernel completes (g.NeedsCsum), the
// segmentation type (ECN when the first segment carries CWR), the lengths
// of the headers and where the checksum goes, read from the packet's own
// IP and TCP headers, which must be in first. A zero g gives a zero
// header: an ordinary packet.
func encodeVnet(hdr *[vnetHdrLen]byte, first []byte, g netif.GSO) error {
	*hdr = [vnetHdrLen]byte{}
	if g.MSS == 0 && !g.NeedsCsum {
		return nil
	}
	if len(first) < 20 {
		return errors.New("a GSO packet's IP header must be in its first slice")
	}
	ipLen := int(first[0]&0x0f) * 4
	typ, proto := byte(vnetGSOTCPv4), first[9]
	if first[0]>>4 == 6 {
		ipLen, typ, proto = 40, vnetGSOTCPv6, first[6]
	}
	if proto == 17 {
		return encodeVnetUDP(hdr, first, ipLen, g)
	}
	if len(first) < ipLen+20 {
		return errors.New("a GSO packet's TCP header must be in its first slice")
	}
	tcpLen := int(first[ipLen+12]>>4) * 4
	hdr[0] = vnetFlagNeedsCsum
	if g.MSS > 0 {
		if first[ipLen+13]&0x80 != 0 { // CWR: the first segment keeps it
			typ |= vnetGSOECN
		}
		hdr[1] = typ
		putLE16(hdr[2:], ipLen+tcpLen) // hdr_len
		putLE16(hdr[4:], g.MSS)        // gso_size
	}
	putLE16(hdr[6:], ipLen)             // csum_start
	putLE16(hdr[8:], tcpChecksumOffset) // csum_offset
	return nil
}

// encodeVnetUDP is encodeVnet for a UDP datagram whose IP header is ipLen
// bytes: one whose checksum the kernel completes, or a run of datagrams of
// g.MSS payload bytes each (the last may be shorter) that the kernel
// splits (GSO_UDP_L4, see TUN.UDPOffload).
func encodeVnetUDP(hdr *[vnetHdrLen]byte, first []byte, ipLen int, g netif.GSO) error {
	if len(first) < ipLen+8 {
		return errors.New("a GSO packet's UDP header must be in its first slice")
	}
	hdr[0] = vnetFlagNeedsCsum
	if g.MSS > 0 {
		hdr[1] = vnetGSOUDPL4
		putLE16(hdr[2:], ipLen+8) // hdr_len
		putLE16(hdr[4:], g.MSS)   // gso_size
	}
	putLE16(hdr[6:], ipLen)             // csum_start
	putLE16(hdr[8:], udpChecksumOffset) // csum_offset
	return nil
}

// ioState is what one readv(2) or writev(2) on the device needs, pooled so
// that a packet's I/O allocates nothing: the vectors, the virtio-net
// header, the results, and the functions the poller calls, made once.
type ioState struct {
	iov             [1 + maxIovecs]unix.Iovec
	n               int
	hdr             [vnetHdrLen]byte
	done            uintptr
	errno           syscall.Errno
	readFn, writeFn func(fd uintptr) bool
}

var ioStates = sync.Pool{New: func() any {
	s := new(ioState)
	s.readFn, s.writeFn = s.read, s.write
	return s
}}

func (s *ioState) read(fd uintptr) bool {
	s.done, _, s.errno = unix.Syscall(unix.SYS_READV, fd, uintptr(unsafe.Pointer(&s.iov[0])), uintptr(s.n))
	return s.errno != unix.EAGAIN
}

func (s *ioState) write(fd uintptr) bool {
	s.done, _, s.errno = unix.Syscall(unix.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&s.iov[0])), uintptr(s.n))
	return true // never wait for the device to drain
}

// put returns s to the pool, holding no reference to packet memory.
func (s *ioState) put() {
	clear(s.iov[:s.n])
	s.n = 0
	ioStates.Put(s)
}

func putLE16(b []byte, v int) { b[0], b[1] = byte(v), byte(v>>8) }

// UDPOffload reports whether the device takes runs of UDP datagrams as
// one packet (virtio-net's GSO_UDP_L4, netif.GSO.MSS on a UDP packet),
// which the kernel splits into the datagrams before any socket sees
// them: a device with offload on Linux 6.2 or later, whose
// virtio_net_hdr_to_skb knows the type. Nothing needs negotiating for
// writes; the device never hands over such runs (TUN_F_USO4 and
// TUN_F_USO6 stay off), so reads are unchanged.
func (t *TUN) UDPOffload() bool { return t.vnet && kernelAtLeast(6, 2) }

// kernelAtLeast reports whether the running kernel's release is major.minor
// or later.
func kernelAtLeast(major, minor int) bool {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return false
	}
	var ma, mi int
	if _, err := fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &ma, &mi); err != nil {
		return false
	}
	return ma > major || ma == major && mi >= minor
}
