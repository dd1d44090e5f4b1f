/* SPDX-License-Identifier: BSD-3-Clause */
/* Channels: the classifier's rules, their rings, and the directory clients read. */
#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>

#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_memzone.h>
#include <rte_rcu_qsbr.h>
#include <rte_ring.h>

#include "netchanneld.h"

int
ncd_channel_add(struct ncd *d, const struct ncd_channel_conf *cc, int owner)
{
	struct ncd_channel *ch;
	struct nc_dir_entry *e;
	char ring[NC_NAME_SIZE];
	int id, ret;

	for (unsigned int i = 0; i < NCD_MAX_CHANNELS; i++)
		if (d->channels[i] != NULL && strcmp(d->channels[i]->name, cc->name) == 0)
			return -EEXIST;
	ch = rte_zmalloc("ncd_channel", sizeof(*ch), RTE_CACHE_LINE_SIZE);
	if (ch == NULL)
		return -ENOMEM;
	snprintf(ch->name, sizeof(ch->name), "%s", cc->name);
	ch->action = cc->action;
	ch->rule = cc->rule;
	ch->queue_bytes = cc->queue_bytes;
	ch->owner = owner;
	ch->efd = -1;
	if (cc->action == NCD_ACTION_DELIVER) {
		/* Non-blocking: a worker's signal never waits. */
		ch->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (ch->efd < 0) {
			ret = -errno;
			goto out_free;
		}
	}
	/*
	 * The rule goes in first, for its id; until channels[id] is published
	 * below, workers that match it see no channel and pass the packet to the
	 * kernel, as before the channel existed.
	 */
	id = nc_trie_add(d->trie, &cc->rule);
	if (id < 0) {
		/* The same rule and priority: another channel holds that flow. */
		ret = id == -EEXIST ? -EBUSY : id;
		goto out_free;
	}
	ch->id = (uint32_t)id;
	e = &d->dir->e[id];
	ch->dir = e;
	if (cc->action == NCD_ACTION_DELIVER) {
		snprintf(ring, sizeof(ring), NC_RX_RING_FMT, ch->id);
		/* Any worker may enqueue (multi-producer); one client dequeues. */
		ch->rx = rte_ring_create(ring, cc->ring_size, rte_socket_id(),
					 RING_F_SC_DEQ | RING_F_EXACT_SZ);
		if (ch->rx == NULL) {
			NCD_LOG(ERR, "rte_ring_create(%s, %u) for channel %s: %s", ring, cc->ring_size,
				cc->name, rte_strerror(rte_errno));
			ret = -rte_errno;
			goto out_delete;
		}
		snprintf(e->rx_ring, sizeof(e->rx_ring), "%s", ring);
	} else {
		e->rx_ring[0] = '\0';
	}
	for (unsigned int w = 0; w < d->cfg.nworkers; w++)
		memset(&d->workers[w].cstats[id], 0, sizeof(d->workers[w].cstats[id]));
	snprintf(e->name, sizeof(e->name), "%s", cc->name);
	e->id = ch->id;
	e->action = cc->action == NCD_ACTION_DROP ? NC_ACTION_DROP : NC_ACTION_DELIVER;
	e->ring_size = cc->ring_size;
	e->queue_bytes = cc->queue_bytes;
	e->generation++;
	__atomic_store_n(&e->bytes_queued, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&e->want_wakeup, 0, __ATOMIC_RELAXED);
	/* Release: a client that sees the entry live sees all of it. */
	__atomic_store_n(&e->state, NC_DIR_LIVE, __ATOMIC_RELEASE);
	/* Release: a worker that finds the channel finds it whole (its ring, its limits). */
	__atomic_store_n(&d->channels[id], ch, __ATOMIC_RELEASE);
	return id;

out_delete:
	nc_trie_delete(d->trie, (uint32_t)id);
out_free:
	if (ch->efd >= 0)
		close(ch->efd);
	rte_free(ch);
	return ret;
}

void
ncd_channel_del(struct ncd *d, uint32_t id)
{
	struct ncd_channel *ch = d->channels[id];
	struct rte_mbuf *m[NCD_BURST];
	unsigned int n;

	if (ch == NULL)
		return;
	/*
	 * Out of the classifier, then a grace period: after it no worker is in a
	 * burst that looked the rule up, so none holds the channel or its ring.
	 */
	nc_trie_delete(d->trie, id);
	rte_rcu_qsbr_synchronize(d->qsbr, RTE_QSBR_THRID_INVALID);
	__atomic_store_n(&d->channels[id], NULL, __ATOMIC_RELAXED);
	__atomic_store_n(&ch->dir->state, NC_DIR_FREE, __ATOMIC_RELEASE);
	/* Whatever no client took goes back to the pool. */
	while (ch->rx != NULL &&
	       (n = rte_ring_dequeue_burst(ch->rx, (void **)m, NCD_BURST, NULL)) > 0)
		rte_pktmbuf_free_bulk(m, n);
	rte_ring_free(ch->rx);
	/* A client still holding its copy of the eventfd just never hears from it again. */
	if (ch->efd >= 0)
		close(ch->efd);
	rte_free(ch);
}

int
ncd_channels_init(struct ncd *d)
{
	struct nc_trie_config tc = { .name = "channels", .socket_id = (int)rte_socket_id(),
				     .max_rules = NCD_MAX_CHANNELS };
	size_t sz = sizeof(*d->dir) + NCD_MAX_CHANNELS * sizeof(struct nc_dir_entry);
	size_t qsz = rte_rcu_qsbr_get_memsize(d->cfg.nworkers);

	d->dir_mz = rte_memzone_reserve_aligned(NC_DIR_MZ, sz, (int)rte_socket_id(), 0,
						RTE_CACHE_LINE_SIZE);
	if (d->dir_mz == NULL) {
		NCD_LOG(ERR, "rte_memzone_reserve(%s): %s", NC_DIR_MZ, rte_strerror(rte_errno));
		return -1;
	}
	d->dir = d->dir_mz->addr;
	memset(d->dir, 0, sz);
	d->dir->magic = NC_DIR_MAGIC;
	d->dir->version = NC_PROTO_VERSION;
	d->dir->max_channels = NCD_MAX_CHANNELS;
	snprintf(d->dir->mbuf_pool, sizeof(d->dir->mbuf_pool), "%s", d->pool->name);

	d->trie = nc_trie_create(&tc);
	d->qsbr = rte_zmalloc("ncd_qsbr", qsz, RTE_CACHE_LINE_SIZE);
	if (d->trie == NULL || d->qsbr == NULL ||
	    rte_rcu_qsbr_init(d->qsbr, d->cfg.nworkers) != 0 ||
	    nc_trie_rcu_qsbr_add(d->trie, d->qsbr) != 0) {
		NCD_LOG(ERR, "classifier setup: %s", strerror(errno));
		return -1;
	}
	for (unsigned int i = 0; i < d->cfg.nchannels; i++) {
		int ret = ncd_channel_add(d, &d->cfg.channels[i], NCD_OWNER_CONFIG);

		if (ret < 0) {
			NCD_LOG(ERR, "channel %s: %s", d->cfg.channels[i].name, strerror(-ret));
			return -1;
		}
	}
	return 0;
}

void
ncd_channels_free(struct ncd *d)
{
	for (uint32_t i = 0; d->trie != NULL && i < NCD_MAX_CHANNELS; i++)
		ncd_channel_del(d, i);
	if (d->trie != NULL)
		nc_trie_rcu_qsbr_add(d->trie, NULL);
	nc_trie_free(d->trie);
	d->trie = NULL;
	rte_free(d->qsbr);
	d->qsbr = NULL;
	rte_memzone_free(d->dir_mz);
	d->dir_mz = NULL;
	d->dir = NULL;
}
