/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What a worker does with an isolated client's region (channel/region.h):
 * copies a burst's packets into its buffers and descriptors, takes back the
 * buffers the client gives back on its free ring, and sends what it put on
 * its tx ring. Nothing the client wrote is trusted: every index and
 * descriptor goes through core/region_check.h first.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <rte_common.h>
#include <rte_ether.h>
#include <rte_mbuf.h>
#include <rte_rcu_qsbr.h>
#include <rte_ring.h>

#include "channel/channel.h"
#include "channel/region.h"
#include "datapath/datapath.h"
#include "datapath/dp.h"
#include "datapath/region.h"
#include "ncd.h"
#include "packet/mbuf_free.h"
#include "packet/prefetch.h"
#include "port/port.h"

#define FREE_BATCH 512u                /* buffers taken back at one look at the free ring */
#define FREE_LOW 128u                  /* buffers the client holds before the daemon looks */

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

	room = ncd_region_rx_room(rg, q, limit, n);
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
			room = ncd_region_rx_room(rg, q, limit, used + need);
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
	ncd_region_unlock(rg);
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

_Static_assert(NCD_BURST <= 32, "a burst's runs are marked in a 32-bit mask");

void
ncd_region_deliver_burst(struct ncd_worker *w, struct ncd_port_stats *ps,
			 struct ncd_iso_burst *ib)
{
	struct desc_stage st;
	uint32_t done = 0;                   /* bit k: run k went in with an earlier run's region */

	st.n = 0;
	st.npub = 0;
	for (uint32_t i = 0; i < ib->nrun; i++) {
		struct ncd_region *rg = ib->run[i].rg;
		uint32_t nrg = 0;

		if (done & (UINT32_C(1) << i))
			continue;
		for (uint32_t k = i; k < ib->nrun; k++)
			nrg += ib->run[k].rg == rg ? ib->run[k].n : 0;
		/*
		 * A one-ring client's packets take that ring's next entries, whatever
		 * their channels; with a ring a channel, only the first channel's are
		 * known here (a hint: the others' come as they are copied).
		 */
		prefetch_room(rg, &rg->rx[ib->run[i].ch->region_ring], 0, 0, nrg);
		/*
		 * One hold of the lock for all of the region's runs: the lock is a
		 * full fence, which waits for every copy before it to reach the
		 * client's lines; once a burst, not once a channel.
		 */
		rte_spinlock_lock(&rg->lock);
		for (uint32_t k = i; k < ib->nrun; k++) {
			struct ncd_iso_run *r = &ib->run[k];
			const struct ncd_channel *ch = r->ch;
			struct ncd_chan_stats *cs;
			struct copy_tally t = { 0, 0, 0 };

			if (r->rg != rg)
				continue;
			done |= UINT32_C(1) << k;
			r->sent = (uint16_t)region_copy(rg, &rg->rx[ch->region_ring], ch->region_limit,
							ch, &ib->m[r->first], r->n, &t, &st);
			cs = &w->cstats[ch->id];
			cs->hits += r->n;
			cs->hits_mark += r->marks;
			cs->hits_trie += r->n - r->marks;
			count_copy(cs, ps, r->sent, &t);
		}
		stage_flush(&st);
		ncd_region_unlock(rg);
	}
	ncd_mbuf_free_burst(ib->m, ib->n);
}

static uint32_t
region_take_over(struct ncd_region *rg, int ring, uint32_t limit, const struct ncd_channel *ch,
		     struct rte_mbuf **m, uint32_t n)
{
	struct copy_tally t = { 0, 0, 0 };

	return region_copy_one(rg, ring, limit, ch, m, n, &t);
}

uint32_t
ncd_region_hand_over(struct ncd *d, struct ncd_channel *ch, struct ncd_region *rg, int ring,
		      uint32_t limit)
{
	struct rte_mbuf *m[NCD_BURST];
	uint32_t n, moved = 0;

	if (ch->rx == NULL || rte_ring_empty(ch->rx))
		return 0;
	/* Once no worker is in a burst that saw the channel without its region, the ring is still. */
	rte_rcu_qsbr_synchronize(d->qsbr, RTE_QSBR_THRID_INVALID);
	while ((n = rte_ring_dequeue_burst(ch->rx, (void **)m, NCD_BURST, NULL)) > 0) {
		uint32_t k = region_take_over(rg, ring, limit, ch, m, n);

		moved += k;
		/* Counted as delivered when they reached the ring: what does not fit now is a drop. */
		d->ctl_cstats[ch->id].drop_ring_full += n - k;
		for (uint32_t i = 0; i < n; i++)
			ncd_unmark(d, m[i]);
		rte_pktmbuf_free_bulk(m, n);
	}
	return moved;
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
	n = ncd_region_tx_avail(rg, q);
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
	ncd_region_unlock(rg);
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
 * The channel a descriptor sends on, if the descriptor holds up: in the tx
 * buffer area, a sane length, one of this connection's channels that may
 * transmit. NULL otherwise.
 */
static inline struct ncd_channel *
tx_channel(struct ncd *d, struct ncd_region *rg, const struct nc_desc *dsc)
{
	struct ncd_channel *ch = dsc->channel < d->cfg.max_channels ?
		__atomic_load_n(&d->channels[dsc->channel], __ATOMIC_ACQUIRE) : NULL;

	if (ch == NULL || !delivers_into(ch, rg) || !ch->can_tx || !ncd_rc_tx_desc_ok(&rg->g, dsc))
		return NULL;
	return ch;
}

/*
 * The descriptor's frame, copied into an mbuf (NULL: the pool is empty). The
 * copy is what is checked and sent afterwards, so a client that rewrites the
 * buffer meanwhile changes nothing.
 */
static struct rte_mbuf *
tx_take(struct ncd *d, struct ncd_region *rg, const struct nc_desc *dsc)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(d->pool);
	char *p;

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

/*
 * Whether the descriptor's frame must wait for its channel's transmit meter
 * or its user's (ut), counted. Only for a descriptor that held up
 * (tx_channel()): one that names another's channel must not take from its
 * meter. The frame counts as it will leave, with the Ethernet header an IP
 * packet gets.
 */
static bool
tx_held(struct ncd_worker *w, const struct ncd_channel *ch, struct ncd_txm *ut,
	const struct nc_desc *dsc, uint64_t now)
{
	struct ncd_chan_stats *cs = &w->cstats[ch->id];
	enum rte_color c;

	if (!ncd_txm_pass(ch->tx_meter, ut, dsc->length +
			  (dsc->flags & NC_DESC_F_IP ? RTE_ETHER_HDR_LEN : 0), now, &c)) {
		cs->tx_held++;
		return true;
	}
	cs->tx_meter_green += c == RTE_COLOR_GREEN;
	cs->tx_meter_yellow += c == RTE_COLOR_YELLOW;
	return false;
}

/*
 * A client that waits for room on its transmit ring (nc_channel_arm_tx())
 * has written there which of its channels' eventfds to signal: its id + 1;
 * signalled once half the ring is free.
 * The client's memory: checked like a descriptor (one of its own channels),
 * read once, and cleared whatever it said. A one-ring client's is its ring's.
 */
static __rte_noinline void
tx_room_wake(struct ncd *d, struct ncd_worker *w, struct ncd_region *rg, struct ncd_region_ring *q)
{
	uint32_t want = __atomic_exchange_n(&q->c->want_wakeup, 0, __ATOMIC_RELAXED);
	struct ncd_channel *ch = want - 1 < d->cfg.max_channels ?
		__atomic_load_n(&d->channels[want - 1], __ATOMIC_ACQUIRE) : NULL;
	const struct ncd_share *sh;
	uint64_t one = 1;
	int efd = -1;

	if (ch == NULL || !delivers_into(ch, rg)) {
		rg->st.bad_index++;
		return;
	}
	if (rg->one_ring) {
		efd = __atomic_load_n(&rg->efd, __ATOMIC_ACQUIRE);
	} else if (__atomic_load_n(&ch->region, __ATOMIC_ACQUIRE) == rg) {
		efd = __atomic_load_n(&ch->efd, __ATOMIC_ACQUIRE);
	} else {
		sh = __atomic_load_n(&ch->share, __ATOMIC_ACQUIRE);
		for (uint32_t k = 0; sh != NULL && k < sh->n; k++)
			if (sh->c[k].rg == rg)
				efd = __atomic_load_n(&sh->c[k].efd, __ATOMIC_ACQUIRE);
	}
	w->cstats[ch->id].wakeups++;
	if (efd < 0 || write(efd, &one, sizeof(one)) != sizeof(one))
		w->cstats[ch->id].wakeup_errors++;
}

/* The client's frames, a burst at most: each checked, copied and sent by its channel. */
static void
serve_tx(struct ncd *d, struct ncd_worker *w, struct ncd_region *rg, uint64_t now)
{
	struct ncd_region_ring *q = &rg->tx;
	struct ncd_txm *ut = d->slot_txm[rg->slot];
	struct rte_mbuf *m[NCD_BURST];
	struct ncd_channel *cur = NULL;
	uint32_t avail, n, k = 0;

	avail = ncd_region_tx_avail(rg, q);
	n = avail > NCD_BURST ? NCD_BURST : avail;
	for (uint32_t i = 0; i < n; i++) {
		struct nc_desc dsc;
		struct ncd_channel *ch;
		struct rte_mbuf *x;

		/* One read of the descriptor: the client may change it under us. */
		memcpy(&dsc, &q->r->desc[(q->own + i) & q->mask], sizeof(dsc));
		ch = tx_channel(d, rg, &dsc);
		if (ch == NULL) {
			rg->st.bad_desc++;
			continue;
		}
		/* Over a transmit meter: it and what follows wait on the ring, which fills. */
		if (unlikely(ut != NULL || ch->tx_meter != NULL) && tx_held(w, ch, ut, &dsc, now)) {
			n = i;
			break;
		}
		/* Not on a static channel of a port this worker has no queue on. */
		x = w->txq[ch->port] != NCD_NO_TXQ ? tx_take(d, rg, &dsc) : NULL;
		if (x == NULL) {
			w->cstats[ch->id].tx_dropped++;
			continue;
		}
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
	if (n > 0) {
		__atomic_store_n(&q->c->tail, q->own, __ATOMIC_RELEASE);
		/* Full fence: the client sets its flag, fences, then reads the index. */
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		/* Once half the ring is free: a client woken refills half of it, not one slot. */
		if (unlikely(__atomic_load_n(&q->c->want_wakeup, __ATOMIC_RELAXED) != 0) &&
		    avail - n <= q->size / 2)
			tx_room_wake(d, w, rg, q);
	}
}

void
ncd_region_serve(struct ncd *d, struct ncd_worker *w, struct ncd_region *rg, uint64_t now)
{
	serve_free(rg);
	serve_tx(d, w, rg, now);
}
