package impair

import (
	"encoding/binary"
	"math/bits"
)

// maxIPv6ExtHeaders bounds the walk over IPv6 extension headers, so that a
// crafted chain costs at most a few bounds checks.
const maxIPv6ExtHeaders = 8

// flowHash returns p's flow hash under seed: a hash of its 5-tuple (source
// and destination address, protocol, and source and destination port for
// TCP and UDP), which FQ-CoDel uses to give each flow its own queue
// (RFC 8290 §4.1).
//
// Ports are left out of fragments (IPv4 MF set or offset non-zero; an IPv6
// Fragment header other than an atomic one), since only a first fragment
// carries them: all fragments of a datagram then land in one queue and stay
// in order, as Linux's flow dissector does by default. Other protocols
// (ICMP, ESP, ...) hash on addresses and protocol. Anything that is not an
// IPv4 or IPv6 header long enough to hold both addresses hashes to one
// value per seed, so garbage shares a single queue instead of spraying
// over all of them.
//
// The seed keeps the mapping of flows to queues unpredictable to senders
// (an attacker who knows it can aim many flows at one queue), yet the same
// on every run of a scenario with the same seed.
//
// The result is cached in p.hash, where 0 means "not computed": a hash that
// comes out 0 is returned as 1. The cache assumes one seed per packet,
// which holds as a packet meets at most one FQ-CoDel on its way. flowHash
// reads p.Data in place and never allocates; it accepts any input, however
// short or malformed.
func flowHash(p *Packet, seed uint64) uint32 {
	if p.hash != 0 {
		return p.hash
	}
	h := hashHeaders(p.Data, seed)
	if h == 0 {
		h = 1
	}
	p.hash = h
	return h
}

// hashHeaders computes the flow hash of the IP packet b.
func hashHeaders(b []byte, seed uint64) uint32 {
	if len(b) == 0 {
		return hashFinish(hashWord(seed, 0))
	}
	switch b[0] >> 4 {
	case 4:
		ihl := int(b[0]&0x0f) * 4
		if len(b) < 20 || ihl < 20 {
			break
		}
		proto := b[9]
		fragment := binary.BigEndian.Uint16(b[6:8])&0x3fff != 0 // MF or offset
		var ports uint32
		hasPorts := !fragment && carriesPorts(proto) && len(b) >= ihl+4
		if hasPorts {
			ports = binary.BigEndian.Uint32(b[ihl : ihl+4])
		}
		h := hashWord(seed, uint64(binary.BigEndian.Uint32(b[12:16]))<<32|uint64(binary.BigEndian.Uint32(b[16:20])))
		return hashFinish(hashWord(h, tupleWord(4, proto, hasPorts, ports)))
	case 6:
		if len(b) < 40 {
			break
		}
		proto, off, fragment := ipv6Transport(b)
		var ports uint32
		hasPorts := !fragment && carriesPorts(proto) && len(b) >= off+4
		if hasPorts {
			ports = binary.BigEndian.Uint32(b[off : off+4])
		}
		h := hashWord(seed, binary.BigEndian.Uint64(b[8:16]))
		h = hashWord(h, binary.BigEndian.Uint64(b[16:24]))
		h = hashWord(h, binary.BigEndian.Uint64(b[24:32]))
		h = hashWord(h, binary.BigEndian.Uint64(b[32:40]))
		return hashFinish(hashWord(h, tupleWord(6, proto, hasPorts, ports)))
	}
	return hashFinish(hashWord(seed, 0))
}

// ipv6Transport walks the extension headers of the IPv6 packet b (at least
// 40 bytes) and returns the upper-layer protocol and its offset. It stops
// at a header it does not know, at one that does not fit in b, or at a
// fragment header of a real fragment (fragment is then true, proto is the
// fragment header's next header, which all fragments share).
func ipv6Transport(b []byte) (proto uint8, off int, fragment bool) {
	const (
		hopByHop = 0
		routing  = 43
		frag     = 44
		ah       = 51
		destOpts = 60
	)
	proto, off = b[6], 40
	for range maxIPv6ExtHeaders {
		switch proto {
		case hopByHop, routing, destOpts:
			if len(b) < off+2 {
				return proto, off, false
			}
			proto, off = b[off], off+(int(b[off+1])+1)*8
		case ah:
			if len(b) < off+2 {
				return proto, off, false
			}
			proto, off = b[off], off+(int(b[off+1])+2)*4
		case frag:
			if len(b) < off+8 {
				return proto, off, false
			}
			// Offset (13 bits) and M flag; both zero is an atomic
			// fragment (RFC 6946), a whole datagram with its ports.
			if binary.BigEndian.Uint16(b[off+2:off+4])&0xfff9 != 0 {
				return b[off], off + 8, true
			}
			proto, off = b[off], off+8
		default:
			return proto, off, false
		}
	}
	return proto, off, false
}

// carriesPorts reports whether the transport protocol proto (TCP or UDP)
// starts with source and destination ports the flow hash uses.
func carriesPorts(proto uint8) bool { return proto == 6 || proto == 17 }

// tupleWord packs the non-address part of a flow key into one word. The
// IP version and the presence of ports are part of it so that, say, an
// IPv4 packet without ports cannot collide by construction with one whose
// ports happen to be zero.
func tupleWord(version, proto uint8, hasPorts bool, ports uint32) uint64 {
	w := uint64(version)<<48 | uint64(proto)<<32 | uint64(ports)
	if hasPorts {
		w |= 1 << 40
	}
	return w
}

// hashWord mixes the 64-bit word w into the running hash h: a multiply
// and rotate per word, as in the wyhash/xxh3 family. It is not
// cryptographic; with a secret seed it only has to spread flows evenly.
func hashWord(h, w uint64) uint64 {
	h ^= w
	h *= 0x9e3779b97f4a7c15
	return bits.RotateLeft64(h, 31) ^ h>>29
}

// hashFinish applies MurmurHash3's 64-bit finalizer so that every input bit
// affects every output bit, and folds the result to 32 bits.
func hashFinish(h uint64) uint32 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return uint32(h) ^ uint32(h>>32)
}
