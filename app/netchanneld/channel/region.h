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

#include "core/region_check.h"
#include "nc_region.h"

struct ncd;
struct ncd_batch;
struct ncd_channel;
struct ncd_worker;
struct ncd_port_stats;
struct rte_mbuf;

/* A ring as the daemon sees it: its geometry and its own index kept here, never read back. */
struct ncd_region_ring {
	struct nc_region_ring *r;
	struct nc_region_cons *c;      /* the consumer's line: r's own, or an rx ring's apart */
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
	uint8_t *base;                 /* the daemon's part: header, rx rings, rx buffers */
	uint64_t size;
	uint8_t *cbase;                /* the client's part: consumer lines, tx and free rings, tx buffers */
	uint64_t csize;
	int fd;                        /* the daemon's part, read-only, until it is passed on */
	int cfd;                       /* the client's part, until it is passed on (layout 2) */
	uint32_t layout;               /* nc_region_hdr.version: 2, or 1 (one part: cbase is base) */
	bool hugepages;                /* the daemon's part is on hugepages */
	uint32_t nrx;
	struct ncd_rc_geom g;          /* the buffers' geometry, which the client's writes must fit */
	struct ncd_region_ring *rx;    /* [nrx] */
	uint32_t *rx_channel;          /* [nrx]: the channel using rx ring k, or UINT32_MAX */
	struct ncd_region_ring tx, fr;
	struct ncd_rc_bufs b;          /* the rx buffers: the daemon's, the client's */
	bool one_ring;                 /* NC_HELLO_F_ONE_RING: rx ring 0 is every channel's */
	int efd;                       /* one_ring: the eventfd that wakes the client, or -1 */
	unsigned int worker;           /* the worker that serves its tx and free rings */
	unsigned int slot;             /* its connection's client slot */
	struct ncd_region_stats st;
};

/**
 * Make a connection's region, sized for the daemon's ports, in layout
 * (nc_region.h): NC_REGION_LAYOUT_VERSION's two parts, each a memfd sealed
 * against resizing, the daemon's part's descriptor read-only; or
 * NC_REGION_LAYOUT_ONE_PART's one, for a client of control protocol 4
 * (fd only; cbase is base).
 * @return it, or NULL with errno set (the log says what failed)
 */
struct ncd_region *ncd_region_create(const struct ncd *d, unsigned int slot, bool one_ring,
				     uint32_t layout);

/** Unmap and free a region no worker uses any more (after a grace period). */
void ncd_region_free(struct ncd_region *rg);

/**
 * An rx ring for a channel, labelled with its id and generation for the
 * client (nc_region_ring.channel); in a one_ring region, the one ring,
 * which every channel shares. @return its index, or -ENOSPC
 */
int ncd_region_ring_take(struct ncd_region *rg, uint32_t channel, uint64_t generation);

/**
 * Give a channel's rx ring back, once no worker delivers to it; what was on
 * it returns. A one_ring region's ring stays: the client gives back what it
 * holds of a channel that is gone (its generation names it).
 */
void ncd_region_ring_put(struct ncd_region *rg, int ring);

/**
 * The eventfd in *efd, made if there is none yet (-1), and published for
 * the workers that signal it. whose names it in the log should eventfd()
 * fail. @return the fd, or -errno of eventfd()
 */
int ncd_eventfd_once(int *efd, const char *whose);

/**
 * The eventfd of a one_ring region, made on the first ask, which workers
 * signal for any of its channels. @return it, or -errno of eventfd()
 */
int ncd_region_eventfd(struct ncd_region *rg);

/**
 * Where the wake-up of a region's client goes: the region's eventfd for a
 * one_ring client, else the channel's (*own).
 */
static inline const int *
ncd_region_efdp(const struct ncd_region *rg, const int *own)
{
	return rg != NULL && rg->one_ring ? &rg->efd : own;
}

/**
 * How many entries of rx ring `ring` a channel of ring_size may fill: all of
 * a one_ring region's (every channel shares it), else at most its ring_size.
 */
static inline uint32_t
ncd_region_limit(const struct ncd_region *rg, int ring, uint32_t ring_size)
{
	return rg->one_ring || ring_size > rg->rx[ring].size ? rg->rx[ring].size : ring_size;
}

/**
 * Packets on a channel's rx ring now that its client has not taken (the control thread's
 * view: the client's tail as it is, where it is between the worker's indexes).
 */
uint32_t ncd_region_rx_count(const struct ncd_region *rg, int ring);

/* Shared by the region's life (here) and the workers' copies (datapath/region.c). */

/*
 * The region's lock let go with a release store. x86's rte_spinlock_unlock()
 * is an xchg, a full fence, which would wait here for every copy into the
 * client's lines just made; a release store is all a lock's release needs
 * (as the kernel's spin_unlock), and the next lock, a burst later, finds
 * them done.
 */
static inline void
ncd_region_unlock(struct ncd_region *rg)
{
	__atomic_store_n(&rg->lock.locked, 0, __ATOMIC_RELEASE);
}

/*
 * A client's index refused. Delivering workers (under the region's lock)
 * and the worker that takes the tx ring (without it) both count here: an
 * atomic add, paid only when a client misbehaves, spares that worker the
 * lock on every loop.
 */
static inline void
ncd_region_bad_index(struct ncd_region *rg)
{
	__atomic_fetch_add(&rg->st.bad_index, 1, __ATOMIC_RELAXED);
}

/*
 * How many entries a ring the daemon produces has free, at least want if it
 * can. The client's tail is read only when its last accepted value leaves
 * too little room: a busy client writes that line all the time, and each
 * read of it is a miss. A tail is accepted only between the last one
 * accepted and the daemon's head.
 */
static inline uint32_t
ncd_region_rx_room(struct ncd_region *rg, struct ncd_region_ring *q, uint32_t limit, uint32_t want)
{
	uint32_t t, room = limit - (q->own - q->seen);

	if (room >= want)
		return room;
	t = __atomic_load_n(&q->c->tail, __ATOMIC_ACQUIRE);
	if (ncd_rc_tail_ok(q->seen, q->own, t))
		q->seen = t;
	else
		ncd_region_bad_index(rg);
	return limit - (q->own - q->seen);
}

/*
 * How many entries a ring the client produces holds: the client's head,
 * accepted only if it is at most a ring ahead of the daemon's tail.
 */
static inline uint32_t
ncd_region_tx_avail(struct ncd_region *rg, struct ncd_region_ring *q)
{
	uint32_t n = ncd_rc_avail(q->own, q->size, __atomic_load_n(&q->r->head, __ATOMIC_ACQUIRE));

	if (n == NCD_RC_BAD) {
		ncd_region_bad_index(rg);
		return 0;
	}
	return n;
}

#endif
