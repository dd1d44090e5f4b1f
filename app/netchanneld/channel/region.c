/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Isolated clients' regions. The region is the client's to scribble on: the
 * daemon keeps the geometry of every ring and its own indexes here, reads
 * only the client's index (forward, and never past what was produced) and
 * checks every descriptor before it uses it. The mbuf never leaves the
 * daemon: packets are copied in and out.
 */
#define _GNU_SOURCE /* memfd_create, F_ADD_SEALS */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <rte_common.h>
#include <rte_ether.h>
#include <rte_mbuf.h>

#define NCD_LOGTYPE ncd_logtype_control
#include "channel/channel.h"
#include "channel/region.h"
#include "datapath/datapath.h"
#include "datapath/dp.h"
#include "datapath/mbuf_free.h"
#include "datapath/prefetch.h"
#include "ncd.h"

#define RX_RINGS 64u                   /* a connection's channels, at most, with a ring each */
#define FREE_BATCH 512u                /* buffers taken back at one look at the free ring */
#define FREE_LOW 128u                  /* buffers the client holds before the daemon looks */
#define HUGE_PAGE (2u << 20)
/* Hugepages are DPDK's too: a region takes them only while this many stay free after it. */
#define HUGE_SPARE (256ull << 20)

static uint64_t
ring_bytes(uint32_t size)
{
	return RTE_ALIGN_CEIL(sizeof(struct nc_region_ring) + (uint64_t)size * sizeof(struct nc_desc),
			      RTE_CACHE_LINE_SIZE);
}

/* Free 2 MiB hugepages not promised to anyone, in bytes. */
static uint64_t
huge_available(void)
{
	const char *dir = "/sys/kernel/mm/hugepages/hugepages-2048kB/";
	unsigned long v[2] = { 0, 0 };
	const char *names[2] = { "free_hugepages", "resv_hugepages" };

	for (int i = 0; i < 2; i++) {
		char path[128];
		FILE *f;

		snprintf(path, sizeof(path), "%s%s", dir, names[i]);
		f = fopen(path, "r");
		if (f == NULL || fscanf(f, "%lu", &v[i]) != 1)
			v[i] = 0;
		if (f != NULL)
			fclose(f);
	}
	return v[0] > v[1] ? (uint64_t)(v[0] - v[1]) * HUGE_PAGE : 0;
}

/*
 * A part's memfd, sized, sealed against shrinking and growing (a client
 * cannot shrink it under a worker's copy), and mapped for the daemon; on
 * hugepages (huge) or not. The seal against further seals is the caller's
 * to add, once it has added what it wants.
 * @return the fd, or -1 with errno set
 */
static int
part_try(const char *name, uint64_t size, bool huge, uint8_t **base)
{
	int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING | (huge ? MFD_HUGETLB : 0));
	int err;

	if (fd < 0)
		return -1;
	if (ftruncate(fd, (off_t)size) != 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) != 0)
		goto out_close;
	*base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (*base != MAP_FAILED)
		return fd;
	*base = NULL;
out_close:
	err = errno;
	close(fd);
	errno = err;
	return -1;
}

/*
 * A part, on hugepages if huge and the host has them to spare (size then
 * rounded up to them), else, or if that fails (another process may take
 * the pages meanwhile), on ordinary shared memory.
 * @return the fd, or -1 (logged)
 */
static int
part_map(struct ncd_region *rg, const char *name, uint64_t *size, bool huge, uint8_t **base)
{
	uint64_t hsize = RTE_ALIGN_CEIL(*size, HUGE_PAGE);
	int fd = -1;

	if (huge && huge_available() >= hsize + HUGE_SPARE) {
		fd = part_try(name, hsize, true, base);
		if (fd >= 0) {
			*size = hsize;
			rg->hugepages = true;
			return fd;
		}
	}
	fd = part_try(name, *size, false, base);
	if (fd < 0)
		NCD_LOG(ERR, "region: memfd %s of %" PRIu64 " bytes, sealed and mapped: %s", name,
			*size, strerror(errno));
	return fd;
}

/*
 * The daemon's part for the client: no one may write it but through the
 * daemon's mapping (F_SEAL_FUTURE_WRITE), and the client's descriptor is
 * read-only besides, so that it can neither map it writable nor punch a
 * hole in it (fallocate() needs a writable descriptor): a hugetlb page freed
 * under the daemon's mapping, with the pool empty, was SIGBUS in a worker.
 * @return the read-only fd (fd closed), or -1 (logged)
 */
static int
part_read_only(int fd)
{
	char path[64];
	int ro;

	if (fcntl(fd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE | F_SEAL_SEAL) != 0) {
		NCD_LOG(ERR, "region: sealing the daemon's part against writes: %s",
			strerror(errno));
		close(fd);
		return -1;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	ro = open(path, O_RDONLY | O_CLOEXEC);
	if (ro < 0)
		NCD_LOG(ERR, "region: open(%s, O_RDONLY): %s", path, strerror(errno));
	close(fd);
	return ro;
}

static void
ring_init(struct ncd_region_ring *q, uint8_t *ring, struct nc_region_cons *cons, uint32_t size)
{
	q->r = (struct nc_region_ring *)ring;
	q->c = cons != NULL ? cons : &q->r->cons;
	q->size = size;
	q->mask = size - 1;
	q->own = 0;
	q->seen = 0;
}

struct ncd_region *
ncd_region_create(const struct ncd *d, unsigned int slot, bool one_ring)
{
	struct ncd_region *rg = calloc(1, sizeof(*rg));
	const uint32_t nbufs = d->cfg.region.rx_buffers;
	/* One ring for every channel: it can hold no more descriptors than there are buffers. */
	const uint32_t rx_size = one_ring ?
		RTE_MAX(rte_align32pow2(nbufs), d->cfg.region.rx_ring_size) :
		d->cfg.region.rx_ring_size;
	const uint32_t nrx = one_ring ? 1 : RX_RINGS;
	const uint32_t tx_size = d->cfg.region.tx_ring_size;
	uint32_t frame = RTE_ETHER_MAX_LEN;
	struct nc_region_hdr *h;
	uint64_t off;
	int err;

	if (rg == NULL)
		return NULL;
	for (unsigned int i = 0; i < d->cfg.nports; i++) {
		uint32_t f = (uint32_t)d->cfg.ports[i].mtu + RTE_ETHER_HDR_LEN + 2 * 4;

		frame = RTE_MAX(frame, f);
	}
	rte_spinlock_init(&rg->lock);
	rg->fd = -1;
	rg->cfd = -1;
	rg->efd = -1;
	rg->one_ring = one_ring;
	rg->worker = slot % d->cfg.nworkers;
	rg->nrx = nrx;
	const uint32_t buf_size = RTE_ALIGN_CEIL(RTE_MAX(frame, 2048u), RTE_CACHE_LINE_SIZE);
	/* The daemon's part: the header, the rx rings, the rx buffers. */
	uint64_t rx_off = NC_REGION_HDR_SIZE, rx_stride = ring_bytes(rx_size);
	uint64_t buf_off = RTE_ALIGN_CEIL(rx_off + rx_stride * nrx, 4096);

	rg->size = RTE_ALIGN_CEIL(buf_off + (uint64_t)buf_size * nbufs, 4096);
	/* The client's part: the rx rings' consumer lines, the tx and free rings, the tx buffers. */
	off = (uint64_t)nrx * sizeof(struct nc_region_cons);
	uint64_t tx_off = off;
	off += ring_bytes(tx_size);
	uint64_t free_off = off;
	off += ring_bytes(nbufs);
	uint64_t tx_buf_off = RTE_ALIGN_CEIL(off, 4096);

	rg->csize = RTE_ALIGN_CEIL(tx_buf_off + (uint64_t)buf_size * tx_size, 4096);
	ncd_rc_geom_init(&rg->g, buf_off, tx_buf_off, buf_size, nbufs, tx_size);
	/* Descriptors name buffers by a 32-bit offset. */
	if (rg->size > UINT32_MAX || rg->csize > UINT32_MAX) {
		NCD_LOG(ERR, "region: %" PRIu64 " and %" PRIu64 " bytes, over 4 GiB: "
			"control.region is too large", rg->size, rg->csize);
		errno = EFBIG;
		goto fail;
	}
	rg->rx = calloc(nrx, sizeof(*rg->rx));
	rg->rx_channel = malloc(nrx * sizeof(*rg->rx_channel));
	rg->b.free = malloc(nbufs * sizeof(*rg->b.free));
	rg->b.held = calloc(nbufs, 1);
	if (rg->rx == NULL || rg->rx_channel == NULL || rg->b.free == NULL || rg->b.held == NULL) {
		errno = ENOMEM;
		goto fail;
	}
	rg->fd = part_map(rg, "netchannel-region", &rg->size, true, &rg->base);
	if (rg->fd < 0)
		goto fail;
	rg->cfd = part_map(rg, "netchannel-region-client", &rg->csize, false, &rg->cbase);
	if (rg->cfd < 0)
		goto fail;
	if (fcntl(rg->cfd, F_ADD_SEALS, F_SEAL_SEAL) != 0) {
		NCD_LOG(ERR, "region: sealing the client's part: %s", strerror(errno));
		goto fail;
	}
	for (uint32_t k = 0; k < nrx; k++) {
		ring_init(&rg->rx[k], rg->base + rx_off + k * rx_stride,
			  (struct nc_region_cons *)rg->cbase + k, rx_size);
		rg->rx[k].r->channel = one_ring ? NC_RING_ALL_CHANNELS : NC_RING_NO_CHANNEL;
		rg->rx_channel[k] = UINT32_MAX;
	}
	ring_init(&rg->tx, rg->cbase + tx_off, NULL, tx_size);
	ring_init(&rg->fr, rg->cbase + free_off, NULL, nbufs);
	for (uint32_t i = 0; i < nbufs; i++)
		rg->b.free[i] = nbufs - 1 - i;
	rg->b.nfree = nbufs;
	h = (struct nc_region_hdr *)rg->base;
	*h = (struct nc_region_hdr){
		.magic = NC_REGION_MAGIC, .version = NC_REGION_VERSION, .size = rg->size,
		.nrx = nrx, .rx_size = rx_size, .tx_size = tx_size, .free_size = nbufs,
		.buf_size = buf_size, .rx_bufs = nbufs, .rx_off = rx_off,
		.rx_stride = rx_stride, .tx_off = tx_off, .free_off = free_off,
		.buf_off = buf_off, .tx_buf_off = tx_buf_off, .client_size = rg->csize,
		.rx_cons_off = 0,
	};
	rg->fd = part_read_only(rg->fd);
	if (rg->fd < 0)
		goto fail;
	return rg;

fail:
	err = errno;
	ncd_region_free(rg);
	errno = err;
	return NULL;
}

void
ncd_region_free(struct ncd_region *rg)
{
	if (rg == NULL)
		return;
	if (rg->base != NULL)
		munmap(rg->base, rg->size);
	if (rg->cbase != NULL)
		munmap(rg->cbase, rg->csize);
	if (rg->fd >= 0)
		close(rg->fd);
	if (rg->cfd >= 0)
		close(rg->cfd);
	if (rg->efd >= 0) {
		/* A client asleep on its copy wakes, and finds the daemon gone. */
		eventfd_write(rg->efd, 1);
		close(rg->efd);
	}
	free(rg->rx);
	free(rg->rx_channel);
	free(rg->b.free);
	free(rg->b.held);
	free(rg);
}

int
ncd_region_ring_take(struct ncd_region *rg, uint32_t channel, uint64_t generation)
{
	if (rg->one_ring)
		return 0;
	for (uint32_t k = 0; k < rg->nrx; k++)
		if (rg->rx_channel[k] == UINT32_MAX) {
			struct ncd_region_ring *q = &rg->rx[k];

			/* A fresh start: indexes where the last user left them, told to the client. */
			q->seen = q->own;
			__atomic_store_n(&q->r->head, q->own, __ATOMIC_RELEASE);
			__atomic_store_n(&q->c->tail, q->own, __ATOMIC_RELEASE);
			__atomic_store_n(&q->c->want_wakeup, 0, __ATOMIC_RELAXED);
			__atomic_store_n(&q->r->generation, (uint32_t)generation, __ATOMIC_RELAXED);
			/* Release: a client that sees its channel here sees the fresh indexes. */
			__atomic_store_n(&q->r->channel, channel, __ATOMIC_RELEASE);
			rg->rx_channel[k] = channel;
			return (int)k;
		}
	return -ENOSPC;
}

/*
 * The region's lock let go with a release store. x86's rte_spinlock_unlock()
 * is an xchg, a full fence, which would wait here for every copy into the
 * client's lines just made; a release store is all a lock's release needs
 * (as the kernel's spin_unlock), and the next lock, a burst later, finds
 * them done.
 */
static inline void
region_unlock(struct ncd_region *rg)
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
bad_index(struct ncd_region *rg)
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
rx_room(struct ncd_region *rg, struct ncd_region_ring *q, uint32_t limit, uint32_t want)
{
	uint32_t t, room = limit - (q->own - q->seen);

	if (room >= want)
		return room;
	t = __atomic_load_n(&q->c->tail, __ATOMIC_ACQUIRE);
	if (ncd_rc_tail_ok(q->seen, q->own, t))
		q->seen = t;
	else
		bad_index(rg);
	return limit - (q->own - q->seen);
}

/*
 * How many entries a ring the client produces holds: the client's head,
 * accepted only if it is at most a ring ahead of the daemon's tail.
 */
static inline uint32_t
tx_avail(struct ncd_region *rg, struct ncd_region_ring *q)
{
	uint32_t n = ncd_rc_avail(q->own, q->size, __atomic_load_n(&q->r->head, __ATOMIC_ACQUIRE));

	if (n == NCD_RC_BAD) {
		bad_index(rg);
		return 0;
	}
	return n;
}

void
ncd_region_ring_put(struct ncd_region *rg, int ring)
{
	struct ncd_region_ring *q = &rg->rx[ring];

	if (rg->one_ring)
		return;
	/* First: a client that finds it gone reads no entry whose buffer is taken back below. */
	__atomic_store_n(&q->r->channel, NC_RING_NO_CHANNEL, __ATOMIC_RELEASE);
	rte_spinlock_lock(&rg->lock);
	/*
	 * What the client did not take comes back now: the entries between the
	 * client's tail (read now: workers read it lazily) and the daemon's head.
	 * The client may have rewritten them; each is checked as any buffer it
	 * gives back.
	 */
	rx_room(rg, q, q->size, UINT32_MAX);
	for (uint32_t i = q->seen; i != q->own; i++) {
		uint32_t off = q->r->desc[i & q->mask].offset;

		ncd_rc_buf_return(&rg->g, &rg->b, off);
	}
	q->seen = q->own;
	rg->rx_channel[ring] = UINT32_MAX;
	region_unlock(rg);
}

/* What a copy into a region left out: no buffer, no room on the ring; and the bytes it copied. */
struct copy_tally {
	uint32_t nobuf, full;
	uint64_t bytes;
};

/*
 * The buffers and descriptors the next n packets will take were last read
 * by the client's core: ask for all their lines at once, so that the misses
 * overlap, and before the lock (a full fence, which would wait for the
 * stores that miss) rather than in the copies one by one. A hint only: what
 * it reads may change before the lock is had.
 */
static inline void
prefetch_room(const struct ncd_region *rg, const struct ncd_region_ring *q, uint32_t buf_from,
	      uint32_t desc_from, uint32_t n)
{
	/* Relaxed loads: other workers may change them under the lock meanwhile. */
	uint32_t nfree = __atomic_load_n(&rg->b.nfree, __ATOMIC_RELAXED);
	uint32_t own = __atomic_load_n(&q->own, __ATOMIC_RELAXED);

	for (uint32_t i = 0; i < n && buf_from + i < nfree; i++) {
		uint32_t b = __atomic_load_n(&rg->b.free[nfree - 1 - buf_from - i],
					     __ATOMIC_RELAXED);
		uint32_t e = own + desc_from + i;

		ncd_prefetch_for_write(rg->base + rg->g.buf_off + (uint64_t)b * rg->g.buf_size);
		if ((e & 3) == 0 || i == 0)
			ncd_prefetch_for_write(&q->r->desc[e & q->mask]);
	}
}

/*
 * The descriptors of one hold of a region's lock, put on their rings
 * together once the copies are done, and then each ring's head. x86 commits
 * stores in order: a store to a line the client's core read last (a
 * descriptor's, a head's) waits for the line to cross the cores, and every
 * store after it waits behind it. Written after each copy, a descriptor held
 * up the next packet's copy, and with a channel per flow, each packet's head
 * did too.
 */
struct desc_stage {
	uint32_t n, npub;
	struct nc_desc *slot[NCD_BURST];       /* the ring entry each goes to */
	struct nc_desc d[NCD_BURST];
	struct ncd_region_ring *pub[NCD_BURST]; /* the rings whose heads are to move */
};

/* Put the descriptors st holds on their rings; their heads stay where they are. */
static void
stage_write(struct desc_stage *st)
{
	for (uint32_t i = 0; i < st->n; i++)
		*st->slot[i] = st->d[i];
	st->n = 0;
}

/*
 * Everything st holds onto the rings, then each ring's head: every entry it
 * produced, whole frames only (a frame's buffers all come in together).
 */
static void
stage_flush(struct desc_stage *st)
{
	stage_write(st);
	for (uint32_t i = 0; i < st->npub; i++)
		__atomic_store_n(&st->pub[i]->r->head, st->pub[i]->own, __ATOMIC_RELEASE);
	st->npub = 0;
}

/*
 * Copy a channel's packets into rx ring q of the region (its lock held),
 * filling at most limit of its entries; their descriptors go to st, to be
 * published by stage_flush() before the lock is let go. The mbufs stay the
 * caller's. @return how many were copied
 */
static uint32_t
region_copy(struct ncd_region *rg, struct ncd_region_ring *q, uint32_t limit,
	    const struct ncd_channel *ch, struct rte_mbuf **m, uint32_t n, struct copy_tally *t,
	    struct desc_stage *st)
{
	uint32_t room, i, sent = 0, used = 0;

	room = rx_room(rg, q, limit, n);
	for (i = 0; i < n; i++) {
		uint32_t len = m[i]->pkt_len;
		uint32_t need = likely(len <= rg->g.buf_size) ? 1 :
				(len + rg->g.buf_size - 1) / rg->g.buf_size;

		/*
		 * A frame longer than a buffer (a datagram reassembled from fragments)
		 * takes several, each descriptor but the last marked NC_DESC_F_MORE,
		 * and all of them or none.
		 */
		if (need > rg->b.nfree) {
			t->nobuf++;
			continue;
		}
		if (used + need > room)
			room = rx_room(rg, q, limit, used + need);
		if (used + need > room) {
			t->full++;
			continue;
		}
		for (uint32_t k = 0, at = 0; k < need; k++, at += rg->g.buf_size) {
			uint32_t b = ncd_rc_buf_take(&rg->b), part = RTE_MIN(len - at, rg->g.buf_size);
			uint32_t off = (uint32_t)(rg->g.buf_off + (uint64_t)b * rg->g.buf_size);
			const void *src;

			src = rte_pktmbuf_read(m[i], at, part, rg->base + off);
			if (src != rg->base + off)
				rte_memcpy(rg->base + off, src, part);
			/*
			 * A frame in many buffers (reassembled) may fill st before the
			 * burst's end: the descriptors go on the ring, not yet the head,
			 * which would show the client part of a frame.
			 */
			if (st->n == RTE_DIM(st->d))
				stage_write(st);
			st->slot[st->n] = &q->r->desc[q->own++ & q->mask];
			st->d[st->n++] = (struct nc_desc){
				.offset = off, .length = part, .channel = ch->id,
				.flags = ch->desc_gen | (k + 1 < need ? NC_DESC_F_MORE : 0) };
		}
		used += need;
		sent++;
		t->bytes += len;
	}
	if (sent > 0 && (st->npub == 0 || st->pub[st->npub - 1] != q)) {
		/* A call a batch, a batch a channel: more than a burst's rings only if called so. */
		if (st->npub == RTE_DIM(st->pub))
			stage_flush(st);
		st->pub[st->npub++] = q;
	}
	rg->st.rx_copied += sent;
	return sent;
}

/* One batch into ring ring of the region under one hold of its lock, published. */
static uint32_t
region_copy_one(struct ncd_region *rg, int ring, uint32_t limit, const struct ncd_channel *ch,
		struct rte_mbuf **m, uint32_t n, struct copy_tally *t)
{
	struct desc_stage st;
	uint32_t sent;

	st.n = 0;
	st.npub = 0;
	rte_spinlock_lock(&rg->lock);
	sent = region_copy(rg, &rg->rx[ring], limit, ch, m, n, t, &st);
	stage_flush(&st);
	region_unlock(rg);
	return sent;
}

/* A channel's copy into its region, in its counters and its port's. */
static inline void
count_copy(struct ncd_chan_stats *cs, struct ncd_port_stats *ps, uint32_t sent,
	   const struct copy_tally *t)
{
	cs->delivered += sent;
	cs->bytes += t->bytes;
	cs->drop_no_buf += t->nobuf;
	cs->drop_ring_full += t->full;
	ps->delivered += sent;
	ps->drop_no_buf += t->nobuf;
	ps->drop_ring_full += t->full;
}

uint32_t
ncd_region_deliver(struct ncd_worker *w, struct ncd_port_stats *ps, struct ncd_channel *ch,
		   struct ncd_region *rg, int ring, uint32_t limit, struct rte_mbuf **m, uint32_t n)
{
	struct ncd_chan_stats *cs = &w->cstats[ch->id];
	struct copy_tally t = { 0, 0, 0 };
	uint32_t sent;

	prefetch_room(rg, &rg->rx[ring], 0, 0, n);
	sent = region_copy_one(rg, ring, limit, ch, m, n, &t);
	ncd_mbuf_free_burst(m, n);
	count_copy(cs, ps, sent, &t);
	return sent;
}

_Static_assert(NCD_BURST <= 32, "a burst's batches are marked in a 32-bit mask");

void
ncd_region_deliver_batches(struct ncd_worker *w, struct ncd_port_stats *ps, struct ncd_batch **b,
			   uint32_t nb)
{
	struct rte_mbuf *done[NCD_BURST];
	struct desc_stage st;
	uint32_t nd = 0, taken = 0;          /* bit k: b[k] went in with an earlier one's region */

	st.n = 0;
	st.npub = 0;
	for (uint32_t i = 0; i < nb; i++) {
		struct ncd_region *rg = b[i]->rg;

		if (taken & (UINT32_C(1) << i))
			continue;
		/* One ring (the one-ring client's) or several: each one's next entries. */
		for (uint32_t k = i, at = 0; k < nb; k++)
			if (b[k]->rg == rg) {
				const struct ncd_region_ring *q = &rg->rx[b[k]->ch->region_ring];

				/* Rings of their own start at their own next entry. */
				prefetch_room(rg, q, at, rg->one_ring ? at : 0, b[k]->n);
				at += b[k]->n;
			}
		rte_spinlock_lock(&rg->lock);
		for (uint32_t k = i; k < nb; k++) {
			struct ncd_batch *x = b[k];
			const struct ncd_channel *ch = x->ch;
			struct ncd_chan_stats *cs = &w->cstats[ch->id];
			struct copy_tally t = { 0, 0, 0 };

			if (x->rg != rg)
				continue;
			x->sent = region_copy(rg, &rg->rx[ch->region_ring], ch->region_limit, ch,
					      x->m, x->n, &t, &st);
			taken |= UINT32_C(1) << k;
			count_copy(cs, ps, x->sent, &t);
			/* A burst has NCD_BURST packets at most, over all its batches. */
			for (uint32_t j = 0; j < x->n; j++)
				done[nd++] = x->m[j];
		}
		stage_flush(&st);
		region_unlock(rg);
	}
	ncd_mbuf_free_burst(done, nd);
}

uint32_t
ncd_region_take_over(struct ncd_region *rg, int ring, uint32_t limit, const struct ncd_channel *ch,
		     struct rte_mbuf **m, uint32_t n)
{
	struct copy_tally t = { 0, 0, 0 };

	return region_copy_one(rg, ring, limit, ch, m, n, &t);
}

int
ncd_eventfd_once(int *efd, const char *whose)
{
	int fd;

	if (*efd >= 0)
		return *efd;
	/* Non-blocking: a worker's signal never waits. */
	fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (fd < 0) {
		NCD_LOG(ERR, "%s: eventfd: %s", whose, strerror(errno));
		return -errno;
	}
	/* Release: a worker that sees the fd sees a whole eventfd (it reads with acquire). */
	__atomic_store_n(efd, fd, __ATOMIC_RELEASE);
	return fd;
}

int
ncd_region_eventfd(struct ncd_region *rg)
{
	return ncd_eventfd_once(&rg->efd, "region");
}

uint32_t
ncd_region_rx_count(const struct ncd_region *rg, int ring)
{
	const struct ncd_region_ring *q = &rg->rx[ring];

	return q->own - q->seen;
}

/*
 * Buffers the client gave back: each one it holds returns; anything else is
 * counted. Only once the client holds FREE_LOW of them (half of a smaller
 * region's), and then all it gave back: the client writes the free ring's
 * head at every release, so every look at it is a miss. Not later: the
 * buffers last given back are the next ones handed out, so taken back early
 * a few hundred buffers go round and stay in the worker's cache; taken back
 * only at half the region, the worker wrote into 3 MB of it at 1500 bytes
 * (more than its L2) before it used one again.
 */
static void
serve_free(struct ncd_region *rg)
{
	struct ncd_region_ring *q = &rg->fr;
	uint32_t n;

	if (__atomic_load_n(&rg->b.nfree, __ATOMIC_RELAXED) + RTE_MIN(FREE_LOW, rg->g.rx_bufs / 2) >
	    rg->g.rx_bufs)
		return;
	rte_spinlock_lock(&rg->lock);
	n = tx_avail(rg, q);
	if (n > FREE_BATCH)
		n = FREE_BATCH;
	/* The client's core wrote them: all their lines asked for at once, the misses overlap. */
	for (uint32_t e = q->own & ~3u; (int32_t)(q->own + n - e) > 0; e += 4)
		rte_prefetch0(&q->r->desc[e & q->mask]);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t off = __atomic_load_n(&q->r->desc[(q->own + i) & q->mask].offset,
					       __ATOMIC_RELAXED);

		if (ncd_rc_buf_return(&rg->g, &rg->b, off))
			rg->st.freed++;
		else
			rg->st.bad_free++;
	}
	q->own += n;
	region_unlock(rg);
	if (n > 0)
		__atomic_store_n(&q->c->tail, q->own, __ATOMIC_RELEASE);
}

/* Whether a channel delivers into this region: its own, or one it attached to, shared or not. */
static inline bool
delivers_into(const struct ncd_channel *ch, const struct ncd_region *rg)
{
	const struct ncd_share *sh;

	if (__atomic_load_n(&ch->region, __ATOMIC_ACQUIRE) == rg)
		return true;
	sh = ch->shared ? __atomic_load_n(&ch->share, __ATOMIC_ACQUIRE) : NULL;
	for (uint32_t k = 0; sh != NULL && k < sh->n; k++)
		if (sh->c[k].rg == rg)
			return true;
	return false;
}

/*
 * The descriptor's frame, copied into an mbuf, if the descriptor holds up:
 * in the tx buffer area, a sane length, one of this connection's channels
 * that may transmit. The copy is what is checked and sent afterwards, so a
 * client that rewrites the buffer meanwhile changes nothing.
 */
static struct rte_mbuf *
tx_take(struct ncd *d, struct ncd_region *rg, const struct nc_desc *dsc, struct ncd_channel **chp)
{
	struct ncd_channel *ch = dsc->channel < d->cfg.max_channels ?
		__atomic_load_n(&d->channels[dsc->channel], __ATOMIC_ACQUIRE) : NULL;
	struct rte_mbuf *m;
	char *p;

	if (ch == NULL || !delivers_into(ch, rg) || !ch->can_tx || !ncd_rc_tx_desc_ok(&rg->g, dsc)) {
		rg->st.bad_desc++;
		return NULL;
	}
	*chp = ch;
	m = rte_pktmbuf_alloc(d->pool);
	if (m == NULL)
		return NULL;
	p = rte_pktmbuf_append(m, (uint16_t)dsc->length);
	if (p == NULL) {
		rte_pktmbuf_free(m);
		return NULL;
	}
	rte_memcpy(p, rg->cbase + dsc->offset, dsc->length);
	m->packet_type = dsc->flags & NC_DESC_F_IP ? RTE_PTYPE_UNKNOWN : RTE_PTYPE_L2_ETHER;
	return m;
}

/* The client's frames, a burst at most: each checked, copied and sent by its channel. */
static void
serve_tx(struct ncd *d, struct ncd_worker *w, struct ncd_region *rg, uint64_t now)
{
	struct ncd_region_ring *q = &rg->tx;
	struct rte_mbuf *m[NCD_BURST];
	struct ncd_channel *cur = NULL;
	uint32_t n, k = 0;

	n = tx_avail(rg, q);
	if (n > NCD_BURST)
		n = NCD_BURST;
	for (uint32_t i = 0; i < n; i++) {
		struct nc_desc dsc;
		struct ncd_channel *ch = NULL;
		struct rte_mbuf *x;

		/* One read of the descriptor: the client may change it under us. */
		memcpy(&dsc, &q->r->desc[(q->own + i) & q->mask], sizeof(dsc));
		x = tx_take(d, rg, &dsc, &ch);
		if (x != NULL && w->txq[ch->port] == NCD_NO_TXQ) {
			/* A static channel on a port this worker has no queue on. */
			rte_pktmbuf_free(x);
			x = NULL;
		}
		if (ch != NULL && x == NULL) {
			w->cstats[ch->id].tx_dropped++;
			continue;
		}
		if (x == NULL)
			continue;
		if (cur != NULL && ch != cur) {
			ncd_dp_tx_send(d, w, cur, m, (uint16_t)k, now);
			k = 0;
		}
		cur = ch;
		m[k++] = x;
	}
	if (k > 0)
		ncd_dp_tx_send(d, w, cur, m, (uint16_t)k, now);
	/* Only now: the buffers were copied, and the client may reuse them. */
	q->own += n;
	rg->st.tx_taken += n;
	if (n > 0)
		__atomic_store_n(&q->c->tail, q->own, __ATOMIC_RELEASE);
}

void
ncd_region_serve(struct ncd *d, struct ncd_worker *w, struct ncd_region *rg, uint64_t now)
{
	serve_free(rg);
	serve_tx(d, w, rg, now);
}
