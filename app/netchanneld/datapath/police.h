/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The exception path's policer (exception.police): what goes to the kernel
 * through a port's exception device, metered in buckets by kind, as routers
 * police their control plane. The datapath's own: workers call it on the
 * packets they are about to hand the kernel.
 */
#ifndef NCD_DATAPATH_POLICE_H
#define NCD_DATAPATH_POLICE_H

#include <stdbool.h>
#include <stdint.h>

#include <rte_meter.h>

#include "core/config.h"
#include "packet/parse.h"

struct ncd;
struct ncd_port_stats;
struct rte_mbuf;

/*
 * A port's policer: a profile per bucket and each worker's buckets, at its
 * share of the rate (the rate over the workers that poll the port; the
 * bursts whole), on cache lines of their own.
 */
struct ncd_police {
	unsigned int nbuckets;          /* NCD_POLICE_PROTECT + its protect entries */
	unsigned int nprotect;
	bool bytes[NCD_POLICE_MAX];     /* the bucket counts bytes, else packets */
	struct nc_trie_rule protect[NCD_POLICE_PROTECT_MAX];
	struct rte_meter_srtcm_profile prof[NCD_POLICE_MAX];
	struct ncd_police_worker {
		struct rte_meter_srtcm m[NCD_POLICE_MAX];
	} __rte_cache_aligned w[];      /* by worker index */
};

/**
 * Each port's policer as its config says (d->police[port], NULL where
 * exception.police is not given), before the workers start.
 * @return 0, or -1 (out of memory, or rte_meter refused a bucket: logged)
 */
int ncd_police_init(struct ncd *d);

/** Free what ncd_police_init() allocated. */
void ncd_police_free(struct ncd *d);

/**
 * A kernel-bound packet's bucket: a protect entry its key matches (the
 * first), else ND (ICMPv6 133-137), ICMP (v4 or v6), ARP, or other.
 *
 * @param pc  the port's policer
 * @param pp  the packet parsed as IP, or NULL (not IP, or not parsed as such)
 * @param m   the packet
 * @return its bucket (enum ncd_police_bucket, or a protect entry's)
 */
static inline uint8_t ncd_police_class(const struct ncd_police *pc,
					const struct ncd_parsed *pp, const struct rte_mbuf *m);

/** ncd_police_class() for what is not plainly other: protect entries, ICMP, not IP. */
uint8_t ncd_police_class_slow(const struct ncd_police *pc, const struct ncd_parsed *pp,
			      const struct rte_mbuf *m);

/* Inline for a flood's packets (IP, not ICMP, no protect entry): other, at once. */
static inline uint8_t
ncd_police_class(const struct ncd_police *pc, const struct ncd_parsed *pp,
		 const struct rte_mbuf *m)
{
	if (likely(pp != NULL && pc->nprotect == 0 && pp->key.proto != 1 && pp->key.proto != 58))
		return NCD_POLICE_OTHER;
	return ncd_police_class_slow(pc, pp, m);
}

/**
 * Police kernel-bound packets: each bucket's packets of the burst pass at
 * once when its tokens cover them all, else one by one. What is over its
 * bucket is freed and counted (drop_exc_police and the bucket's); the rest
 * are moved to the front of m, in order.
 *
 * @param pc   the port's policer
 * @param w    the worker's index
 * @param ps   the worker's counters of the port
 * @param m    the packets
 * @param cls  each one's bucket (ncd_police_class())
 * @param n    how many
 * @param now  the TSC, read once a burst
 * @return how many pass (m[0] to m[return - 1])
 */
uint16_t ncd_police_burst(struct ncd_police *pc, unsigned int w, struct ncd_port_stats *ps,
			  struct rte_mbuf **m, const uint8_t *cls, uint16_t n, uint64_t now);

#endif
