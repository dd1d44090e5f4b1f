/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Workers' copies into and out of isolated clients' regions
 * (datapath/region.c); the regions themselves are channel/region.h's.
 */
#ifndef NCD_DATAPATH_REGION_H
#define NCD_DATAPATH_REGION_H

#include <stdint.h>

struct ncd;
struct ncd_iso_burst;
struct ncd_channel;
struct ncd_port_stats;
struct ncd_region;
struct ncd_worker;
struct rte_mbuf;

/**
 * Copy a batch of a channel's packets into a client's region and put them
 * on its rx ring `ring`, filling at most `limit` of its entries; free every
 * mbuf. Counts what did not fit in the channel's and the port's counters.
 * @return how many were delivered
 */
uint32_t ncd_region_deliver(struct ncd_worker *w, struct ncd_port_stats *ps,
			    struct ncd_channel *ch, struct ncd_region *rg, int ring,
			    uint32_t limit, struct rte_mbuf **m, uint32_t n);

/**
 * The runs of an isolated burst (each with its channel and region set),
 * copied in burst order, each region's under one hold of its lock, and
 * counted in each channel's counters (hits and copies) and the port's. Sets
 * each run's sent; frees every mbuf.
 */
void ncd_region_deliver_burst(struct ncd_worker *w, struct ncd_port_stats *ps,
			      struct ncd_iso_burst *ib);

/**
 * What waited on a static channel's own ring goes into the ring of the
 * isolated client that attached to it (ring of rg, at most limit entries),
 * as if it had come now (control thread: it copies as a worker would); what no longer fits is dropped (drop_ring_full).
 * Call after the region is the channel's (ncd_channel_region_attach(),
 * ncd_channel_share_join()). @return how many packets moved
 */
uint32_t ncd_region_hand_over(struct ncd *d, struct ncd_channel *ch, struct ncd_region *rg,
			      int ring, uint32_t limit);

/** A worker's turn at a region: its free ring drained and its tx ring sent. */
void ncd_region_serve(struct ncd *d, struct ncd_worker *w, struct ncd_region *rg, uint64_t now);

#endif
