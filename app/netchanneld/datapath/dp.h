/* SPDX-License-Identifier: BSD-3-Clause */
/* The datapath's own calls, between its files: not for other modules. */
#ifndef NCD_DATAPATH_DP_H
#define NCD_DATAPATH_DP_H

#include <stdint.h>

#include "core/config.h"
#include "core/stats.h"

struct ncd;
struct ncd_channel;
struct ncd_port;
struct ncd_worker;
struct rte_mbuf;

/* Bytes the parser may need: Ethernet, two tags, IPv6 and a chain of extension headers. */
#define NCD_PARSE_BYTES 256

/*
 * Matched packets of isolated clients' channels (not shared) in the current
 * burst, in burst order, as runs of consecutive packets of one channel:
 * copied into their regions without being sorted into a batch a channel
 * first. With a channel per flow, a burst's 32 packets have 32 channels, and
 * sorting them into batches cost more than the copies; with one channel, the
 * burst is one run, as it was one batch.
 */
struct ncd_iso_run {
	struct ncd_channel *ch;
	struct ncd_region *rg;
	uint16_t first, n;              /* its packets: m[first] to m[first + n - 1] */
	uint16_t marks;                 /* how many of them the NIC's mark found */
	uint16_t sent;                  /* how many were copied into the region */
};

struct ncd_iso_burst {
	uint16_t n, nrun;
	struct rte_mbuf *m[NCD_BURST];
	struct ncd_iso_run run[NCD_BURST];
};

/* Matched packets of one channel without a region (a ring's, or shared) in the current burst. */
struct ncd_batch {
	struct ncd_channel *ch;
	struct rte_mbuf *m[NCD_BURST];
	uint32_t hash[NCD_BURST];      /* a shared channel's: each packet's flow hash */
	uint32_t n;
	uint32_t marks;                /* how many of them the NIC's mark found */
	uint32_t sent;                 /* how many were enqueued */
};

/** Send misses to the port's exception device (the kernel); count what it does not take. */
void ncd_dp_to_kernel(const struct ncd_port *p, uint16_t txq, struct ncd_port_stats *ps,
		      struct rte_mbuf **m, uint16_t n);

/**
 * A datagram reassembled from fragments that no channel claims, to the
 * kernel as the fragments it came in (ncd_frag_to_kernel()); counted once,
 * as the packet it is.
 */
void ncd_dp_to_kernel_whole(const struct ncd *d, const struct ncd_port *p, uint16_t txq,
			    struct ncd_port_stats *ps, struct rte_mbuf *m);

/** What the kernel sends on port pi's exception device, out of the port unchanged. */
void ncd_dp_from_kernel(struct ncd *d, struct ncd_worker *w, unsigned int pi);

/**
 * A client's packets, now the daemon's mbufs (IP packets without L2 bits in
 * packet_type): each checked against the channel's flows, addressed, sent
 * on the channel's port; every one counted in exactly one outcome.
 */
void ncd_dp_tx_send(struct ncd *d, struct ncd_worker *w, const struct ncd_channel *ch,
		    struct rte_mbuf **m, uint16_t n, uint64_t now);

/** A client's packets on its channel's tx ring: checked, addressed, sent. */
void ncd_dp_tx_channel(struct ncd *d, struct ncd_worker *w, const struct ncd_channel *ch,
		       uint64_t now);

/** Clients' and NAT's packets whose next hop the control thread resolved: sent. */
void ncd_dp_tx_resolved(struct ncd *d, struct ncd_worker *w);

/**
 * The client slots this worker serves: their free rings drained, their alloc
 * rings filled; or their regions' free rings drained and tx rings sent.
 */
void ncd_dp_serve_slot_rings(struct ncd *d, struct ncd_worker *w, uint64_t now);

#endif
