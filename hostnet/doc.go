// Package hostnet is the machine's own networking, as netjam uses it:
//
//   - TUN devices: OpenTUN makes one (or attaches to a persistent one),
//     configures it over netlink (netlink_linux.go) and Close undoes exactly
//     what it did; with offload, packets carry a virtio-net header and
//     their GSO description (offload_linux.go). The emulator sees a device
//     only through the Device interface, which package hostnet/tuntest
//     implements in memory for tests without root.
//   - network namespaces (Netns), entered only on threads of their own
//     that are thrown away afterwards;
//   - rootless shells (StartRootless, RootlessInit): netjam started again
//     as root of new user and network namespaces, which makes the device
//     and hands it back;
//   - TCP sockets of the host kernel with a chosen congestion control
//     (DialKernelTCP, ListenKernelTCP) and their TCP_INFO;
//   - the errors of a missing privilege (PrivilegeError), each naming
//     what failed, what is needed and the ways to get it.
//
// All but the Device interface, TUNConfig and PrivilegeError is Linux's:
// that code lives in _linux.go files, and on other systems (macOS,
// Windows) the same names come from _other.go files and return one
// error, a *NotLinuxError ("TUN mode needs Linux: ..."), as wireguard-go's
// tun package does per platform (platform.go).
//
// It imports no gVisor and nothing of netjam but package netif, whose
// GSO description, MTU bounds, address checks and TCPInfo it shares with
// package stack (gVisor's hosts): the two do not import each other, and
// the emulator joins a device to a host.
package hostnet
