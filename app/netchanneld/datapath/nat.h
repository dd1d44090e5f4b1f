/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * NAT on the datapath: what a worker does with a burst's NAT packets, over
 * the nat module's table of reverse mappings (nat/nat.h).
 */
#ifndef NCD_DATAPATH_NAT_H
#define NCD_DATAPATH_NAT_H

#include <stdbool.h>
#include <stdint.h>

#include "nat/nat.h"

struct ncd;
struct ncd_worker;
struct rte_mbuf;

/*
 * A burst's packets for NAT, as a worker's dispatch hands them over: each
 * either matched a NAT channel (ch) or is a reply of a translated flow (rev).
 */
struct ncd_nat_burst {
	uint16_t n;
	struct rte_mbuf *m[NCD_BURST];
	const struct ncd_parsed *pp[NCD_BURST];
	const struct ncd_channel *ch[NCD_BURST];  /* the NAT channel it matched, or NULL */
	struct ncd_nat_flow *rev[NCD_BURST];      /* the flow it replies to, or NULL */
};

/**
 * Worker: find which of a burst's packets are replies of translated flows,
 * in one bulk lookup by their 5-tuple. Only while a NAT channel keeps
 * reverse mappings; otherwise it costs nothing.
 *
 * @param ok   which packets parsed (others are not looked up)
 * @param rev  set for each packet: its flow, or NULL
 * @return whether it looked (some NAT channel keeps reverse mappings)
 */
bool ncd_nat_replies(const struct ncd *d, const struct ncd_parsed *parsed, const uint8_t *ok,
		     uint16_t n, struct ncd_nat_flow **rev);

/**
 * Worker: translate a burst's NAT packets and send them, one tx burst per
 * out port, counted on port pi (where they came in) and their channels.
 * Those whose next hop is not cached go to the control thread.
 *
 * @param now    the TSC, or 0 (read here)
 * @param drop   what could not be translated or routed (counted): the caller frees it
 * @param ndrop  how many drop holds, updated
 */
void ncd_nat_process(struct ncd *d, struct ncd_worker *w, unsigned int pi,
		     struct ncd_nat_burst *b, uint64_t now, struct rte_mbuf **drop,
		     uint16_t *ndrop);

#endif
