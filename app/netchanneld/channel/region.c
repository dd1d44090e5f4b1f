/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Isolated clients' regions. The region is the client's to scribble on: the
 * daemon keeps the geometry of every ring and its own indexes here, reads
 * only the client's index (forward, and never past what was produced) and
 * checks every descriptor before it uses it. The mbuf never leaves the
 * daemon: packets are copied in and out, by the workers (datapath/region.c).
 * Here: a region's life (made, its rings lent to channels, freed).
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
#include "ncd.h"

#define RX_RINGS 64u                   /* a connection's channels, at most, with a ring each */
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

/* Where everything of a region is: offsets in its part (nc_region_hdr's). */
struct region_plan {
	uint64_t rx_off, rx_stride, tx_off, free_off, buf_off, tx_buf_off, rx_cons_off;
	uint64_t size, csize;          /* the daemon's part, and the client's (0: one part) */
};

/*
 * The region's plan: layout 2 puts the header, rx rings and rx buffers in
 * the daemon's part, and the consumer lines, tx and free rings and tx
 * buffers in the client's; layout 1 puts all of it, in that order, in one.
 */
static void
region_plan(struct region_plan *p, uint32_t layout, uint32_t nrx, uint32_t rx_size,
	    uint32_t tx_size, uint32_t nbufs, uint32_t buf_size)
{
	uint64_t off;

	p->rx_off = NC_REGION_HDR_SIZE;
	p->rx_stride = ring_bytes(rx_size);
	off = p->rx_off + p->rx_stride * nrx;
	if (layout == NC_REGION_LAYOUT_ONE_PART) {
		p->rx_cons_off = 0;
		p->tx_off = off;
		off += ring_bytes(tx_size);
		p->free_off = off;
		off += ring_bytes(nbufs);
		p->buf_off = RTE_ALIGN_CEIL(off, 4096);
		p->tx_buf_off = p->buf_off + (uint64_t)buf_size * nbufs;
		p->size = RTE_ALIGN_CEIL(p->tx_buf_off + (uint64_t)buf_size * tx_size, 4096);
		p->csize = 0;
		return;
	}
	p->buf_off = RTE_ALIGN_CEIL(off, 4096);
	p->size = RTE_ALIGN_CEIL(p->buf_off + (uint64_t)buf_size * nbufs, 4096);
	p->rx_cons_off = 0;
	off = (uint64_t)nrx * sizeof(struct nc_region_cons);
	p->tx_off = off;
	off += ring_bytes(tx_size);
	p->free_off = off;
	off += ring_bytes(nbufs);
	p->tx_buf_off = RTE_ALIGN_CEIL(off, 4096);
	p->csize = RTE_ALIGN_CEIL(p->tx_buf_off + (uint64_t)buf_size * tx_size, 4096);
}

/*
 * The memory of the region's plan: layout 2's two parts, the daemon's on
 * hugepages where the host has them to spare; layout 1's one part, never on
 * hugepages, for its client writes all of it (and could punch a hole).
 * 0, or -1 (logged).
 */
static int
region_memory(struct ncd_region *rg)
{
	if (rg->layout == NC_REGION_LAYOUT_ONE_PART) {
		rg->fd = part_map(rg, "netchannel-region", &rg->size, false, &rg->base);
		if (rg->fd < 0)
			return -1;
		rg->cbase = rg->base;
	} else {
		rg->fd = part_map(rg, "netchannel-region", &rg->size, true, &rg->base);
		if (rg->fd < 0)
			return -1;
		rg->cfd = part_map(rg, "netchannel-region-client", &rg->csize, false, &rg->cbase);
		if (rg->cfd < 0)
			return -1;
	}
	if (fcntl(rg->layout == NC_REGION_LAYOUT_ONE_PART ? rg->fd : rg->cfd, F_ADD_SEALS,
		  F_SEAL_SEAL) != 0) {
		NCD_LOG(ERR, "region: sealing the client's part: %s", strerror(errno));
		return -1;
	}
	return 0;
}

struct ncd_region *
ncd_region_create(const struct ncd *d, unsigned int slot, bool one_ring, uint32_t layout)
{
	struct ncd_region *rg = calloc(1, sizeof(*rg));
	const uint32_t nbufs = d->cfg.region.rx_buffers;
	/* One ring for every channel: it can hold no more descriptors than there are buffers. */
	const uint32_t rx_size = one_ring ?
		RTE_MAX(rte_align32pow2(nbufs), d->cfg.region.rx_ring_size) :
		d->cfg.region.rx_ring_size;
	const uint32_t nrx = one_ring ? 1 : RX_RINGS;
	const uint32_t tx_size = d->cfg.region.tx_ring_size;
	const bool one_part = layout == NC_REGION_LAYOUT_ONE_PART;
	uint32_t frame = RTE_ETHER_MAX_LEN;
	struct region_plan p;
	struct nc_region_hdr *h;
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
	rg->layout = layout;
	rg->one_ring = one_ring;
	rg->worker = slot % d->cfg.nworkers;
	rg->slot = slot;
	rg->nrx = nrx;
	const uint32_t buf_size = RTE_ALIGN_CEIL(RTE_MAX(frame, 2048u), RTE_CACHE_LINE_SIZE);

	region_plan(&p, layout, nrx, rx_size, tx_size, nbufs, buf_size);
	rg->size = p.size;
	rg->csize = p.csize;
	ncd_rc_geom_init(&rg->g, p.buf_off, p.tx_buf_off, buf_size, nbufs, tx_size);
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
	if (region_memory(rg) != 0)
		goto fail;
	for (uint32_t k = 0; k < nrx; k++) {
		/* Layout 1: the ring's own consumer line. */
		ring_init(&rg->rx[k], rg->base + p.rx_off + k * p.rx_stride,
			  one_part ? NULL : (struct nc_region_cons *)(rg->cbase + p.rx_cons_off) + k,
			  rx_size);
		rg->rx[k].r->channel = one_ring ? NC_RING_ALL_CHANNELS : NC_RING_NO_CHANNEL;
		rg->rx_channel[k] = UINT32_MAX;
	}
	ring_init(&rg->tx, rg->cbase + p.tx_off, NULL, tx_size);
	ring_init(&rg->fr, rg->cbase + p.free_off, NULL, nbufs);
	for (uint32_t i = 0; i < nbufs; i++)
		rg->b.free[i] = nbufs - 1 - i;
	rg->b.nfree = nbufs;
	h = (struct nc_region_hdr *)rg->base;
	*h = (struct nc_region_hdr){
		.magic = NC_REGION_MAGIC, .version = layout, .size = rg->size,
		.nrx = nrx, .rx_size = rx_size, .tx_size = tx_size, .free_size = nbufs,
		.buf_size = buf_size, .rx_bufs = nbufs, .rx_off = p.rx_off,
		.rx_stride = p.rx_stride, .tx_off = p.tx_off, .free_off = p.free_off,
		.buf_off = p.buf_off, .tx_buf_off = p.tx_buf_off, .client_size = rg->csize,
		.rx_cons_off = p.rx_cons_off,
	};
	if (!one_part) {
		rg->fd = part_read_only(rg->fd);
		if (rg->fd < 0)
			goto fail;
	}
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
	if (rg->cbase != NULL && rg->cbase != rg->base)
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
	ncd_region_rx_room(rg, q, q->size, UINT32_MAX);
	for (uint32_t i = q->seen; i != q->own; i++) {
		uint32_t off = q->r->desc[i & q->mask].offset;

		ncd_rc_buf_return(&rg->g, &rg->b, off);
	}
	q->seen = q->own;
	rg->rx_channel[ring] = UINT32_MAX;
	ncd_region_unlock(rg);
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
	uint32_t own = __atomic_load_n(&q->own, __ATOMIC_RELAXED);
	uint32_t seen = __atomic_load_n(&q->seen, __ATOMIC_RELAXED);
	uint32_t t = __atomic_load_n(&q->c->tail, __ATOMIC_ACQUIRE);

	/*
	 * The worker reads the client's tail only when its ring runs short, so its last
	 * accepted one lags what the client took: the client's own is read here, and
	 * believed only where the worker would believe it (a hostile one is not).
	 */
	return ncd_rc_tail_ok(seen, own, t) ? own - t : own - seen;
}
