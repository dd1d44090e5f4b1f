/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * NAT channels (the seed's NETCHANNEL_NAT): a matched packet's addresses and
 * ports are rewritten and it is sent on, with its checksums updated
 * incrementally (RFC 1624). The rewrite is a pure function of the packet's
 * bytes, so it is unit tested and fuzzed without EAL; the flow table of
 * reverse mappings (nat.c) is not.
 */
#ifndef NCD_NAT_REWRITE_H
#define NCD_NAT_REWRITE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/config.h"
#include "packet/parse.h"

/** Why a packet was not translated (ncd_nat_rewrite()). */
enum ncd_nat_result {
	NCD_NAT_OK = 0,
	NCD_NAT_FRAGMENT,        /* a fragment whose ports, or whose checksum, cannot be rewritten */
	NCD_NAT_NO_PORTS,        /* ports to rewrite, but the protocol has none */
	NCD_NAT_FAMILY,          /* the packet's family is not the translation's addresses' */
	NCD_NAT_SHORT,           /* the headers (or a payload to checksum) are not all in the bytes given */
	NCD_NAT_NRESULTS
};

/** Names of the results, for counters. */
extern const char *const ncd_nat_result_names[NCD_NAT_NRESULTS];

/** Rewrite flags (ncd_nat_rewrite()). */
#define NCD_NAT_F_IP_CSUM_OFFLOAD 0x1 /* zero the IPv4 header checksum: the NIC computes it */

/**
 * Translate a parsed frame in place.
 *
 * Ports are rewritten for TCP, UDP and UDP-Lite only, and never in a
 * fragment. The IPv4 header checksum and the transport checksum (TCP, UDP,
 * UDP-Lite; ICMPv6, whose pseudo-header holds the addresses) are updated
 * incrementally, so a packet that arrived with a wrong checksum leaves with a
 * wrong one. An IPv4 UDP checksum of 0 (none) stays 0; a UDP checksum that
 * becomes 0 is written 0xffff. An IPv6 UDP datagram that arrived without a
 * checksum gets one computed in full, as IPv6 requires.
 *
 * @param frame  the frame's first bytes, writable
 * @param avail  how many bytes frame holds (the first segment)
 * @param p      what ncd_parse() found in it (verdict NCD_PKT_OK)
 * @param x      the translation; its addresses are of the packet's family
 * @param flags  NCD_NAT_F_*
 * @return NCD_NAT_OK, or why nothing was written
 */
enum ncd_nat_result ncd_nat_rewrite(uint8_t *frame, uint32_t avail, const struct ncd_parsed *p,
				    const struct ncd_nat_xlate *x, unsigned int flags);

/**
 * The translation that undoes x for a packet p (before x was applied): its
 * replies get back the source and destination p had.
 */
void ncd_nat_reverse_of(const struct nc_trie_key *p, const struct ncd_nat_xlate *x,
			struct ncd_nat_xlate *rev);

/** The 5-tuple of a reply to the packet p once x is applied to it. */
void ncd_nat_reply_key(const struct nc_trie_key *p, const struct ncd_nat_xlate *x,
		       struct nc_trie_key *reply);

#endif
