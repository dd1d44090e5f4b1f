/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libnetchannel_zc: the zero-copy model. The process becomes a DPDK
 * secondary process of the daemon and takes mbufs off the channels' rings
 * in the daemon's memory. It registers its calls with libnetchannel as it
 * loads; an application that links it (pkg-config libnetchannel-zc) may
 * connect with NC_CONNECT_ZEROCOPY.
 */
#define _GNU_SOURCE /* sched_getaffinity */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>
#include <rte_memory.h>
#include <rte_memzone.h>
#include <rte_mempool.h>
#include <rte_ring.h>

#include "nc_build.h"
#include "nc_internal.h"

#define TX_MAX 256                 /* most packets one nc_tx_burst() takes */
#define ALLOC_WAIT_MS 100          /* how long nc_mbuf_alloc() waits for a worker to fill its ring */

static int
first_cpu(void)
{
	cpu_set_t set;

	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		for (int i = 0; i < CPU_SETSIZE; i++)
			if (CPU_ISSET(i, &set))
				return i;
	return 0;
}

static int
eal_secondary(const struct nc_ctl_hello_reply *h)
{
	char lcores[32];
	char *argv[] = {
		"netchannel", "--proc-type=secondary", "--file-prefix", (char *)h->file_prefix,
		"--no-pci", "--lcores", lcores, "--log-level=lib.eal:error", NULL,
	};

	/* The daemon's lcore id for this client, so mempool caches never collide. */
	snprintf(lcores, sizeof(lcores), "%u@%d", h->lcore_id, first_cpu());
	if (rte_eal_init((int)(sizeof(argv) / sizeof(argv[0])) - 1, argv) < 0)
		return -rte_errno;
	return 0;
}

/* The zero-copy model: this process joins the daemon's memory as a DPDK secondary. */
static int
zc_attach(struct nc_client *c)
{
	unsigned int flags = c->flags;
	const struct rte_memzone *mz;
	int ret;

	if (!(flags & NC_CONNECT_NO_EAL)) {
		ret = eal_secondary(&c->hello);
		if (ret != 0)
			return ret;
		c->eal_owned = 1;
	}
	mz = rte_memzone_lookup(NC_DIR_MZ);
	if (mz == NULL)
		return -ENOENT;
	c->dir = mz->addr;
	if (c->dir->magic != NC_DIR_MAGIC || c->dir->version != NC_SHM_LAYOUT_VERSION)
		return -EPROTO;
	mz = rte_memzone_lookup(NC_CLIENTS_MZ);
	c->pool = rte_mempool_lookup(c->hello.mbuf_pool);
	c->owner_off = rte_mbuf_dynfield_lookup(NC_MBUF_OWNER_FIELD, NULL);
	c->rx_tsc_off = rte_mbuf_dynfield_lookup(NC_MBUF_RX_TSC_FIELD, NULL);
	if (mz == NULL || c->pool == NULL || c->owner_off < 0 || c->hello.slot >= NC_MAX_CLIENTS)
		return -EPROTO;
	c->me = (struct nc_client_entry *)mz->addr + c->hello.slot;
	c->owner = c->hello.slot + 1;
	{
		char name[RTE_RING_NAMESIZE];

		snprintf(name, sizeof(name), NC_FREE_RING_FMT, c->hello.slot);
		c->free_ring = rte_ring_lookup(name);
		snprintf(name, sizeof(name), NC_ALLOC_RING_FMT, c->hello.slot);
		c->alloc_ring = rte_ring_lookup(name);
	}
	return c->alloc_ring == NULL ? -EPROTO : 0;
}

/*
 * A channel's ring, from the address its directory entry gives (see
 * nc_proto.h): used only if it lies in DPDK's shared memory and the ring
 * there has the name the daemon's reply gave. NULL with errno ENOENT.
 */
static struct rte_ring *
dir_ring(const uint64_t *addr, const char *name)
{
	struct rte_ring *r = (struct rte_ring *)(uintptr_t)__atomic_load_n(addr, __ATOMIC_RELAXED);

	if (r == NULL || rte_mem_virt2memseg(r, NULL) == NULL ||
	    rte_mem_virt2memseg(RTE_PTR_ADD(r, sizeof(*r) - 1), NULL) == NULL ||
	    strncmp(r->name, name, sizeof(r->name)) != 0) {
		errno = ENOENT;
		return NULL;
	}
	return r;
}

static inline uint32_t *
owner_of(const struct nc_client *c, struct rte_mbuf *m)
{
	return RTE_MBUF_DYNFIELD(m, c->owner_off, uint32_t *);
}

static inline void
held_add(struct nc_client *c, int64_t n)
{
	/* The client is the only writer; the daemon reads it. */
	__atomic_store_n(&c->me->held, c->me->held + (uint64_t)n, __ATOMIC_RELAXED);
}

/* The client takes these mbufs: marked as its own, counted against its quota. */
static void
take(struct nc_client *c, struct rte_mbuf **m, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++)
		*owner_of(c, m[i]) = c->owner;
	held_add(c, n);
}

/*
 * Up to n mbufs off a ring whose one consumer is this client, by zero-copy
 * dequeue: marked as this client's while the ring still holds them, and only
 * then off it. A kill before the end leaves them on the ring (the daemon
 * drains a dead client's rings from their tail), a kill after leaves them
 * marked: none is lost. @return how many
 */
static unsigned int
take_from(struct nc_client *c, struct rte_ring *r, struct rte_mbuf **m, unsigned int n)
{
	struct rte_ring_zc_data zcd;
	unsigned int k = rte_ring_dequeue_zc_burst_start(r, n, &zcd, NULL);

	if (k == 0)
		return 0;
	memcpy(m, zcd.ptr1, zcd.n1 * sizeof(void *));
	if (k > zcd.n1)
		memcpy(m + zcd.n1, zcd.ptr2, (k - zcd.n1) * sizeof(void *));
	take(c, m, k);
	rte_ring_dequeue_zc_finish(r, k);
	return k;
}

/* How many of a chain's mbufs carry this client's mark. */
static unsigned int
marked(const struct nc_client *c, struct rte_mbuf *m)
{
	unsigned int n = 0;

	for (; m != NULL; m = m->next)
		n += *owner_of(c, m) == c->owner;
	return n;
}

/* The client gives up an mbuf chain: returns how many marks it cleared. */
static unsigned int
give(struct nc_client *c, struct rte_mbuf *m)
{
	unsigned int n = 0;

	for (; m != NULL; m = m->next)
		if (*owner_of(c, m) == c->owner) {
			*owner_of(c, m) = 0;
			n++;
		}
	return n;
}

/* What the client may still take: its quota, less what it holds and what waits on its free ring. */
static uint64_t
room_of(const struct nc_client *c)
{
	uint64_t used = c->me->held + (c->free_ring ? rte_ring_count(c->free_ring) : 0);

	return c->me->quota > used ? c->me->quota - used : 0;
}

/*
 * Hand up to TX_MAX mbufs, still marked, to a ring a worker empties; the
 * marks are counted before the enqueue: once there, a worker may unmark,
 * free and even hand them out again at once, so they are no longer the
 * client's to read. @return how many the ring took; *marks: their marks
 */
static unsigned int
hand_over(struct nc_client *c, struct rte_ring *r, struct rte_mbuf **m, unsigned int n,
	  unsigned int *marks)
{
	unsigned int given[TX_MAX], k;

	for (unsigned int i = 0; i < n; i++)
		given[i] = marked(c, m[i]);
	k = rte_ring_enqueue_burst(r, (void **)m, n, NULL);
	*marks = 0;
	for (unsigned int i = 0; i < k; i++)
		*marks += given[i];
	return k;
}

/*
 * Give mbufs back through the daemon: on this client's free ring, still
 * marked as its own, so that whatever a kill interrupts is either on the
 * ring (the daemon drains it) or marked (the daemon frees it by its mark).
 * The pool's own structures are never left half-updated by a dead client.
 * A daemon without free rings gets them back in the pool directly.
 */
static void
release(struct nc_client *c, struct rte_mbuf **m, unsigned int n)
{
	unsigned int total = 0;
	unsigned int k = c->free_ring ? hand_over(c, c->free_ring, m, n, &total) : 0;

	for (unsigned int i = k; i < n; i++)
		total += give(c, m[i]);
	held_add(c, -(int64_t)total);
	if (k < n)
		rte_pktmbuf_free_bulk(&m[k], n - k);
}

NC_EXPORT uint16_t
nc_rx_burst(struct nc_channel *ch, struct rte_mbuf **pkts, uint16_t n)
{
	struct nc_client *c = ch->client;
	uint64_t room;
	unsigned int k;
	uint64_t bytes = 0;

	if (ch->rx == NULL) {
		errno = ch->ring != NULL ? EOPNOTSUPP : EINVAL;
		return 0;
	}
	/*
	 * Destroyed by the operator (its ring is freed after a grace period for the
	 * workers only), or, if the daemon said so first, its stop.
	 */
	if (__atomic_load_n(&ch->dir->state, __ATOMIC_ACQUIRE) != NC_DIR_LIVE ||
	    ch->dir->generation != ch->generation) {
		errno = nc__daemon_gone(c, 1) ? c->gone : ESTALE;
		return 0;
	}
	room = room_of(c);
	if (room < n) {
		n = (uint16_t)room;
		c->me->quota_stalls++;
		if (n == 0) {
			errno = nc__daemon_gone(c, 0) ? c->gone : ENOBUFS;
			return 0;
		}
	}
	k = take_from(c, ch->rx, pkts, n);
	if (k == 0) {
		if (nc__daemon_gone(c, 0))
			errno = c->gone;
		return 0;
	}
	for (unsigned int i = 0; i < k; i++)
		bytes += pkts[i]->pkt_len;
	/* The daemon's byte budget: what left the ring no longer counts (one consumer: no RMW). */
	__atomic_store_n(&ch->dir->bytes_out, ch->dir->bytes_out + bytes, __ATOMIC_RELEASE);
	return (uint16_t)k;
}

static uint16_t
tx_burst(struct nc_channel *ch, struct rte_mbuf **pkts, uint16_t n, uint32_t ptype)
{
	struct nc_client *c = ch->client;
	unsigned int k, total;

	if (n > TX_MAX)
		n = TX_MAX;
	if (ch->tx == NULL || nc__daemon_gone(c, 0)) {
		errno = ch->tx != NULL ? c->gone : c->rg.base != NULL ? EOPNOTSUPP : EINVAL;
		return 0;
	}
	/*
	 * Left marked: the worker unmarks what it dequeues, so a kill never leaves
	 * one both unmarked and off the ring.
	 */
	for (uint16_t i = 0; i < n; i++)
		pkts[i]->packet_type = ptype;
	k = hand_over(c, ch->tx, pkts, n, &total);
	held_add(c, -(int64_t)total);
	return (uint16_t)k;
}

NC_EXPORT uint16_t
nc_tx_burst(struct nc_channel *ch, struct rte_mbuf **pkts, uint16_t n)
{
	return tx_burst(ch, pkts, n, RTE_PTYPE_L2_ETHER);
}

NC_EXPORT uint16_t
nc_tx_burst_ip(struct nc_channel *ch, struct rte_mbuf **pkts, uint16_t n)
{
	/* No L2 bits: the daemon adds the Ethernet header (nc_proto.h). */
	return tx_burst(ch, pkts, n, RTE_PTYPE_UNKNOWN);
}

/*
 * An mbuf off the alloc ring, which a worker fills once our entry asks for
 * it: the first allocation, or one that outruns the worker, waits a moment
 * (yielding, as the worker may share our CPU).
 */
static struct rte_mbuf *
alloc_from_ring(struct nc_client *c)
{
	uint64_t until = 0;
	struct rte_mbuf *m;

	while (take_from(c, c->alloc_ring, &m, 1) == 0) {
		uint64_t now = rte_get_tsc_cycles();

		if (until == 0) {
			__atomic_store_n(&c->me->want_alloc, 1, __ATOMIC_RELAXED);
			until = now + rte_get_tsc_hz() / 1000 * ALLOC_WAIT_MS;
		} else if (nc__daemon_gone(c, 0) || now > until) {
			errno = c->gone ? c->gone : ENOBUFS;
			return NULL;
		}
		sched_yield();
	}
	return m;
}

NC_EXPORT struct rte_mbuf *
nc_mbuf_alloc(struct nc_client *c)
{
	if (c->me == NULL) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (room_of(c) == 0) {
		errno = ENOBUFS;
		return NULL;
	}
	return alloc_from_ring(c);
}

NC_EXPORT void
nc_mbuf_free(struct nc_client *c, struct rte_mbuf *m)
{
	if (m != NULL && c->me != NULL)
		release(c, &m, 1);
}

NC_EXPORT void
nc_mbuf_free_bulk(struct nc_client *c, struct rte_mbuf **pkts, unsigned int n)
{
	while (n > 0 && c->me != NULL) {
		unsigned int k = n < TX_MAX ? n : TX_MAX;

		release(c, pkts, k);
		pkts += k;
		n -= k;
	}
}

NC_EXPORT uint64_t
nc_mbufs_held(const struct nc_client *c, uint64_t *quota)
{
	if (c->me == NULL) {
		if (quota != NULL)
			*quota = 0;
		return 0;
	}
	if (quota != NULL)
		*quota = c->me->quota;
	return c->me->held;
}

NC_EXPORT uint64_t
nc_mbuf_rx_tsc(const struct nc_client *c, const struct rte_mbuf *m)
{
	if (c->rx_tsc_off < 0)
		return 0;
	return *RTE_MBUF_DYNFIELD(m, c->rx_tsc_off, const uint64_t *);
}

static void
zc_flush(struct nc_client *c)
{
	/* Freed mbufs sit in this lcore's cache, out of the daemon's reach: give them back. */
	if (rte_lcore_id() != LCORE_ID_ANY) {
		struct rte_mempool_cache *cache = rte_mempool_default_cache(c->pool, rte_lcore_id());

		if (cache != NULL)
			rte_mempool_cache_flush(cache, c->pool);
	}
}

static void
zc_detach(struct nc_client *c)
{
	/* What EAL's buses and drivers hold in this process goes with it. */
	rte_eal_cleanup();
	c->eal_owned = 0;
}

static int
zc_open(struct nc_client *c, struct nc_channel *ch, const struct nc_ctl_channel *info)
{
	if (info->id >= c->dir->max_channels) {
		errno = EBADMSG;
		return -1;
	}
	ch->dir = &c->dir->e[info->id];
	if (info->action == NC_ACTION_DELIVER) {
		ch->rx = dir_ring(&ch->dir->rx_ring_addr, info->rx_ring);
		if (ch->rx == NULL)
			return -1;
	}
	if (info->tx_ring[0] != '\0') {
		ch->tx = dir_ring(&ch->dir->tx_ring_addr, info->tx_ring);
		if (ch->tx == NULL)
			return -1;
	}
	return 0;
}

static ssize_t
zc_recv_one(struct nc_channel *ch, void *buf, size_t len)
{
	struct rte_mbuf *m;
	uint32_t n, cut;
	const void *q;

	errno = 0;
	if (nc_rx_burst(ch, &m, 1) != 1)
		return errno == ESTALE ? -ESTALE : -EAGAIN;
	n = m->pkt_len;
	cut = n < len ? n : (uint32_t)len;
	q = rte_pktmbuf_read(m, 0, cut, buf);
	if (q != NULL && q != buf)
		memcpy(buf, q, cut);
	nc_mbuf_free(ch->client, m);
	return n;
}

static ssize_t
zc_send(struct nc_channel *ch, const void *buf, size_t len, int ip)
{
	struct nc_client *c = ch->client;
	struct rte_mbuf *m = nc_mbuf_alloc(c);
	char *p;
	int err;

	if (m == NULL)
		return -errno;
	if (len > rte_pktmbuf_tailroom(m) || (p = rte_pktmbuf_append(m, (uint16_t)len)) == NULL) {
		nc_mbuf_free(c, m);
		return -EMSGSIZE;
	}
	memcpy(p, buf, len);
	if ((ip ? nc_tx_burst_ip(ch, &m, 1) : nc_tx_burst(ch, &m, 1)) == 1)
		return (ssize_t)len;
	err = errno == EPIPE || errno == ESHUTDOWN ? -errno : -EAGAIN;
	nc_mbuf_free(c, m);
	return err;
}

static int
zc_ring_empty(const struct nc_channel *ch)
{
	return rte_ring_empty(ch->rx);
}

static const struct nc_zc_ops ops = {
	.attach = zc_attach, .flush = zc_flush, .detach = zc_detach, .open = zc_open,
	.recv_one = zc_recv_one, .send = zc_send, .ring_empty = zc_ring_empty,
	.build = nc_build_zc,
};

RTE_INIT(zc_register)
{
	nc__zc_register(&ops);
}
