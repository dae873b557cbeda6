package hostnet

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"unsafe"

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
// exactly that.
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

// TUNConfig describes the TUN device of OpenTUN.
type TUNConfig struct {
	// Name is the device's name, at most 15 bytes ("netjam0"). Empty lets
	// the kernel choose (tun0, tun1, ...). When a persistent TUN device of
	// that name exists (sudo ip tuntap add dev netjam0 mode tun user
	// NAME), OpenTUN attaches to it instead of creating one, and Close
	// leaves it in place.
	Name string
	// Addrs are the kernel's addresses on the device with their prefixes
	// (10.99.0.1/24, fd99::1/64): the prefix routes the peer (10.99.0.2)
	// into the device. IPv6 addresses are added without duplicate address
	// detection, so they are usable at once. Addresses a persistent
	// device already has are kept and not removed by Close.
	Addrs []netip.Prefix
	// MTU is the device's MTU, netif.MinMTU..netif.MaxMTU (at least netif.MinMTUIPv6 with an
	// IPv6 address); 0 means 1500.
	MTU int
	// Routes are extra routes through the device (for transparent mode:
	// the networks whose traffic should cross the emulated path). They
	// must not have host bits set; each needs an address of its family in
	// Addrs, which becomes the source the kernel picks.
	Routes []netip.Prefix
	// Offload turns segmentation and checksum offload on: use ReadPacket
	// and WritePacket, which carry each packet's GSO description. A
	// kernel that refuses TSO leaves the device with virtio-net headers
	// but no large segments (TUN.Offload then reports false).
	Offload bool
	// Netns is the path of the network namespace to put the device in
	// (/var/run/netns/NAME, /proc/PID/ns/net); empty means the namespace
	// of the calling thread. The TUN keeps a netlink socket in that
	// namespace, so Close works from any goroutine.
	Netns string
	// HostRoutes lets OpenTUN add Routes outside the networks of Addrs
	// to the caller's own namespace when netjam holds CAP_NET_ADMIN
	// without being root (a file capability: setcap cap_net_admin+ep).
	// Any user who may run the binary then has that capability, and
	// routes of theirs would send other users' traffic into a device
	// they read, so OpenTUN refuses such routes unless asked explicitly.
	HostRoutes bool
}

// defaultTUNMTU is the MTU of a TUNConfig whose MTU is 0: Ethernet's.
const defaultTUNMTU = 1500

// maxIfName is the longest interface name Linux accepts (IFNAMSIZ - 1).
const maxIfName = 15

// Validate reports every invalid field of c, each as its own error. A zero
// MTU is valid (it means 1500).
func (c *TUNConfig) Validate() error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	switch {
	case len(c.Name) > maxIfName:
		add("name: %q is longer than %d bytes", c.Name, maxIfName)
	case c.Name == "." || c.Name == "..":
		add("name: %q is not a valid interface name", c.Name)
	case strings.ContainsAny(c.Name, "/: \t\n%"):
		add("name: %q must not contain '/', ':', '%%' or white space", c.Name)
	}
	if len(c.Addrs) == 0 {
		add("addrs: at least one address is required")
	}
	v4, v6 := netif.CheckAddrs(c.Addrs, add)
	netif.CheckMTU(c.mtu(), v6, add)
	routes := make(map[netip.Prefix]bool)
	for i, r := range c.Routes {
		switch {
		case !r.IsValid():
			add("routes[%d]: %v is not a valid prefix", i, r)
			continue
		case r.Addr().Is4In6():
			add("routes[%d]: %v: use the plain IPv4 form, not IPv4-mapped IPv6", i, r)
		case r != r.Masked():
			add("routes[%d]: %v has host bits set (the network is %v)", i, r, r.Masked())
		case routes[r]:
			add("routes[%d]: %v is listed twice", i, r)
		case r.Addr().Is4() && !v4:
			add("routes[%d]: %v is IPv4 but addrs has no IPv4 address", i, r)
		case r.Addr().Is6() && !v6:
			add("routes[%d]: %v is IPv6 but addrs has no IPv6 address", i, r)
		}
		routes[r] = true
	}
	return errors.Join(errs...)
}

func (c *TUNConfig) mtu() int {
	if c.MTU == 0 {
		return defaultTUNMTU
	}
	return c.MTU
}

// ErrPrivilege is wrapped by every error of OpenTUN that comes from a
// missing privilege or device: no /dev/net/tun, no access to it, no
// CAP_NET_ADMIN. errors.Is(err, ErrPrivilege) tells the CLI to exit with
// status 2; the error's text (a *PrivilegeError) says what is needed and
// how to get it.
var ErrPrivilege = errors.New("missing privilege")

// PrivilegeError is OpenTUN's error for a missing privilege. It wraps both
// ErrPrivilege and the system's error (errors.Is(err, syscall.EPERM)).
type PrivilegeError struct {
	// Op is what failed: "open /dev/net/tun", "create device netjam0",
	// "add address 10.99.0.1/24 to netjam0".
	Op string
	// Err is the system's error: a syscall.Errno.
	Err error
	// Need says what is missing, in one sentence.
	Need string
	// Fixes are the ways to get it, each a command or an action.
	Fixes []string
}

// Error implements error: one line saying what failed and what is needed,
// then one line per way to get it.
func (e *PrivilegeError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "stack: TUN: %s: %v: %s", e.Op, e.Err, e.Need)
	if len(e.Fixes) > 0 {
		b.WriteString(" Either:")
		for _, f := range e.Fixes {
			b.WriteString("\n  - ")
			b.WriteString(f)
		}
	}
	return b.String()
}

// Unwrap returns ErrPrivilege and the system's error.
func (e *PrivilegeError) Unwrap() []error { return []error{ErrPrivilege, e.Err} }

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
		return nil, fmt.Errorf("stack: TUN %q: %w", cfg.Name, err)
	}
	if out := outsideRoutes(cfg); len(out) > 0 && cfg.Netns == "" && !cfg.HostRoutes && setcapMode() {
		return nil, fmt.Errorf("stack: TUN %q: routes %v lie outside the device's networks and would change this machine's routing for every user: netjam has CAP_NET_ADMIN from its file (setcap) without being root, so it adds such routes only when asked explicitly (tun.host_routes: true)", cfg.Name, out)
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
			return fmt.Errorf("stack: TUN: network namespace %q: %w", cfg.Netns, err)
		}
		t.nl, err = netlink.NewHandleAt(t.ns, unix.NETLINK_ROUTE)
	} else {
		t.nl, err = netlink.NewHandle(unix.NETLINK_ROUTE)
	}
	if err != nil {
		return fmt.Errorf("stack: TUN: netlink socket: %w", err)
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
				return fmt.Errorf("stack: TUN: an interface named %q exists already and is not a TUN device (it is a %s): choose another name", cfg.Name, kind)
			}
			if tt.Flags&netlink.TUNTAP_MULTI_QUEUE != 0 {
				return fmt.Errorf("stack: TUN: the persistent device %q was made with multi_queue, which netjam does not use: recreate it without (sudo ip tuntap del dev %[1]s mode tun multi_queue && sudo ip tuntap add dev %[1]s mode tun user %s)", cfg.Name, userName())
			}
			existing = tt
		case !isLinkNotFound(err):
			return fmt.Errorf("stack: TUN: looking up %q: %w", cfg.Name, err)
		}
	}

	if err := t.openDevice(cfg, existing); err != nil {
		return err
	}
	t.attached = existing != nil
	l, err := t.nl.LinkByName(t.name)
	if err != nil {
		return fmt.Errorf("stack: TUN: the new device %q: %w", t.name, err)
	}
	t.index = l.Attrs().Index
	return t.configure(cfg, l)
}

// Dropped returns how many packets the kernel dropped on their way into
// the device before they could be read (the device's tx_dropped: its
// queue was full because the reader fell behind). ok is false when that
// cannot be read: a device from TUNFromFile, whose namespace netjam does
// not hold, or one already closed.
func (t *TUN) Dropped() (n uint64, ok bool) {
	if t.nl == nil {
		return 0, false
	}
	l, err := t.nl.LinkByIndex(t.index)
	if err != nil || l.Attrs().Statistics == nil {
		return 0, false
	}
	return l.Attrs().Statistics.TxDropped, true
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
				r = result{err: fmt.Errorf("stack: TUN: entering network namespace %q (needs CAP_SYS_ADMIN): %w", cfg.Netns, err), setns: true}
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
		return fmt.Errorf("stack: TUN: %w", err)
	}
	t.f, t.raw, t.name = r.f, raw, r.name
	t.vnet, t.tso = cfg.Offload, r.tso
	return nil
}

// Linux's TUN interface (linux/if_tun.h, linux/virtio_net.h).
const (
	iffVnetHdr = 0x4000
	tunFCsum   = 0x01
	tunFTSO4   = 0x02
	tunFTSO6   = 0x04

	vnetHdrLen          = 10 // struct virtio_net_hdr
	vnetFlagNeedsCsum   = 1
	vnetGSONone         = 0
	vnetGSOTCPv4        = 1
	vnetGSOTCPv6        = 4
	vnetGSOECN          = 0x80
	tcpChecksumOffset   = 16
	ip6AddrGenModeNone  = 1 // IN6_ADDR_GEN_MODE_NONE
	maxOffloadPacketLen = 65535
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

// openError turns an error of water.New into one that says what to do.
// water returns the open(2) error as a bare syscall.Errno and an ioctl(2)
// error as an *os.SyscallError.
func openError(cfg TUNConfig, existing *netlink.Tuntap, err error) error {
	var se *os.SyscallError
	if !errors.As(err, &se) {
		var errno syscall.Errno
		if !errors.As(err, &errno) {
			return fmt.Errorf("stack: TUN: open /dev/net/tun: %w", err)
		}
		switch errno {
		case syscall.ENOENT, syscall.ENODEV, syscall.ENXIO:
			return &PrivilegeError{
				Op: "open /dev/net/tun", Err: errno,
				Need: "TUN mode needs the TUN device node /dev/net/tun, backed by the tun driver.",
				Fixes: []string{
					"load the driver: sudo modprobe tun",
					"in a container, pass the device and the capability in: docker run --device /dev/net/tun --cap-add NET_ADMIN ... (podman takes the same flags)",
					"if the driver is built in but the node is missing: sudo mkdir -p /dev/net && sudo mknod /dev/net/tun c 10 200 && sudo chmod 0666 /dev/net/tun",
				},
			}
		case syscall.EACCES, syscall.EPERM:
			return &PrivilegeError{
				Op: "open /dev/net/tun", Err: errno,
				Need: "TUN mode needs read-write access to /dev/net/tun (mode 0666 on most systems).",
				Fixes: []string{
					"run netjam as root: sudo " + exeName() + " ...",
					"make the node usable by every user, as most distributions ship it: sudo chmod 0666 /dev/net/tun",
					"in a container, allow the device: docker run --device /dev/net/tun --cap-add NET_ADMIN ...",
				},
			}
		}
		return fmt.Errorf("stack: TUN: open /dev/net/tun: %w", errno)
	}
	name := cfg.Name
	if name == "" {
		name = "netjam0"
	}
	if errors.Is(se.Err, syscall.EPERM) {
		if existing != nil {
			// The kernel reports the owner and group only when set, so
			// 0 means root or nobody in particular.
			owner := "another user or group"
			if existing.Owner != 0 {
				owner = "uid " + strconv.FormatUint(uint64(existing.Owner), 10)
			}
			return &PrivilegeError{
				Op: "attach to device " + cfg.Name, Err: syscall.EPERM,
				Need: fmt.Sprintf("the persistent device %s belongs to %s; attaching to it needs to be its owner (or in its group), or CAP_NET_ADMIN.", cfg.Name, owner),
				Fixes: []string{
					"run netjam as root: sudo " + exeName() + " ...",
					"give the netjam binary the capability once (again after each rebuild): sudo setcap cap_net_admin+ep " + exeName(),
					fmt.Sprintf("make the device yours: sudo ip tuntap del dev %s mode tun && sudo ip tuntap add dev %[1]s mode tun user %s", cfg.Name, userName()),
				},
			}
		}
		return &PrivilegeError{
			Op: "create device " + name, Err: syscall.EPERM,
			Need: "creating a TUN device needs CAP_NET_ADMIN.",
			Fixes: []string{
				"run netjam as root: sudo " + exeName() + " ...",
				"give the netjam binary the capability once (again after each rebuild): sudo setcap cap_net_admin+ep " + exeName(),
				fmt.Sprintf("have root create a persistent device that you own, which netjam then attaches to by name (tun name %s), and configure it once: %s",
					name, strings.Join(append([]string{fmt.Sprintf("sudo ip tuntap add dev %s mode tun user %s", name, userName())}, setupCommands(name, cfg)...), " && ")),
			},
		}
	}
	switch {
	case errors.Is(se.Err, syscall.EBUSY):
		return fmt.Errorf("stack: TUN: device %q is in use by another process (another netjam?): %w", name, se)
	case errors.Is(se.Err, syscall.EINVAL) && cfg.Name != "":
		return fmt.Errorf("stack: TUN: the kernel refused device %q (a device of that name with other flags, or a bad name): %w", name, se)
	}
	return fmt.Errorf("stack: TUN: create device %q: %w", name, se)
}

// setupCommands are the ip(8) commands that configure a device as cfg
// wants, for error messages: what a user without CAP_NET_ADMIN runs once.
func setupCommands(name string, cfg TUNConfig) []string {
	var cmds []string
	for _, a := range cfg.Addrs {
		c := fmt.Sprintf("sudo ip addr add %v dev %s", a, name)
		if a.Addr().Is6() {
			c += " nodad"
		}
		cmds = append(cmds, c)
	}
	cmds = append(cmds, fmt.Sprintf("sudo ip link set %s mtu %d up", name, cfg.mtu()))
	for _, r := range cfg.Routes {
		cmds = append(cmds, fmt.Sprintf("sudo ip route add %v dev %s", r, name))
	}
	return cmds
}

// configure brings the device to cfg: MTU, addresses, up, routes. What is
// already as wanted is left alone (and so needs no privilege); what it
// changes is recorded for teardown.
func (t *TUN) configure(cfg TUNConfig, l netlink.Link) error {
	privErr := func(op string, err error) error {
		if errors.Is(err, syscall.EPERM) {
			fixes := []string{
				"run netjam as root: sudo " + exeName() + " ...",
				"give the netjam binary the capability once (again after each rebuild): sudo setcap cap_net_admin+ep " + exeName(),
			}
			if t.attached {
				fixes = append(fixes, fmt.Sprintf("configure the persistent device %s once as root, so netjam finds it ready and changes nothing: %s",
					t.name, strings.Join(setupCommands(t.name, cfg), " && ")))
			}
			return &PrivilegeError{Op: op, Err: syscall.EPERM, Need: "configuring a network device needs CAP_NET_ADMIN.", Fixes: fixes}
		}
		return fmt.Errorf("stack: TUN: %s: %w", op, err)
	}

	if mtu := l.Attrs().MTU; mtu != t.mtu {
		if err := t.nl.LinkSetMTU(l, t.mtu); err != nil {
			return privErr(fmt.Sprintf("set MTU %d on %s", t.mtu, t.name), err)
		}
		if t.attached {
			t.oldMTU = mtu
		}
	}

	have := make(map[netip.Prefix]bool)
	if t.attached {
		as, err := t.nl.AddrList(l, netlink.FAMILY_ALL)
		if err != nil {
			return fmt.Errorf("stack: TUN: listing addresses of %s: %w", t.name, err)
		}
		for _, a := range as {
			if p, ok := prefixOf(a.IPNet); ok {
				have[p] = true
			}
		}
	}
	for _, p := range cfg.Addrs {
		if have[p] {
			continue
		}
		a := &netlink.Addr{IPNet: ipNet(p)}
		if p.Addr().Is6() {
			// Without DAD the address is usable at once rather than
			// tentative for a second; on a point-to-point device there
			// is nobody to collide with.
			a.Flags = unix.IFA_F_NODAD
		}
		if err := t.nl.AddrAdd(l, a); err != nil {
			if errors.Is(err, syscall.EACCES) && p.Addr().Is6() {
				return fmt.Errorf("stack: TUN: add address %v to %s: %w (is IPv6 disabled? sysctl net.ipv6.conf.%[2]s.disable_ipv6)", p, t.name, err)
			}
			return privErr(fmt.Sprintf("add address %v to %s", p, t.name), err)
		}
		t.addrs = append(t.addrs, p)
	}

	// A device of netjam's own without an IPv6 address gets no
	// link-local one either, so the kernel sends nothing into it by
	// itself (router solicitations, MLD reports): a path with no traffic
	// carries none. (On a kernel without IPv6 there is nothing to turn
	// off, and the request fails harmlessly.)
	if !t.attached && !slices.ContainsFunc(cfg.Addrs, func(p netip.Prefix) bool { return p.Addr().Is6() }) {
		t.nl.LinkSetIP6AddrGenMode(l, ip6AddrGenModeNone)
	}

	if l.Attrs().Flags&net.FlagUp == 0 {
		if err := t.nl.LinkSetUp(l); err != nil {
			return privErr("set "+t.name+" up", err)
		}
		t.wasDown = t.attached
	}

	for _, r := range cfg.Routes {
		// Looked for first: the kernel checks the privilege before it
		// finds that a route exists.
		if t.attached && t.routeVia(r) {
			continue // a persistent device's own route, not ours to remove
		}
		err := t.nl.RouteAdd(&netlink.Route{LinkIndex: t.index, Dst: ipNet(r)})
		if errors.Is(err, syscall.EEXIST) {
			return fmt.Errorf("stack: TUN: a route to %v exists already through another device, so its traffic would not reach %s: remove it or leave %[1]v out of the routes", r, t.name)
		}
		if err != nil {
			return privErr(fmt.Sprintf("add route %v dev %s", r, t.name), err)
		}
		t.routes = append(t.routes, r)
	}
	return nil
}

// routeVia reports whether the main table has a route to exactly r through
// the device.
func (t *TUN) routeVia(r netip.Prefix) bool {
	routes, err := t.nl.RouteListFiltered(nlFamily(r.Addr()), &netlink.Route{Dst: ipNet(r), LinkIndex: t.index},
		netlink.RT_FILTER_DST|netlink.RT_FILTER_OIF)
	return err == nil && len(routes) > 0
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
		return nil, fmt.Errorf("stack: TUN %s: %w", name, err)
	}
	fd := -1
	var derr error
	if err := rc.Control(func(s uintptr) { fd, derr = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return nil, fmt.Errorf("stack: TUN %s: %w", name, err)
	}
	if derr != nil {
		return nil, fmt.Errorf("stack: TUN %s: dup: %w", name, derr)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("stack: TUN %s: %w", name, err)
	}
	nf := os.NewFile(uintptr(fd), "/dev/net/tun")
	raw, err := nf.SyscallConn()
	if err != nil {
		nf.Close()
		return nil, fmt.Errorf("stack: TUN %s: %w", name, err)
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

// ReadPacket reads one packet as Read does, with its GSO description. On
// a device with offload the packet may be a TCP segment of up to 64 KiB
// (buf needs 65535 bytes) and its TCP or UDP checksum may be left to the
// receiver (NeedsCsum, also for an ordinary packet); the caller splits or
// completes it. Without offload the GSO is always zero.
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
	var g netif.GSO
	if hdr[0]&vnetFlagNeedsCsum != 0 {
		g.NeedsCsum = true
		g.CsumStart = int(uint16(hdr[6]) | uint16(hdr[7])<<8)
		g.CsumOffset = int(uint16(hdr[8]) | uint16(hdr[9])<<8)
	}
	if typ := hdr[1] &^ vnetGSOECN; typ == vnetGSOTCPv4 || typ == vnetGSOTCPv6 {
		g.MSS = int(uint16(hdr[4]) | uint16(hdr[5])<<8) // host order: little-endian here
	}
	return int(n) - vnetHdrLen, g, nil
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
			return 0, fmt.Errorf("stack: TUN %s: a GSO packet on a device without offload", t.name)
		}
		return t.WriteVec(pkt)
	}
	io := ioStates.Get().(*ioState)
	defer io.put()
	hdr := &io.hdr
	*hdr = [vnetHdrLen]byte{}
	if g.MSS > 0 || g.NeedsCsum {
		first := pkt[0]
		if len(first) < 20 {
			return 0, fmt.Errorf("stack: TUN %s: a GSO packet's IP header must be in its first slice", t.name)
		}
		ipLen := int(first[0]&0x0f) * 4
		typ := byte(vnetGSOTCPv4)
		if first[0]>>4 == 6 {
			ipLen, typ = 40, vnetGSOTCPv6
		}
		if len(first) < ipLen+20 {
			return 0, fmt.Errorf("stack: TUN %s: a GSO packet's TCP header must be in its first slice", t.name)
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
	}
	n, err := t.writev(io, true, pkt)
	return max(0, n-vnetHdrLen), err
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
	s.iov = [1 + maxIovecs]unix.Iovec{}
	ioStates.Put(s)
}

func putLE16(b []byte, v int) { b[0], b[1] = byte(v), byte(v>>8) }

// maxIovecs is how many slices WriteVec passes to writev(2) straight from
// the caller's memory; a packet in more slices is copied into one buffer.
// gVisor hands a Host's Output one to three.
const maxIovecs = 16

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
	t.once.Do(func() { t.closeErr = t.teardown() })
	return t.closeErr
}

// teardown undoes what open did; it copes with a partly opened TUN.
func (t *TUN) teardown() error {
	var errs []error
	gone := func(err error) bool {
		return err == nil || errors.Is(err, syscall.ESRCH) || errors.Is(err, syscall.ENOENT) ||
			errors.Is(err, syscall.EADDRNOTAVAIL) || errors.Is(err, syscall.ENODEV) || isLinkNotFound(err)
	}
	if t.nl != nil && t.index != 0 {
		for _, r := range t.routes {
			if err := t.nl.RouteDel(&netlink.Route{LinkIndex: t.index, Dst: ipNet(r)}); !gone(err) {
				errs = append(errs, fmt.Errorf("removing route %v: %w", r, err))
			}
		}
		l := &netlink.Tuntap{LinkAttrs: netlink.LinkAttrs{Index: t.index, Name: t.name}}
		for _, a := range t.addrs {
			if err := t.nl.AddrDel(l, &netlink.Addr{IPNet: ipNet(a)}); !gone(err) {
				errs = append(errs, fmt.Errorf("removing address %v: %w", a, err))
			}
		}
		if t.wasDown {
			if err := t.nl.LinkSetDown(l); !gone(err) {
				errs = append(errs, fmt.Errorf("setting %s down: %w", t.name, err))
			}
		}
		if t.oldMTU != 0 {
			if err := t.nl.LinkSetMTU(l, t.oldMTU); !gone(err) {
				errs = append(errs, fmt.Errorf("restoring MTU %d: %w", t.oldMTU, err))
			}
		}
	}
	if t.f != nil {
		if err := t.f.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if t.nl != nil && t.index != 0 && !t.attached {
		// The last close of a non-persistent device deletes it, unless
		// some other process holds a descriptor of it.
		if l, err := t.nl.LinkByIndex(t.index); err == nil && l.Attrs().Name == t.name {
			if err := t.nl.LinkDel(l); !gone(err) {
				errs = append(errs, fmt.Errorf("deleting %s: %w", t.name, err))
			}
		}
	}
	if t.nl != nil {
		t.nl.Close()
	}
	if t.ns.IsOpen() {
		t.ns.Close()
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("stack: TUN %s: closing: %w", t.name, err)
	}
	return nil
}

func isLinkNotFound(err error) bool {
	var nf netlink.LinkNotFoundError
	return errors.As(err, &nf)
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

func prefixOf(n *net.IPNet) (netip.Prefix, bool) {
	if n == nil {
		return netip.Prefix{}, false
	}
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(a.Unmap(), ones), true
}

func nlFamily(a netip.Addr) int {
	if a.Is4() {
		return netlink.FAMILY_V4
	}
	return netlink.FAMILY_V6
}

// exeName is the running binary, for the commands of error messages.
func exeName() string {
	if p, err := os.Executable(); err == nil {
		return p
	}
	return "netjam"
}

// userName is the user running netjam, for the commands of error messages.
func userName() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return strconv.Itoa(os.Getuid())
}

// outsideRoutes returns the Routes of cfg that no network of its Addrs
// contains.
func outsideRoutes(cfg TUNConfig) []netip.Prefix {
	var out []netip.Prefix
	for _, r := range cfg.Routes {
		inside := false
		for _, a := range cfg.Addrs {
			inside = inside || a.Bits() <= r.Bits() && a.Contains(r.Addr())
		}
		if !inside {
			out = append(out, r)
		}
	}
	return out
}

// setcapMode reports whether netjam holds CAP_NET_ADMIN without being root:
// a file capability (setcap cap_net_admin+ep), which every user who may
// run the binary gets. Rootless mode is root of a user namespace, not
// this.
func setcapMode() bool {
	if os.Geteuid() == 0 {
		return false
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return false
	}
	return data[0].Effective&(1<<unix.CAP_NET_ADMIN) != 0
}
