/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The per-packet path. For each burst: parse every frame, classify the IP
 * ones in one bulk lookup, then hand out the burst: matches to their
 * channels (one ring enqueue per channel per burst), drops to the pool,
 * everything else to the exception device unchanged. No locks, no syscalls,
 * no allocation; counters are per worker, on the worker's own cache lines.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_pause.h>
#include <rte_rcu_qsbr.h>
#include <rte_ring.h>

#define NCD_LOGTYPE ncd_logtype_worker
#include "netchanneld.h"

/* Bytes the parser may need: Ethernet, two tags, IPv6 and a chain of extension headers. */
#define PARSE_BYTES 256

/* Matched packets of one channel in the current burst. */
struct batch {
	struct ncd_channel *ch;
	struct rte_mbuf *m[NCD_BURST];
	uint32_t n;
	uint64_t bytes;
};

static inline unsigned int
csum_flags(const struct rte_mbuf *m)
{
	switch (m->ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK) {
	case RTE_MBUF_F_RX_IP_CKSUM_GOOD: return NCD_PARSE_CSUM_GOOD;
	case RTE_MBUF_F_RX_IP_CKSUM_BAD: return NCD_PARSE_CSUM_BAD;
	default: return 0;
	}
}

/* Enqueue a channel's packets within its byte budget; drop and count the rest. */
static void
deliver(struct ncd_worker *w, struct ncd_port_stats *ps, struct batch *b)
{
	struct ncd_channel *ch = b->ch;
	struct ncd_chan_stats *cs = &w->cstats[ch->id];
	uint64_t queued = __atomic_load_n(&ch->dir->bytes_queued, __ATOMIC_RELAXED);
	uint32_t fit = 0, sent;
	uint64_t bytes = 0;

	/* Whole packets while the budget lasts; the budget may be overshot by one burst. */
	while (fit < b->n && queued + bytes + b->m[fit]->pkt_len <= ch->queue_bytes)
		bytes += b->m[fit++]->pkt_len;
	sent = rte_ring_enqueue_burst(ch->rx, (void **)b->m, fit, NULL);
	for (uint32_t i = sent; i < fit; i++)
		bytes -= b->m[i]->pkt_len;
	/* Relaxed: a budget, not a synchronisation; the ring orders the packets. */
	__atomic_fetch_add(&ch->dir->bytes_queued, bytes, __ATOMIC_RELAXED);
	/*
	 * A consumer that went to sleep on an empty ring asked to be woken. Full
	 * fence between the enqueue and the flag's load (the consumer has one
	 * between its store of the flag and its look at the ring): one of the two
	 * sees the other, so no wake-up is lost. Busy consumers never set the
	 * flag, so they cost no syscall.
	 */
	if (sent > 0) {
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		if (__atomic_load_n(&ch->dir->want_wakeup, __ATOMIC_RELAXED) &&
		    __atomic_exchange_n(&ch->dir->want_wakeup, 0, __ATOMIC_RELAXED)) {
			uint64_t one = 1;

			cs->wakeups++;
			if (write(ch->efd, &one, sizeof(one)) != sizeof(one))
				cs->wakeup_errors++;
		}
	}
	cs->delivered += sent;
	cs->bytes += bytes;
	cs->drop_ring_full += fit - sent;
	cs->drop_queue_bytes += b->n - fit;
	ps->delivered += sent;
	ps->drop_ring_full += fit - sent;
	ps->drop_queue_bytes += b->n - fit;
	if (sent < b->n)
		rte_pktmbuf_free_bulk(&b->m[sent], b->n - sent);
}

static void
to_kernel(const struct ncd_port *p, uint16_t txq, struct ncd_port_stats *ps,
	  struct rte_mbuf **m, uint16_t n)
{
	uint16_t sent;

	if (n == 0)
		return;
	if (!p->has_exc) {
		ps->drop_no_exception += n;
		rte_pktmbuf_free_bulk(m, n);
		return;
	}
	sent = rte_eth_tx_burst(p->exc_id, txq, m, n);
	ps->to_kernel += sent;
	ps->drop_exc_full += n - sent;
	if (sent < n)
		rte_pktmbuf_free_bulk(&m[sent], n - sent);
}

static void
process_burst(struct ncd *d, struct ncd_worker *w, unsigned int pi, struct rte_mbuf **pkts,
	      uint16_t n)
{
	const struct ncd_port *p = &d->ports[pi];
	struct ncd_port_stats *ps = &w->pstats[pi];
	struct ncd_parsed parsed[NCD_BURST];
	struct nc_trie_key keys[NCD_BURST];
	uint32_t res[NCD_BURST];
	uint16_t kpkt[NCD_BURST];      /* the packet of each key */
	struct ncd_channel *chs[NCD_BURST];
	bool by_mark[NCD_BURST];
	struct rte_mbuf *exc[NCD_BURST], *drop[NCD_BURST];
	struct batch batches[NCD_BURST];
	uint16_t nexc = 0, ndrop = 0, nk = 0, nb = 0;
	uint8_t buf[PARSE_BYTES];

	ps->rx += n;
	for (uint16_t i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];
		uint32_t want = m->pkt_len < PARSE_BYTES ? m->pkt_len : PARSE_BYTES;
		const uint8_t *f = rte_pktmbuf_read(m, 0, want, buf);
		enum ncd_verdict v;

		if (i + 1 < n)
			rte_prefetch0(rte_pktmbuf_mtod(pkts[i + 1], void *));
		v = ncd_parse(f, want, m->pkt_len, p->mac.addr_bytes, csum_flags(m), &parsed[i]);
		chs[i] = NULL;
		by_mark[i] = false;
		if (v != NCD_PKT_OK) {
			ps->verdict[v]++;
			continue;
		}
		/*
		 * A NIC's mark counts only if it is the mark the channel's flow rule
		 * sets on this port now: not a stale one of an earlier channel with
		 * the same id, nor one whose rule has been taken away.
		 */
		if (p->marks && (m->ol_flags & RTE_MBUF_F_RX_FDIR_ID)) {
			uint32_t mark = m->hash.fdir.hi, cid = mark & NCD_MARK_ID_MASK;
			struct ncd_channel *c = cid < NCD_MAX_CHANNELS && mark != 0 ?
				__atomic_load_n(&d->channels[cid], __ATOMIC_ACQUIRE) : NULL;

			if (c != NULL && __atomic_load_n(&c->mark[pi], __ATOMIC_ACQUIRE) == mark) {
				chs[i] = c;
				by_mark[i] = true;
				ps->mark_hits++;
				continue;
			}
			ps->mark_ignored++;
		}
		kpkt[nk] = i;
		keys[nk++] = parsed[i].key;
	}
	if (nk > 0)
		nc_trie_lookup_bulk(d->trie, keys, res, nk);
	for (uint16_t k = 0; k < nk; k++) {
		/* Acquire: pairs with the control thread's publication of the channel. */
		chs[kpkt[k]] = res[k] != NC_TRIE_NOMATCH ?
			__atomic_load_n(&d->channels[res[k]], __ATOMIC_ACQUIRE) : NULL;
		if (chs[kpkt[k]] == NULL)
			ps->miss++;
	}

	for (uint16_t i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];
		struct ncd_channel *ch = chs[i];

		if (ch == NULL) {
			if (m->pkt_len > p->exc_max_frame) {
				ps->drop_too_big++;
				drop[ndrop++] = m;
			} else {
				exc[nexc++] = m;
			}
			continue;
		}
		w->cstats[ch->id].hits++;
		if (by_mark[i])
			w->cstats[ch->id].hits_mark++;
		else
			w->cstats[ch->id].hits_trie++;
		if (ch->action == NCD_ACTION_DROP) {
			w->cstats[ch->id].dropped++;
			ps->dropped_by_rule++;
			drop[ndrop++] = m;
			continue;
		}
		/* Delivered frames end with their IP packet: Ethernet padding is cut. */
		uint32_t len = parsed[i].l2_len + parsed[i].l3_len;

		if (m->pkt_len > len)
			rte_pktmbuf_trim(m, (uint16_t)(m->pkt_len - len));
		uint16_t j;

		for (j = 0; j < nb && batches[j].ch != ch; j++)
			;
		if (j == nb) {
			batches[nb].ch = ch;
			batches[nb].n = 0;
			batches[nb].bytes = 0;
			nb++;
		}
		batches[j].m[batches[j].n++] = m;
	}
	for (uint16_t j = 0; j < nb; j++)
		deliver(w, ps, &batches[j]);
	to_kernel(p, w->exc_txq[pi], ps, exc, nexc);
	if (ndrop > 0)
		rte_pktmbuf_free_bulk(drop, ndrop);
}

/* What the kernel sends on the TAP goes out of the port unchanged. */
static void
from_kernel(struct ncd *d, struct ncd_worker *w, unsigned int pi)
{
	const struct ncd_port *p = &d->ports[pi];
	struct ncd_port_stats *ps = &w->pstats[pi];
	struct rte_mbuf *m[NCD_BURST];
	uint16_t n, sent;

	n = rte_eth_rx_burst(p->exc_id, w->exc_txq[pi], m, NCD_BURST);
	if (n == 0)
		return;
	ps->kernel_rx += n;
	sent = rte_eth_tx_burst(p->port_id, w->exc_txq[pi], m, n);
	ps->kernel_tx += sent;
	ps->kernel_tx_drop += n - sent;
	if (sent < n)
		rte_pktmbuf_free_bulk(&m[sent], n - sent);
}

/*
 * A client's packets, out of its channel's port. A frame goes as it is; an
 * IP packet gets the port's Ethernet header, addressed to the next hop the
 * kernel's tables give (cached; a miss goes to the control thread, which
 * puts the packet back on the ring once resolved). Either must come from the
 * channel's own flows: its reversed 5-tuple must match the channel's rule
 * (without the rule's source side), or it is dropped as spoofed.
 */
static void
tx_channel(struct ncd *d, struct ncd_worker *w, const struct ncd_channel *ch, uint64_t now)
{
	const struct ncd_port *p = &d->ports[ch->port];
	struct ncd_chan_stats *cs = &w->cstats[ch->id];
	struct ncd_port_stats *ps = &w->pstats[ch->port];
	struct rte_mbuf *m[NCD_BURST], *out[NCD_BURST], *bad[NCD_BURST], *res[NCD_BURST];
	uint32_t len[NCD_BURST];
	uint16_t n, nout = 0, nbad = 0, nres = 0, sent;
	uint8_t buf[PARSE_BYTES];

	n = (uint16_t)rte_ring_sc_dequeue_burst(ch->tx, (void **)m, NCD_BURST, NULL);
	for (uint16_t i = 0; i < n; i++) {
		struct rte_mbuf *x = m[i];
		bool ip = !(x->packet_type & RTE_PTYPE_L2_MASK);
		struct rte_ether_hdr *eh = NULL;
		struct ncd_parsed pp;
		struct nc_trie_key rev;
		uint32_t want;
		const uint8_t *f;
		int v, nh;

		if (ip) {
			v = x->data_len > 0 ? *rte_pktmbuf_mtod(x, uint8_t *) >> 4 : 0;
			if ((v != 4 && v != 6) ||
			    (eh = (struct rte_ether_hdr *)rte_pktmbuf_prepend(x, sizeof(*eh))) == NULL) {
				cs->tx_malformed++;
				bad[nbad++] = x;
				continue;
			}
			eh->ether_type = rte_cpu_to_be_16(v == 4 ? RTE_ETHER_TYPE_IPV4 :
							  RTE_ETHER_TYPE_IPV6);
			rte_ether_addr_copy(&p->mac, &eh->src_addr);
			memset(&eh->dst_addr, 0, sizeof(eh->dst_addr));
			x->packet_type = RTE_PTYPE_L2_ETHER;
		}
		want = x->pkt_len < PARSE_BYTES ? x->pkt_len : PARSE_BYTES;
		f = rte_pktmbuf_read(x, 0, want, buf);
		v = ncd_parse(f, want, x->pkt_len, NULL,
			      x->ol_flags & RTE_MBUF_F_TX_IP_CKSUM ? NCD_PARSE_CSUM_GOOD : 0, &pp);
		if (v != NCD_PKT_OK) {
			if (v == NCD_PKT_NOT_IP)
				cs->tx_spoofed++;      /* ARP and the like are the kernel's to send */
			else
				cs->tx_malformed++;
			bad[nbad++] = x;
			continue;
		}
		rev = pp.key;
		rev.src = pp.key.dst;
		rev.dst = pp.key.src;
		rev.sport = pp.key.dport;
		rev.dport = pp.key.sport;
		if (!nc_trie_rule_matches(&ch->tx_rule, &rev)) {
			cs->tx_spoofed++;
			bad[nbad++] = x;
			continue;
		}
		if (ip) {
			nh = ncd_nh_get(p->nh, pp.key.family, pp.key.dst.a, now, eh->dst_addr.addr_bytes);
			if (nh == 0) {
				x->hash.usr = ch->id;
				res[nres++] = x;
				continue;
			}
			if (nh < 0) {
				if (nh == -ENETUNREACH)
					cs->tx_no_route++;
				else
					cs->tx_no_neigh++;
				bad[nbad++] = x;
				continue;
			}
		}
		len[nout] = x->pkt_len;
		out[nout++] = x;
	}
	sent = nout ? rte_eth_tx_burst(p->port_id, w->exc_txq[ch->port], out, nout) : 0;
	for (uint16_t i = 0; i < sent; i++)
		cs->tx_bytes += len[i];
	cs->tx += sent;
	cs->tx_dropped += nout - sent;
	ps->client_tx += sent;
	ps->client_tx_drop += nout - sent;
	if (sent < nout)
		rte_pktmbuf_free_bulk(&out[sent], nout - sent);
	if (nres > 0) {
		unsigned int k = rte_ring_mp_enqueue_burst(d->nh_req, (void **)res, nres, NULL);
		uint64_t one = 1;

		cs->tx_resolving += k;
		/* A syscall only on a cache miss; the control thread also looks every 100 ms. */
		if (k > 0 && write(d->nh_efd, &one, sizeof(one)) < 0)
			cs->wakeup_errors++;
		for (unsigned int i = k; i < nres; i++) {
			cs->tx_no_neigh++;
			bad[nbad++] = res[i];
		}
	}
	if (nbad > 0)
		rte_pktmbuf_free_bulk(bad, nbad);
}

/*
 * IP packets whose next hop the control thread resolved: checked before they
 * left, and now addressed. The generation in hash.fdir.hi says whether their
 * channel is still the one that sent them (its id may have a new owner).
 */
static void
tx_resolved(struct ncd *d, struct ncd_worker *w)
{
	struct rte_mbuf *m[NCD_BURST];
	unsigned int n = rte_ring_sc_dequeue_burst(w->nh_done, (void **)m, NCD_BURST, NULL);

	for (unsigned int i = 0; i < n; i++) {
		struct ncd_channel *ch = __atomic_load_n(&d->channels[m[i]->hash.usr],
							  __ATOMIC_ACQUIRE);
		uint32_t len = m[i]->pkt_len;

		if (ch == NULL || ch->tx == NULL || ch->dir->generation != m[i]->hash.fdir.hi) {
			rte_pktmbuf_free(m[i]);
			continue;
		}
		if (rte_eth_tx_burst(d->ports[ch->port].port_id, w->exc_txq[ch->port], &m[i], 1) == 1) {
			w->cstats[ch->id].tx++;
			w->cstats[ch->id].tx_bytes += len;
			w->pstats[ch->port].client_tx++;
		} else {
			w->cstats[ch->id].tx_dropped++;
			w->pstats[ch->port].client_tx_drop++;
			rte_pktmbuf_free(m[i]);
		}
	}
}

int
ncd_worker_main(void *arg)
{
	struct ncd_worker *w = arg;
	struct ncd *d = &ncd;
	bool polls_port[NCD_MAX_PORTS] = { false };
	struct rte_mbuf *pkts[NCD_BURST];

	for (unsigned int i = 0; i < w->nrx; i++)
		polls_port[w->rx[i].port] = true;
	rte_rcu_qsbr_thread_register(d->qsbr, w->index);
	rte_rcu_qsbr_thread_online(d->qsbr, w->index);
	NCD_LOG(INFO, "worker %u on lcore %u: %u rx queues", w->index, w->lcore, w->nrx);
	while (!__atomic_load_n(&d->stop, __ATOMIC_RELAXED)) {
		uint32_t gen = __atomic_load_n(&d->stats_gen, __ATOMIC_ACQUIRE);

		/*
		 * Between bursts, so the counters stay consistent with each other; then
		 * wait while the control thread resets the NIC's counters, which software
		 * PMDs update in the rx path without atomics.
		 */
		if (unlikely(gen != w->stats_gen)) {
			for (unsigned int pi = 0; pi < d->cfg.nports; pi++)
				if (d->clear_mask & (1u << pi))
					memset(&w->pstats[pi], 0, sizeof(w->pstats[pi]));
			__atomic_store_n(&w->stats_gen, gen, __ATOMIC_RELEASE);
			while (__atomic_load_n(&d->stats_release, __ATOMIC_ACQUIRE) != gen &&
			       !__atomic_load_n(&d->stop, __ATOMIC_RELAXED))
				rte_pause();
		}
		for (unsigned int i = 0; i < w->nrx; i++) {
			const struct ncd_rxq *q = &w->rx[i];
			uint16_t n = rte_eth_rx_burst(d->ports[q->port].port_id, q->queue, pkts,
						      NCD_BURST);

			if (n > 0)
				process_burst(d, w, q->port, pkts, n);
		}
		for (unsigned int pi = 0; pi < d->cfg.nports; pi++)
			if (polls_port[pi] && d->ports[pi].has_exc)
				from_kernel(d, w, pi);
		/* Acquire: pairs with the control thread's publication of each entry. */
		uint32_t ntx = __atomic_load_n(&w->ntx, __ATOMIC_ACQUIRE);

		if (ntx > 0) {
			uint64_t now = rte_get_tsc_cycles();

			for (uint32_t i = 0; i < ntx; i++)
				tx_channel(d, w, __atomic_load_n(&w->txch[i], __ATOMIC_ACQUIRE), now);
		}
		/* Also with no transmitting channel left: what was resolved for a gone one is freed. */
		tx_resolved(d, w);
		rte_rcu_qsbr_quiescent(d->qsbr, w->index);
	}
	rte_rcu_qsbr_thread_offline(d->qsbr, w->index);
	rte_rcu_qsbr_thread_unregister(d->qsbr, w->index);
	return 0;
}

/*
 * Add up one block of 64-bit counters over the workers: the block that
 * block() returns for each worker, size bytes.
 * Relaxed loads: the workers keep counting meanwhile; 64-bit loads do not tear.
 */
static void
sum_counters(const struct ncd *d, uint64_t *out, size_t size,
	     const uint64_t *(*block)(const struct ncd_worker *, uint32_t), uint32_t id)
{
	memset(out, 0, size);
	for (unsigned int w = 0; w < d->cfg.nworkers; w++) {
		const uint64_t *src = block(&d->workers[w], id);

		for (size_t f = 0; f < size / sizeof(uint64_t); f++)
			out[f] += __atomic_load_n(&src[f], __ATOMIC_RELAXED);
	}
}

static const uint64_t *
port_block(const struct ncd_worker *w, uint32_t port)
{
	return (const uint64_t *)&w->pstats[port];
}

static const uint64_t *
chan_block(const struct ncd_worker *w, uint32_t id)
{
	return (const uint64_t *)&w->cstats[id];
}

void
ncd_port_stats_clear(struct ncd *d, unsigned int port)
{
	uint64_t deadline = rte_get_tsc_cycles() + rte_get_tsc_hz();
	uint32_t gen;

	d->clear_mask = 1u << port;
	gen = __atomic_add_fetch(&d->stats_gen, 1, __ATOMIC_RELEASE);
	/* Each worker zeroes its own counters and waits; wait for all (a second at most). */
	for (unsigned int w = 0; w < d->cfg.nworkers; w++)
		while (__atomic_load_n(&d->workers[w].stats_gen, __ATOMIC_ACQUIRE) != gen &&
		       rte_get_tsc_cycles() < deadline)
			rte_pause();
	/* No worker is in the rx path now: the NIC's counters can be reset without a race. */
	rte_eth_stats_reset(d->ports[port].port_id);
	if (d->ports[port].has_exc)
		rte_eth_stats_reset(d->ports[port].exc_id);
	memset(&d->ports[port].nh_stats, 0, sizeof(d->ports[port].nh_stats));
	__atomic_store_n(&d->stats_release, gen, __ATOMIC_RELEASE);
}

void
ncd_port_stats_sum(const struct ncd *d, unsigned int port, struct ncd_port_stats *out)
{
	sum_counters(d, (uint64_t *)out, sizeof(*out), port_block, port);
}

void
ncd_chan_stats_sum(const struct ncd *d, uint32_t id, struct ncd_chan_stats *out)
{
	const uint64_t *ctl = (const uint64_t *)&d->ctl_cstats[id];

	sum_counters(d, (uint64_t *)out, sizeof(*out), chan_block, id);
	/* And what the control thread counted (next-hop resolution outcomes). */
	for (size_t f = 0; f < sizeof(*out) / sizeof(uint64_t); f++)
		((uint64_t *)out)[f] += ctl[f];
}
