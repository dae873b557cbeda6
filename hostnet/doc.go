// Package hostnet is the host's own networking, as netjam uses it: TUN
// devices (OpenTUN, configured over netlink and torn down exactly as far
// as OpenTUN set them up), network namespaces entered only on threads of
// their own (Netns), TCP sockets of the host kernel with a chosen
// congestion control (DialKernelTCP), and the errors that say which
// privilege is missing and how to get it (PrivilegeError).
//
// It imports no gVisor and nothing of netjam above package netif, whose
// GSO description travels with every packet of a device with offload:
// gVisor's hosts are package stack's, and the two packages do not import
// each other. The emulator joins a device to a host.
package hostnet
