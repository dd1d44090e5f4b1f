/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What netchanneld's XDP program (ncd_xdp.c) and the daemon share: the
 * names of its maps, the layout of a claim, and its counters. Included by
 * both, so it holds only fixed-size types.
 */
#ifndef NCD_XDP_H
#define NCD_XDP_H

#include <linux/types.h>

#define NCD_XDP_PROG_NAME "ncd_xdp"       /* the program's name, as the kernel lists it */
#define NCD_XDP_CLAIMS_MAP "ncd_claims"
#define NCD_XDP_STATS_MAP "ncd_xdp_stats"
#define NCD_XDP_QUEUES 64                 /* xsks_map's entries: rx queues of a port */
#define NCD_XDP_CLAIMS 65536              /* ncd_claims's entries */
/* A claim's protocol that says only: something of the family is claimed (IANA: reserved). */
#define NCD_XDP_ANY_OF_FAMILY 255
/* IPv6 hop-by-hop, routing and destination options headers the program walks past. */
#define NCD_XDP_EXT_HEADERS 4
/* A rule's port range up to this long is claimed port by port; a longer one, as any port. */
#define NCD_XDP_MAX_PORTS_A_RULE 64

/*
 * A claim: family 4 or 6, IP protocol (0: any), destination port in host
 * order (0: any). Its value is how many of the daemon's channels claim it.
 */
struct ncd_xdp_claim_key {
	__u8 family;
	__u8 proto;
	__u16 dport;
};

/* What the program did with each packet, per CPU, by index. */
enum ncd_xdp_stat {
	NCD_XDP_PASS,          /* not claimed: to the kernel */
	NCD_XDP_CLAIMED,       /* claimed: redirected to the queue's socket */
	NCD_XDP_NO_SOCKET,     /* claimed, but the queue has no socket: to the kernel */
	NCD_XDP_FRAGMENT,      /* a fragment, or IPv6 headers past the walk, while the family
				* has claims: redirected */
	NCD_XDP_STATS
};

#endif
