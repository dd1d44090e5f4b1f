/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The per-packet parser: Ethernet (up to two VLAN tags), IPv4 with the
 * seed's checks, IPv6 with its extension headers, and the ports of TCP, UDP,
 * UDP-Lite and SCTP. A pure function of the frame's bytes, so it is unit
 * tested and fuzzed without EAL.
 */
#ifndef NETCHANNELD_PARSE_H
#define NETCHANNELD_PARSE_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "core/stats.h"
#include "nc_trie.h"

/** Parser input flags. */
#define NCD_PARSE_CSUM_GOOD 0x1  /* the NIC checked the IPv4 header checksum: good */
#define NCD_PARSE_CSUM_BAD  0x2  /* ... bad */

struct ncd_parsed {
	struct nc_trie_key key;
	uint32_t l3_len;         /* bytes of the IP packet (total length): trim the frame to l2 + this */
	uint16_t l2_len;         /* Ethernet and VLAN headers */
	uint16_t l4_off;         /* where the transport header starts (from the frame's start) */
	uint16_t frag_hdr;       /* IPv6 fragment: where its fragment header starts; else 0 */
	uint8_t frag;            /* NCD_FRAG_*: whether this is a fragment, and which */
	/*
	 * It asks to be source-routed: an IPv4 loose or strict source route
	 * option, or an IPv6 routing header of type 0 (RFC 5095). Linux
	 * forwards neither, and a client may send neither.
	 */
	uint8_t source_route;
};

/** Fragments (ncd_parsed.frag). */
#define NCD_FRAG_NONE 0          /* a whole datagram */
#define NCD_FRAG_FIRST 1         /* the first fragment: it holds the transport header */
#define NCD_FRAG_LATER 2         /* a later fragment: no transport header */

/**
 * Parse a frame: the general parser, every case (ncd_parse() is the entry point).
 *
 * @param frame     the frame's first bytes (contiguous)
 * @param avail     how many bytes frame holds
 * @param frame_len the whole frame's length (avail may be less, for a multi-segment frame)
 * @param port_mac  the port's MAC: unicast to another MAC is NCD_PKT_OTHERHOST;
 *                  NULL: any destination MAC (frames a client transmits)
 * @param flags     NCD_PARSE_*
 * @param out       the key and lengths, valid when the verdict is NCD_PKT_OK
 * @return the verdict
 */
enum ncd_verdict ncd_parse_slow(const uint8_t *frame, uint32_t avail, uint32_t frame_len,
				const uint8_t port_mac[6], unsigned int flags,
				struct ncd_parsed *out);

/** A big-endian 16-bit field. */
static inline uint16_t
ncd_rd16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

/** A ones'-complement sum folded to 16 bits (RFC 1071). */
static inline uint32_t
ncd_csum_fold(uint32_t s)
{
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return s;
}

/**
 * RFC 1071 sum of n bytes as big-endian 16-bit words, an odd last byte padded with zero;
 * folded. Not rte_raw_cksum(): with it, the miss path (every packet's IPv4 header checked)
 * ran 4-5% slower (scripts/bench.sh datapath, miss, interleaved, 2026-12-04).
 */
static inline uint32_t
ncd_csum_sum(const uint8_t *p, uint32_t n)
{
	uint32_t s = 0;

	for (uint32_t i = 0; i + 1 < n; i += 2)
		s += ncd_rd16(p + i);
	if (n & 1)
		s += (uint32_t)p[n - 1] << 8;
	return ncd_csum_fold(s);
}

/* Ethernet, IPv4 without options, and the ports: what the fast path needs in the frame. */
#define NCD_PARSE_FAST_BYTES (14 + 20 + 4)

/**
 * The common frame without the general parser's walk: untagged IPv4 without
 * options, not a fragment, carrying TCP, UDP, UDP-Lite or SCTP with its
 * ports, well formed. Anything else, bad or merely unusual, returns false
 * and is the general parser's from the start, so the fast path decides no
 * verdict but OK, and decides it as ncd_parse_slow() would (the packet
 * fuzzer compares the two on every input). Inline in the worker's loop:
 * out of line, the general parser took a fifth of the worker's samples in
 * the miss benchmark (perf, 2026-12-05).
 *
 * Arguments as ncd_parse_slow()'s.
 */
static inline bool
ncd_parse_fast(const uint8_t *f, uint32_t avail, uint32_t frame_len, const uint8_t port_mac[6],
	       unsigned int flags, struct ncd_parsed *out)
{
	const uint8_t *ip = f + 14;
	uint32_t mac4, tot;
	uint16_t mac2;
	uint64_t s;
	uint8_t proto;

	if (avail < NCD_PARSE_FAST_BYTES || frame_len < NCD_PARSE_FAST_BYTES ||
	    (flags & NCD_PARSE_CSUM_BAD))
		return false;
	if (port_mac != NULL && !(f[0] & 1)) {
		uint32_t m4;
		uint16_t m2;

		memcpy(&mac4, f, 4);
		memcpy(&mac2, f + 4, 2);
		memcpy(&m4, port_mac, 4);
		memcpy(&m2, port_mac + 4, 2);
		if (((mac4 ^ m4) | (uint32_t)(mac2 ^ m2)) != 0)
			return false;
	}
	proto = ip[9];
	/* Ethertype IPv4, version 4 with ihl 5, no fragment bits but DF. */
	if (ncd_rd16(f + 12) != 0x0800 || ip[0] != 0x45 || (ncd_rd16(ip + 6) & 0x3fff) != 0 ||
	    !(proto == 6 || proto == 17 || proto == 136 || proto == 132))
		return false;
	tot = ncd_rd16(ip + 2);
	if (tot < 20 + 4 || 14 + tot > frame_len)
		return false;
	if (!(flags & NCD_PARSE_CSUM_GOOD)) {
		/*
		 * RFC 1071 over 32-bit halves of 64-bit loads from the frame (not
		 * through a copy of the header: its 16-byte store forwarded to
		 * 4-byte loads stalled each). The header is good when its sum
		 * folds to all ones (its own byte swap, so host order will do):
		 * when the sum is a non-zero multiple of 0xffff, as 2^16 is 1
		 * modulo 0xffff; it is not zero, its first byte being 0x45. A
		 * multiply where the folds were a chain of eight.
		 */
		uint64_t a, b;
		uint32_t c;

		memcpy(&a, ip, 8);
		memcpy(&b, ip + 8, 8);
		memcpy(&c, ip + 16, 4);
		s = (a & 0xffffffff) + (a >> 32) + (b & 0xffffffff) + (b >> 32) + c;
		if (s % 0xffff != 0)
			return false;
	}
	out->key = (struct nc_trie_key){
		.family = NC_TRIE_AF_INET,
		.proto = proto,
		.sport = ncd_rd16(ip + 20),
		.dport = ncd_rd16(ip + 22),
	};
	memcpy(out->key.src.a, ip + 12, 4);
	memcpy(out->key.dst.a, ip + 16, 4);
	out->l3_len = tot;
	out->l2_len = 14;
	out->l4_off = 14 + 20;
	out->frag_hdr = 0;
	out->frag = NCD_FRAG_NONE;
	out->source_route = 0;
	return true;
}

/**
 * Parse a frame: the fast path for the common frame, else the general parser.
 *
 * @param frame     the frame's first bytes (contiguous)
 * @param avail     how many bytes frame holds
 * @param frame_len the whole frame's length (avail may be less, for a multi-segment frame)
 * @param port_mac  the port's MAC: unicast to another MAC is NCD_PKT_OTHERHOST;
 *                  NULL: any destination MAC (frames a client transmits)
 * @param flags     NCD_PARSE_*
 * @param out       the key and lengths, valid when the verdict is NCD_PKT_OK
 * @return the verdict
 */
static inline enum ncd_verdict
ncd_parse(const uint8_t *frame, uint32_t avail, uint32_t frame_len, const uint8_t port_mac[6],
	  unsigned int flags, struct ncd_parsed *out)
{
	if (ncd_parse_fast(frame, avail, frame_len, port_mac, flags, out))
		return NCD_PKT_OK;
	return ncd_parse_slow(frame, avail, frame_len, port_mac, flags, out);
}

#endif
