/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A channel's rule as rte_flow patterns, which rules may beat others, and
 * the mock's reading of a pattern against a frame. No state: the daemon
 * (offload.c) and the unit tests share it.
 */
#ifndef NCD_FLOW_PATTERN_H
#define NCD_FLOW_PATTERN_H

#include <stdbool.h>
#include <stdint.h>

#include <rte_flow.h>

#include "nc_trie.h"

/* The items of one pattern, with the storage their spec and mask point to. */
struct ncd_flow_pattern {
	struct rte_flow_item items[4];  /* eth, ipv4 or ipv6, [tcp|udp|sctp], end */
	union {
		struct rte_flow_item_ipv4 v4;
		struct rte_flow_item_ipv6 v6;
	} l3_spec, l3_mask;
	union {
		struct rte_flow_item_tcp tcp;
		struct rte_flow_item_udp udp;
		struct rte_flow_item_sctp sctp;
	} l4_spec, l4_mask;
};

/**
 * Translate a rule into rte_flow patterns: one, or two for a rule that
 * names no address (it matches IPv4 and IPv6).
 *
 * @param r     a valid rule
 * @param p     room for two patterns
 * @param why   set on -ENOTSUP: what the patterns cannot say
 * @return the number of patterns (1 or 2), or -ENOTSUP
 */
int ncd_flow_translate(const struct nc_trie_rule *r, struct ncd_flow_pattern p[2],
		       const char **why);

/**
 * Can one packet match both rules? Conservative: true when unsure.
 */
bool ncd_rules_overlap(const struct nc_trie_rule *a, const struct nc_trie_rule *b);

/**
 * Does a frame match a pattern as a NIC would read it: an untagged Ethernet
 * frame, the IP header's own fields, and the L4 header right after the IP
 * header (IPv4 options skipped; no IPv6 extension headers, no fragments)?
 * The offload mock's matcher: independent of the daemon's parser and trie.
 */
bool ncd_flow_match(const struct rte_flow_item *items, const uint8_t *frame, uint32_t len);

#endif
