/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Delivery: a burst's matches onto their channels' rings, one enqueue per
 * channel per burst, within each channel's byte budget, or copied into an
 * isolated client's region (in burst order, whatever the channel); then the
 * wake-ups of consumers that sleep. Only worker.c includes it: the per-burst
 * path.
 */
#ifndef NCD_DATAPATH_DELIVER_H
#define NCD_DATAPATH_DELIVER_H

#include <unistd.h>

#include <rte_branch_prediction.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include "channel/channel.h"
#include "channel/region.h"
#include "datapath/datapath.h"
#include "datapath/dp.h"
#include "datapath/region.h"

/*
 * Bytes enqueued on a channel's ring. A single-producer ring (one worker
 * runs) has one writer of its budget too: no atomic read-modify-write.
 */
static __rte_always_inline void
bytes_in_add(struct ncd_channel *ch, uint64_t bytes)
{
	if (ch->rx->prod.sync_type == RTE_RING_SYNC_ST)
		__atomic_store_n(&ch->dir->bytes_in, ch->dir->bytes_in + bytes, __ATOMIC_RELAXED);
	else
		__atomic_fetch_add(&ch->dir->bytes_in, bytes, __ATOMIC_RELAXED);
}

/*
 * How many of a batch's packets fit in limit when in bytes were enqueued
 * and out dequeued; their bytes. Another worker's newer look at out may
 * pass this one's in: nothing is queued then.
 */
static __rte_always_inline uint32_t
budget_fit(const struct ncd_batch *b, uint64_t in, uint64_t out, uint64_t limit, uint64_t *bytes)
{
	uint64_t queued = in > out ? in - out : 0;
	uint32_t fit = 0;

	*bytes = 0;
	/* Whole packets while the budget lasts; the budget may be overshot by one burst. */
	while (fit < b->n && queued + *bytes + b->m[fit]->pkt_len <= limit)
		*bytes += b->m[fit++]->pkt_len;
	return fit;
}

/*
 * Enqueue a channel's packets within its byte budget; drop and count the
 * rest. The bytes count before the enqueue (the ring's release orders
 * them), so a consumer never takes out bytes that are not yet in. What is
 * queued is first reckoned from the consumer's bytes_out as last seen (too
 * much, never too little), and the consumer's line is read again only when
 * that says the budget is spent: a busy consumer writes it all the time.
 */
/* Wake a consumer that asked to be, after its packets are on its ring (the caller fenced). */
static __rte_always_inline void
wake_one(struct ncd_chan_stats *cs, uint32_t *flag, const int *efdp)
{
	if (__atomic_load_n(flag, __ATOMIC_RELAXED) && __atomic_exchange_n(flag, 0, __ATOMIC_RELAXED)) {
		int efd = __atomic_load_n(efdp, __ATOMIC_ACQUIRE);
		uint64_t one = 1;

		/* A consumer asks for the eventfd before it sleeps; one that did not has none. */
		cs->wakeups++;
		if (efd < 0 || write(efd, &one, sizeof(one)) != sizeof(one))
			cs->wakeup_errors++;
	}
}

/*
 * A shared channel's batch: each packet to the consumer its flow's hash
 * picks, into that consumer's region; then the consumers that sleep wake,
 * each on its own eventfd.
 */
static __rte_noinline void
deliver_shared(struct ncd_worker *w, struct ncd_port_stats *ps, struct ncd_batch *b,
	       const struct ncd_share *sh)
{
	struct ncd_chan_stats *cs = &w->cstats[b->ch->id];
	struct rte_mbuf *part[NCD_BURST];
	uint32_t got[NCD_SHARE_MAX];

	b->sent = 0;
	for (uint32_t k = 0; k < sh->n; k++) {
		const struct ncd_share_consumer *c = &sh->c[k];
		uint32_t np = 0;

		for (uint32_t i = 0; i < b->n; i++)
			if (b->hash[i] % sh->n == k)
				part[np++] = b->m[i];
		got[k] = np == 0 ? 0 :
			 ncd_region_deliver(w, ps, b->ch, c->rg, c->ring, c->limit, part, np);
		b->sent += got[k];
	}
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	for (uint32_t k = 0; k < sh->n; k++)
		if (got[k] > 0)
			wake_one(cs, sh->c[k].wakeup, ncd_region_efdp(sh->c[k].rg, &sh->c[k].efd));
}

static __rte_always_inline void
deliver_one(struct ncd_worker *w, struct ncd_port_stats *ps, struct ncd_batch *b)
{
	struct ncd_channel *ch = b->ch;
	struct ncd_chan_stats *cs = &w->cstats[ch->id];
	uint64_t in, seen;
	uint32_t fit, sent;
	uint64_t bytes, unsent = 0;

	if (unlikely(ch->shared)) {
		/* Acquire: pairs with the control thread's publication of the share. */
		const struct ncd_share *sh = __atomic_load_n(&ch->share, __ATOMIC_ACQUIRE);

		if (sh != NULL) {
			deliver_shared(w, ps, b, sh);
			return;
		}
	}
	in = __atomic_load_n(&ch->dir->bytes_in, __ATOMIC_RELAXED);
	seen = __atomic_load_n(&ch->out_seen, __ATOMIC_RELAXED);
	fit = budget_fit(b, in, seen, ch->queue_bytes, &bytes);
	if (fit < b->n) {
		seen = __atomic_load_n(&ch->dir->bytes_out, __ATOMIC_ACQUIRE);
		/* Relaxed: other workers may store theirs; any is at most the real one. */
		__atomic_store_n(&ch->out_seen, seen, __ATOMIC_RELAXED);
		fit = budget_fit(b, in, seen, ch->queue_bytes, &bytes);
	}
	bytes_in_add(ch, bytes);
	sent = rte_ring_enqueue_burst(ch->rx, (void **)b->m, fit, NULL);
	for (uint32_t i = sent; i < fit; i++)
		unsent += b->m[i]->pkt_len;
	if (unsent != 0)
		bytes_in_add(ch, -unsent);
	b->sent = sent;
	cs->delivered += sent;
	cs->bytes += bytes - unsent;
	cs->drop_ring_full += fit - sent;
	ps->delivered += sent;
	ps->drop_ring_full += fit - sent;
	/* Rare, and on the stats' second line: written only when it counts. */
	if (unlikely(fit < b->n)) {
		cs->drop_queue_bytes += b->n - fit;
		ps->drop_queue_bytes += b->n - fit;
	}
	if (sent < b->n)
		rte_pktmbuf_free_bulk(&b->m[sent], b->n - sent);
}

/*
 * After a burst's enqueues: wake the consumers that went to sleep on an
 * empty ring and asked to be. One full fence for the whole burst between
 * the enqueues and the flags' loads (the consumer has one between its store
 * of the flag and its look at the ring): one of the two sees the other, so
 * no wake-up is lost. Busy consumers never set the flag, so they cost no
 * syscall.
 */
static __rte_always_inline void
wake_consumers(struct ncd_worker *w, const struct ncd_batch *batches, uint16_t nb)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	for (uint16_t j = 0; j < nb; j++) {
		struct ncd_channel *ch = batches[j].ch;

		uint32_t *flag = __atomic_load_n(&ch->wakeup, __ATOMIC_RELAXED);

		if (batches[j].sent > 0)
			wake_one(&w->cstats[ch->id], flag, &ch->efd);
	}
}

/*
 * An isolated burst's consumers that sleep, woken (after the fence of
 * wake_consumers()). A one-ring client's channels all point at its region's
 * flag: woken once, however many of its channels the burst had.
 */
static __rte_always_inline void
wake_iso(struct ncd_worker *w, const struct ncd_iso_burst *ib)
{
	const uint32_t *last = NULL;

	for (uint16_t k = 0; k < ib->nrun; k++) {
		struct ncd_channel *ch = ib->run[k].ch;
		uint32_t *flag = __atomic_load_n(&ch->wakeup, __ATOMIC_RELAXED);

		if (ib->run[k].sent == 0 || flag == last)
			continue;
		last = flag;
		wake_one(&w->cstats[ch->id], flag, ncd_region_efdp(ib->run[k].rg, &ch->efd));
	}
}

/**
 * Enqueue each batch (channels without a region) on its channel's ring
 * within the channel's byte budget, drop and count the rest; copy the
 * isolated burst into its regions; then wake the consumers that sleep.
 * Inline: the worker calls it for every burst.
 */
static __rte_always_inline void
ncd_dp_deliver(struct ncd_worker *w, struct ncd_port_stats *ps, struct ncd_batch *b, uint16_t nb,
	       struct ncd_iso_burst *ib)
{
	for (uint16_t j = 0; j < nb; j++)
		deliver_one(w, ps, &b[j]);
	if (ib->n > 0)
		ncd_region_deliver_burst(w, ps, ib);
	if (nb > 0 || ib->n > 0)
		wake_consumers(w, b, nb);
	if (ib->n > 0)
		wake_iso(w, ib);
}

#endif
