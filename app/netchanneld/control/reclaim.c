/* SPDX-License-Identifier: BSD-3-Clause */
#define _GNU_SOURCE /* struct ucred, accept4 */
/*
 * Dead clients: what a closed connection held comes back. A zero-copy
 * client's mbufs (marked with its owner id, and in its lcore's mempool cache)
 * only once its process is gone; the rings of static channels destroyed under
 * it once it lets go; its slot of the client table then.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <inttypes.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_hash.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_malloc.h>
#include <rte_mbuf_dyn.h>
#include <rte_mempool.h>
#include <rte_rcu_qsbr.h>
#include <rte_ring.h>

#define NCD_LOGTYPE ncd_logtype_control
#include "channel/channel.h"
#include "channel/region.h"
#include "control/conn.h"
#include "control/control.h"
#include "control/ctl_decode.h"
#include "control/rates.h"
#include "control/reload.h"
#include "control/views.h"
#include "core/log.h"
#include "core/match.h"
#include "core/stats.h"
#include "datapath/capture.h"
#include "datapath/datapath.h"
#include "datapath/region.h"
#include "nat/nat.h"
#include "ncd.h"
#include "nexthop/nexthop.h"
#include "port/port.h"

/* Whether a process has exited (or is a zombie): it will never touch shared memory again. */
bool
ctl_process_gone(pid_t pid)
{
	char path[64], buf[256], *p;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (f == NULL)
		return true;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')');
	return p != NULL && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
}

struct reclaim {
	int off;
	uint32_t owner;
	unsigned int n;
};

static void
reclaim_one(struct rte_mempool *mp __rte_unused, void *arg, void *obj, unsigned int idx __rte_unused)
{
	struct reclaim *r = arg;
	struct rte_mbuf *m = obj;
	uint32_t *owner = RTE_MBUF_DYNFIELD(m, r->off, uint32_t *);

	if (__atomic_load_n(owner, __ATOMIC_RELAXED) == r->owner) {
		*owner = 0;
		rte_pktmbuf_free(m);
		r->n++;
	}
}

/*
 * Workers stop serving a slot's free and alloc rings, and what is on them
 * goes back now. After this, an mbuf of the slot's client is on none of the
 * daemon's rings but marked, or in the pool.
 */
static void
slot_rings_stop(struct ncd *d, unsigned int slot)
{
	if (!(__atomic_load_n(&d->slot_active, __ATOMIC_RELAXED) & (UINT64_C(1) << slot)))
		return;
	__atomic_fetch_and(&d->slot_active, ~(UINT64_C(1) << slot), __ATOMIC_RELEASE);
	/* No worker is still in the middle of draining it after this. */
	rte_rcu_qsbr_synchronize(d->qsbr, RTE_QSBR_THRID_INVALID);
	/* An isolated client's region: unmapped, and that is all (its channels went before). */
	if (d->regions[slot] != NULL) {
		ncd_region_free(d->regions[slot]);
		__atomic_store_n(&d->regions[slot], NULL, __ATOMIC_RELAXED);
	}
	ncd_ring_drain(d, d->free_rings[slot], false);
	rte_ring_reset(d->free_rings[slot]);
	/* Its one consumer is gone or done, maybe killed in the middle of a dequeue. */
	ncd_ring_drain(d, d->alloc_rings[slot], true);
	rte_ring_reset(d->alloc_rings[slot]);
}

/*
 * A dead client's mbufs: those it held (marked with its owner id) and those
 * in its lcore's mempool cache. Only once it is gone: a live process still
 * owns its cache, and one killed with SIGKILL closes its socket a moment
 * before it is gone.
 */
void
ctl_reclaim_mbufs(struct ncd *d, struct ncd_conn *c)
{
	unsigned int slot = (unsigned int)c->slot;
	struct nc_client_entry *e = &d->clients[slot];
	struct rte_mempool_cache *cache = rte_mempool_default_cache(d->pool, c->lcore_id);
	struct reclaim r = { .off = d->owner_off, .owner = slot + 1 };
	unsigned int cached = 0;

	/* Its rings first: what is on them may still be marked, and must be freed once. */
	slot_rings_stop(d, slot);
	rte_mempool_obj_iter(d->pool, reclaim_one, &r);
	if (cache != NULL) {
		cached = cache->len;
		rte_mempool_cache_flush(cache, d->pool);
	}
	d->mbufs_reclaimed += r.n;
	d->cache_flushed += cached;
	if (r.n > 0 || cached > 0)
		NCD_LOG_USER(INFO, c->cred.uid, "control: pid %d died holding %u mbufs (%" PRIu64
			     " counted) and %u in its lcore %u cache: all back in the pool",
			     (int)c->cred.pid, r.n, e->held, cached, c->lcore_id);
}

int
ncd_control_hold_rings(struct ncd *d, unsigned int slot, struct rte_ring *rx, struct rte_ring *tx)
{
	struct ncd_conn *c = slot < NCD_MAX_CLIENTS ? ncd_ctl.slot_conn[slot] : NULL;

	(void)d;
	if (c == NULL || c->fd < 0 ||
	    ctl_conn_room(&c->held, &c->cap_held, c->nheld, 2, sizeof(c->held[0])) != 0)
		return -1;
	if (rx != NULL)
		c->held[c->nheld++] = rx;
	if (tx != NULL)
		c->held[c->nheld++] = tx;
	return 0;
}

/*
 * The connection's entry is free again, and its slot if it had one: its
 * client entry, its owner id and its lcore id may be reused.
 */
void
ctl_slot_free(struct ncd *d, struct ncd_conn *c)
{
	/* Its consumer is gone: what the held rings still hold goes back, from their tail. */
	for (unsigned int i = 0; i < c->nheld; i++) {
		ncd_ring_drain(d, c->held[i], true);
		rte_free(c->held[i]);
	}
	c->nheld = 0;
	if (c->slot >= 0) {
		slot_rings_stop(d, (unsigned int)c->slot);
		/* No worker serves the slot, nor has a channel of it: its user's meter is unused. */
		ncd_txm_put(d->slot_txm[c->slot]);
		d->slot_txm[c->slot] = NULL;
		memset(&d->clients[c->slot], 0, sizeof(d->clients[0]));
		ncd_ctl.slot_conn[c->slot] = NULL;
	}
	ctl_conn_arrays_free(c);
	memset(c, 0, sizeof(*c));
	c->fd = -1;
	c->slot = -1;
}

/*
 * Closed connections whose process was still running: once it is gone, its
 * mbufs come back. One that stays alive holding none disconnected cleanly
 * (nc_disconnect() flushed its cache): its slot is freed after 10 s.
 */
void
ctl_reclaim_pending(struct ncd *d)
{
	for (unsigned int i = 0; i < NCD_MAX_CONNECTIONS; i++) {
		struct ncd_conn *c = &ncd_ctl.conns[i];

		if (!c->pending)
			continue;
		if (ctl_process_gone(c->cred.pid)) {
			ctl_reclaim_mbufs(d, c);
			ctl_slot_free(d, c);
		} else if (d->clients[c->slot].held == 0 && ncd_now_ms() - c->pending_since > 10000) {
			ctl_slot_free(d, c);
		}
	}
}

/*
 * A client lets go of its k-th attached static channel, if that is still the
 * channel it attached to (it may have been destroyed, and its id reused,
 * meanwhile: an isolated client's region ring then went with it).
 */
void
ctl_detach(struct ncd *d, struct ncd_conn *c, unsigned int k)
{
	struct ncd_channel *ch = d->channels[c->attached[k].id];

	if (ch != NULL && ch->dir->generation == c->attached[k].gen && ch->shared) {
		ncd_channel_share_leave(d, ch, c->slot);
	} else if (ch != NULL && ch->dir->generation == c->attached[k].gen &&
		   ch->consumer == c->slot + 1) {
		if (ch->region != NULL)
			ncd_channel_region_detach(d, ch);
		ch->consumer = 0;
	}
	c->attached[k] = c->attached[--c->nattached];
}

/*
 * Shared channel ch (id) passes from c to h, a consumer that joined it: from
 * h's attached channels to its own. @return false: h has no room for it
 */
static bool
pass_to(struct ncd *d, struct ncd_conn *c, struct ncd_conn *h, struct ncd_channel *ch,
	uint32_t id)
{
	unsigned int j;

	for (j = 0; j < h->nattached; j++)
		if (h->attached[j].id == id && h->attached[j].gen == ch->dir->generation)
			break;
	if (j == h->nattached ||
	    ctl_conn_room(&h->channels, &h->cap_channels, h->nchannels, 1, sizeof(h->channels[0])))
		return false;
	h->attached[j] = h->attached[--h->nattached];
	h->channels[h->nchannels++] = id;
	ch->owner = h->slot;
	ncd_channel_share_leave(d, ch, c->slot);
	NCD_LOG_USER(INFO, c->cred.uid, "control: shared channel %s (%u) passes from pid %d to "
		     "pid %d, one of %u consumers", ch->name, id, (int)c->cred.pid,
		     (int)h->cred.pid, ch->share->n);
	return true;
}

void
ctl_release(struct ncd *d, struct ncd_conn *c, unsigned int k, bool gone)
{
	uint32_t id = c->channels[k];
	struct ncd_channel *ch = d->channels[id];
	const struct ncd_share *sh = ch != NULL && ch->shared && ch->owner == c->slot ?
				     ch->share : NULL;

	c->channels[k] = c->channels[--c->nchannels];
	/* To the first other consumer with room for it; with none, it goes. */
	for (uint32_t i = 0; sh != NULL && i < sh->n; i++)
		if (sh->c[i].slot != c->slot && ncd_ctl.slot_conn[sh->c[i].slot] != NULL &&
		    pass_to(d, c, ncd_ctl.slot_conn[sh->c[i].slot], ch, id))
			return;
	if (ch != NULL && gone)
		ch->consumer_gone = true;
	ncd_channel_del(d, id);
}
