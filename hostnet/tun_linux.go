package hostnet

import (
	"fmt"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/songgao/water"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/netjam/netjam/netif"
)

// This file is the kernel's end of TUN mode: a TUN device (IFF_TUN |
// IFF_NO_PI, one IP packet per read or write, no link header) with the
// kernel's addresses, MTU and routes on it. The device is made with
// songgao/water and configured over netlink (vishvananda/netlink), never by
// running ip(8). Whatever OpenTUN adds it remembers, and Close removes
// exactly that. netlink_linux.go configures the device and tears it down,
// offload_linux.go carries packets with their GSO description, privilege.go
// says what a missing privilege needs.

// TUN is an open TUN device: the kernel's end of TUN mode. Read returns
// the IP packets the kernel sends into the device, Write hands it IP
// packets as if they had arrived on it.
//
// Read, Write and WriteVec may be called concurrently with each other and
// with Close; Close makes a blocked Read return an error wrapping
// os.ErrClosed.
type TUN struct {
	name  string
	index int
	mtu   int
	f     *os.File
	raw   syscall.RawConn
	// vnet: every packet carries a virtio-net header; tso: the kernel
	// agreed to segmentation offload.
	vnet, tso bool

	// Set by OpenTUN, then read only by teardown.
	nl       *netlink.Handle // a netlink socket in the device's namespace
	ns       netns.NsHandle
	attached bool           // the device existed before: attached, not created
	addrs    []netip.Prefix // addresses OpenTUN added
	routes   []netip.Prefix // routes OpenTUN added
	oldMTU   int            // attached: the MTU to restore, 0 if unchanged
	wasDown  bool           // attached: OpenTUN set it up, so Close sets it down

	once     sync.Once
	closeErr error
	// closed is set as Close begins: a write that fails after it
	// reports os.ErrClosed.
	closed atomic.Bool
}

// OpenTUN creates the TUN device cfg describes (or attaches to the
// persistent one of that name), sets its MTU, adds its addresses, sets it
// up and adds its routes, in that order. On any error everything done so
// far is undone before OpenTUN returns.
//
// Privileges: opening /dev/net/tun needs read-write access to it (mode
// 0666 on most systems); creating a device and configuring it need
// CAP_NET_ADMIN in the namespace's user namespace. Attaching to a
// persistent device one owns needs no capability, and neither does
// configuring it when it is configured already: OpenTUN changes nothing
// that is as cfg wants it. A missing privilege is reported as a
// *PrivilegeError, wrapping ErrPrivilege, that names the ways to get it.
//
// The device's file descriptor is close-on-exec, so a child process (an
// application under test) never keeps the device alive after netjam ends.
func OpenTUN(cfg TUNConfig) (*TUN, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("hostnet: TUN %q: %w", cfg.Name, err)
	}
	if out := outsideRoutes(cfg); len(out) > 0 && cfg.Netns == "" && !cfg.HostRoutes && setcapMode() {
		return nil, fmt.Errorf("hostnet: TUN %q: routes %v lie outside the device's networks and would change this machine's routing for every user: netjam has CAP_NET_ADMIN from its file (setcap) without being root, so it adds such routes only when asked explicitly (tun.host_routes: true)", cfg.Name, out)
	}
	t := &TUN{mtu: cfg.mtu(), ns: netns.None()}
	if err := t.open(cfg); err != nil {
		t.teardown()
		return nil, err
	}
	return t, nil
}

func (t *TUN) open(cfg TUNConfig) error {
	// In the caller's namespace nothing calls setns(2), which needs
	// CAP_SYS_ADMIN even to enter the namespace one is in: a user
	// attaching to a persistent device has no capability at all.
	var err error
	if cfg.Netns != "" {
		if t.ns, err = netns.GetFromPath(cfg.Netns); err != nil {
			return fmt.Errorf("hostnet: TUN: network namespace %q: %w", cfg.Netns, err)
		}
		t.nl, err = netlink.NewHandleAt(t.ns, unix.NETLINK_ROUTE)
	} else {
		t.nl, err = netlink.NewHandle(unix.NETLINK_ROUTE)
	}
	if err != nil {
		return fmt.Errorf("hostnet: TUN: netlink socket: %w", err)
	}

	// A device of that name that exists already must be a TUN device we
	// can attach to; it is then not ours to delete.
	var existing *netlink.Tuntap
	if cfg.Name != "" {
		l, err := t.nl.LinkByName(cfg.Name)
		switch {
		case err == nil:
			tt, ok := l.(*netlink.Tuntap)
			if !ok || tt.Mode != netlink.TUNTAP_MODE_TUN {
				kind := l.Type()
				if ok {
					kind = "TAP device"
				}
				return fmt.Errorf("hostnet: TUN: an interface named %q exists already and is not a TUN device (it is a %s): choose another name", cfg.Name, kind)
			}
			if tt.Flags&netlink.TUNTAP_MULTI_QUEUE != 0 {
				return fmt.Errorf("hostnet: TUN: the persistent device %q was made with multi_queue, which netjam does not use: recreate it without (sudo ip tuntap del dev %[1]s mode tun multi_queue && sudo ip tuntap add dev %[1]s mode tun user %s)", cfg.Name, userName())
			}
			existing = tt
		case !isLinkNotFound(err):
			return fmt.Errorf("hostnet: TUN: looking up %q: %w", cfg.Name, err)
		}
	}

	if err := t.openDevice(cfg, existing); err != nil {
		return err
	}
	t.attached = existing != nil
	l, err := t.nl.LinkByName(t.name)
	if err != nil {
		return fmt.Errorf("hostnet: TUN: the new device %q: %w", t.name, err)
	}
	t.index = l.Attrs().Index
	return t.configure(cfg, l)
}

// openDevice opens /dev/net/tun and creates or attaches the device, in
// the namespace t.ns.
func (t *TUN) openDevice(cfg TUNConfig, existing *netlink.Tuntap) error {
	type result struct {
		f     *os.File
		name  string
		tso   bool
		err   error
		setns bool // err is from entering the namespace
	}
	open := func() result {
		if cfg.Offload {
			f, name, tso, err := openVnet(cfg.Name, existing != nil)
			return result{f: f, name: name, tso: tso, err: err}
		}
		// water opens /dev/net/tun without O_CLOEXEC. Holding ForkLock
		// from the open until the flag is set keeps a concurrent
		// fork+exec (os/exec takes ForkLock) from inheriting the
		// descriptor, which would keep the device alive in the child.
		syscall.ForkLock.RLock()
		defer syscall.ForkLock.RUnlock()
		// water sets the persist flag to Persist on every open: true
		// for a persistent device, or it would turn it into one the
		// kernel deletes at Close.
		ifce, err := water.New(water.Config{
			DeviceType:             water.TUN,
			PlatformSpecificParams: water.PlatformSpecificParams{Name: cfg.Name, Persist: existing != nil},
		})
		if err != nil {
			return result{err: err}
		}
		f, ok := ifce.ReadWriteCloser.(*os.File)
		if !ok {
			ifce.Close()
			return result{err: fmt.Errorf("water returned a %T, not an *os.File", ifce.ReadWriteCloser)}
		}
		if rc, rerr := f.SyscallConn(); rerr == nil {
			rc.Control(func(fd uintptr) { unix.CloseOnExec(int(fd)) })
		}
		return result{f: f, name: ifce.Name()}
	}
	var r result
	if !t.ns.IsOpen() {
		// The caller's namespace: the device is made in the namespace
		// of the thread that opens /dev/net/tun, this one.
		r = open()
	} else {
		// Another namespace: the open runs on a thread of its own,
		// moved into t.ns and thrown away afterwards (onThread), so no
		// other goroutine ever runs in the namespace it was moved to.
		onThread(func() {
			if err := netns.Set(t.ns); err != nil {
				r = result{err: fmt.Errorf("hostnet: TUN: entering network namespace %q (needs CAP_SYS_ADMIN): %w", cfg.Netns, err), setns: true}
				return
			}
			r = open()
		})
	}
	if r.setns {
		return r.err
	}
	if r.err != nil {
		return openError(cfg, existing, r.err)
	}
	raw, err := r.f.SyscallConn()
	if err != nil {
		r.f.Close()
		return fmt.Errorf("hostnet: TUN: %w", err)
	}
	t.f, t.raw, t.name = r.f, raw, r.name
	t.vnet, t.tso = cfg.Offload, r.tso
	return nil
}

// Name returns the device's name, the kernel's choice when TUNConfig.Name
// was empty.
func (t *TUN) Name() string { return t.name }

// Index returns the device's interface index.
func (t *TUN) Index() int { return t.index }

// MTU returns the device's MTU: the largest packet Read returns.
func (t *TUN) MTU() int { return t.mtu }

// File returns the device's open file, to hand it to another process
// (SCM_RIGHTS); the TUN keeps owning it.
func (t *TUN) File() *os.File { return t.f }

// TUNFromFile wraps a TUN device opened elsewhere (another process, in
// another namespace, handed over with SCM_RIGHTS) and configured there:
// name and mtu as it has them; vnet says it was opened with virtio-net
// headers and tso that the kernel agreed to segmentation offload. The TUN
// owns f: Close closes it, and changes nothing else (whoever made the
// device configured it, and its namespace removes it).
func TUNFromFile(f *os.File, name string, mtu int, vnet, tso bool) (*TUN, error) {
	// A descriptor of its own, non-blocking, so that reads go through
	// Go's poller and Close wakes them; f is closed.
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("hostnet: TUN %s: %w", name, err)
	}
	fd := -1
	var derr error
	if err := rc.Control(func(s uintptr) { fd, derr = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return nil, fmt.Errorf("hostnet: TUN %s: %w", name, err)
	}
	if derr != nil {
		return nil, fmt.Errorf("hostnet: TUN %s: dup: %w", name, derr)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("hostnet: TUN %s: %w", name, err)
	}
	nf := os.NewFile(uintptr(fd), "/dev/net/tun")
	raw, err := nf.SyscallConn()
	if err != nil {
		nf.Close()
		return nil, fmt.Errorf("hostnet: TUN %s: %w", name, err)
	}
	return &TUN{name: name, mtu: mtu, f: nf, raw: raw, vnet: vnet, tso: tso, ns: netns.None()}, nil
}

// Offload reports whether the kernel hands over and takes large TCP
// segments (TUNConfig.Offload, and the kernel agreed).
func (t *TUN) Offload() bool { return t.tso }

// Read reads one IP packet the kernel sent into the device into buf and
// returns its length. A buf shorter than the packet gets the packet's
// beginning (the rest is lost); MTU() bytes always suffice. After Close it
// returns an error wrapping os.ErrClosed. On a device with offload it is
// ReadPacket without the GSO description: use ReadPacket there.
func (t *TUN) Read(buf []byte) (int, error) {
	if t.vnet {
		n, _, err := t.ReadPacket(buf)
		return n, err
	}
	return t.f.Read(buf)
}

// Write hands the kernel one IP packet, as if it had arrived on the
// device. The kernel drops a packet it cannot parse; Write reports an
// error only for what write(2) refuses (EINVAL for a packet that is not
// IPv4 or IPv6, for instance).
func (t *TUN) Write(pkt []byte) (int, error) {
	if t.vnet {
		return t.WritePacket([][]byte{pkt}, netif.GSO{})
	}
	return t.f.Write(pkt)
}

// maxIovecs is how many slices WriteVec passes to writev(2) straight from
// the caller's memory; a packet in more slices is copied into one buffer.
// gVisor hands a Host's Output one to three; a device gathering a run of
// segments into one GSO packet (topology.Device) one per segment, and a
// run has at most 128 (impair.Run), well under writev's 1024.
const maxIovecs = 128

// WriteVec writes one IP packet given as slices whose concatenation is the
// packet, as a Host's Output receives it, with one writev(2) and no copy.
// It never waits: a device that cannot take the packet (EAGAIN, ENOBUFS)
// returns the error, so WriteVec can be a Host's Output.
func (t *TUN) WriteVec(pkt [][]byte) (int, error) {
	if t.vnet {
		return t.WritePacket(pkt, netif.GSO{})
	}
	io := ioStates.Get().(*ioState)
	defer io.put()
	return t.writev(io, false, pkt)
}

// writev writes pkt's slices as one packet with one writev(2), after
// io's virtio-net header when withHdr.
func (t *TUN) writev(io *ioState, withHdr bool, pkt [][]byte) (int, error) {
	if len(pkt) > maxIovecs {
		var b []byte
		for _, s := range pkt {
			b = append(b, s...)
		}
		pkt = [][]byte{b}
	}
	n := 0
	if withHdr {
		io.iov[0].Base = &io.hdr[0]
		io.iov[0].SetLen(vnetHdrLen)
		n++
	}
	for _, s := range pkt {
		if len(s) == 0 {
			continue
		}
		io.iov[n].Base = &s[0]
		io.iov[n].SetLen(len(s))
		n++
	}
	if n == 0 {
		return 0, nil
	}
	io.n = n
	if err := t.raw.Write(io.writeFn); err != nil {
		if t.closed.Load() {
			err = &os.PathError{Op: "writev", Path: t.name, Err: os.ErrClosed}
		}
		return 0, err
	}
	if io.errno != 0 {
		return 0, &os.PathError{Op: "writev", Path: t.name, Err: io.errno}
	}
	return int(io.done), nil
}

// Close removes what OpenTUN made, in this order: the routes it added,
// the addresses it added, the MTU and up state it changed on a persistent
// device; then it closes the device's file, which wakes a blocked Read
// and, for a device OpenTUN created, makes the kernel delete the device
// (with whatever routes and addresses remain on it); if the device is
// still there (another process holds it open) Close deletes it. A
// persistent device netjam attached to stays, as it was found.
//
// Close is idempotent and safe for concurrent use: later calls wait for
// the first and return its result. It takes no lock that Read or Write
// hold and only makes a few netlink requests, so it is safe to call from
// the goroutine that handles SIGINT or SIGTERM.
func (t *TUN) Close() error {
	t.closed.Store(true)
	t.once.Do(func() { t.closeErr = t.teardown() })
	return t.closeErr
}
