/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The per-packet parser: Ethernet (up to two VLAN tags), IPv4 with the
 * seed's checks, IPv6 with its extension headers, and the ports of TCP, UDP,
 * UDP-Lite and SCTP. A pure function of the frame's bytes, so it is unit
 * tested and fuzzed without EAL.
 */
#ifndef NETCHANNELD_PARSE_H
#define NETCHANNELD_PARSE_H

#include <stdint.h>

#include "nc_trie.h"

/* What the parser decided; every value but OK goes to the exception path. */
enum ncd_verdict {
	NCD_PKT_OK = 0,          /* classify it */
	NCD_PKT_NOT_IP,          /* ARP, LLDP, a third VLAN tag...: the kernel's business */
	NCD_PKT_OTHERHOST,       /* unicast to another MAC (the seed's PACKET_OTHERHOST) */
	NCD_PKT_TOO_DEEP,        /* headers end beyond the bytes the parser was given */
	/* Malformed, counted by reason; never delivered. */
	NCD_PKT_TRUNC_L2,        /* shorter than its Ethernet/VLAN headers */
	NCD_PKT_TRUNC_L3,        /* shorter than its IP header */
	NCD_PKT_BAD_VERSION,     /* IP version does not match the ethertype */
	NCD_PKT_BAD_IHL,         /* IPv4 ihl < 5 */
	NCD_PKT_BAD_CSUM,        /* IPv4 header checksum */
	NCD_PKT_BAD_LEN,         /* IP total/payload length beyond the frame or below the header */
	NCD_PKT_BAD_EXT,         /* IPv6 extension header chain truncated or too long */
	NCD_PKT_TRUNC_L4,        /* TCP/UDP/UDP-Lite/SCTP without its ports */
	NCD_PKT_NVERDICTS
};

/** First verdict that counts as malformed. */
#define NCD_PKT_MALFORMED NCD_PKT_TRUNC_L2

/** Names of the verdicts, for counters ("not_ip", "bad_csum", ...). */
extern const char *const ncd_verdict_names[NCD_PKT_NVERDICTS];

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
};

/** Fragments (ncd_parsed.frag). */
#define NCD_FRAG_NONE 0          /* a whole datagram */
#define NCD_FRAG_FIRST 1         /* the first fragment: it holds the transport header */
#define NCD_FRAG_LATER 2         /* a later fragment: no transport header */

/**
 * Parse a frame.
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
enum ncd_verdict ncd_parse(const uint8_t *frame, uint32_t avail, uint32_t frame_len,
			   const uint8_t port_mac[6], unsigned int flags, struct ncd_parsed *out);

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

#endif
