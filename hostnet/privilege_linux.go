package hostnet

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/user"
	"strconv"
	"strings"
	"syscall"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// openError turns an error of water.New into one that says what to do.
// water returns the open(2) error as a bare syscall.Errno and an ioctl(2)
// error as an *os.SyscallError.
func openError(cfg TUNConfig, existing *netlink.Tuntap, err error) error {
	var se *os.SyscallError
	if !errors.As(err, &se) {
		var errno syscall.Errno
		if !errors.As(err, &errno) {
			return fmt.Errorf("hostnet: TUN: open /dev/net/tun: %w", err)
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
		return fmt.Errorf("hostnet: TUN: open /dev/net/tun: %w", errno)
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
		return fmt.Errorf("hostnet: TUN: device %q is in use by another process (another netjam?): %w", name, se)
	case errors.Is(se.Err, syscall.EINVAL) && cfg.Name != "":
		return fmt.Errorf("hostnet: TUN: the kernel refused device %q (a device of that name with other flags, or a bad name): %w", name, se)
	}
	return fmt.Errorf("hostnet: TUN: create device %q: %w", name, se)
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
