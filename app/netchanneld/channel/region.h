/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Isolated clients' regions (nc_region.h): made at HELLO, one per
 * connection; workers copy packets into them and take frames out of them,
 * trusting nothing the client wrote.
 */
#ifndef NCD_CHANNEL_REGION_H
#define NCD_CHANNEL_REGION_H

#include <stdbool.h>
#include <stdint.h>

#include <rte_spinlock.h>

#include "nc_region.h"

struct ncd;
struct ncd_channel;
struct ncd_worker;
struct ncd_port_stats;
struct rte_mbuf;

/* A ring as the daemon sees it: its geometry and its own index kept here, never read back. */
struct ncd_region_ring {
	struct nc_region_ring *r;
	uint32_t size, mask;
	uint32_t own;                  /* the daemon's index: head of an rx ring, tail of the others */
	uint32_t seen;                 /* rx rings: the client's tail as last accepted */
};

/* What a region's client did that was refused, and what it was given. */
#define NCD_REGION_FIELDS(X) X(rx_copied) X(tx_taken) X(freed) X(bad_index) X(bad_desc) \
	X(bad_free)

struct ncd_region_stats {
#define X(f) uint64_t f;
	NCD_REGION_FIELDS(X)
#undef X
};

struct ncd_region {
	/* Taken by workers that deliver and by the one that drains the free ring. */
	rte_spinlock_t lock;
	uint8_t *base;
	uint64_t size;
	int fd;                        /* the memfd, until it is passed on */
	bool hugepages;
	uint32_t nrx, buf_size, rx_bufs;
	uint64_t buf_off, tx_buf_off;
	struct ncd_region_ring *rx;    /* [nrx] */
	uint32_t *rx_channel;          /* [nrx]: the channel using rx ring k, or UINT32_MAX */
	struct ncd_region_ring tx, fr;
	uint32_t *free_bufs;           /* [rx_bufs]: a stack of the buffers the daemon holds */
	uint32_t nfree;
	uint8_t *held;                 /* [rx_bufs]: 1 while the client holds the buffer */
	unsigned int worker;           /* the worker that serves its tx and free rings */
	struct ncd_region_stats st;
};

/**
 * Make a connection's region, sized for the daemon's ports, and its
 * memfd, sealed against resizing.
 * @return it, or NULL with errno set (the log says what failed)
 */
struct ncd_region *ncd_region_create(const struct ncd *d, unsigned int slot);

/** Unmap and free a region no worker uses any more (after a grace period). */
void ncd_region_free(struct ncd_region *rg);

/**
 * An rx ring for a channel, labelled with its id and generation for the
 * client (nc_region_ring.channel). @return its index, or -ENOSPC
 */
int ncd_region_ring_take(struct ncd_region *rg, uint32_t channel, uint64_t generation);

/** Give a channel's rx ring back, once no worker delivers to it; what was on it returns. */
void ncd_region_ring_put(struct ncd_region *rg, int ring);

/**
 * Copy a batch of a channel's packets into a client's region and put them
 * on its rx ring `ring`, filling at most `limit` of its entries; free every
 * mbuf. Counts what did not fit in the channel's and the port's counters.
 * @return how many were delivered
 */
uint32_t ncd_region_deliver(struct ncd_worker *w, struct ncd_port_stats *ps,
			    struct ncd_channel *ch, struct ncd_region *rg, int ring,
			    uint32_t limit, struct rte_mbuf **m, uint32_t n);

/** A worker's turn at a region: its free ring drained and its tx ring sent. */
void ncd_region_serve(struct ncd *d, struct ncd_worker *w, struct ncd_region *rg, uint64_t now);

/** Packets on a channel's rx ring now (control thread's view, from its private index). */
uint32_t ncd_region_rx_count(const struct ncd_region *rg, int ring);

#endif
