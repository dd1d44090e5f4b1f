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
#include <rte_hash.h>
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
	uint32_t sent;                 /* how many deliver() enqueued */
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

/*
 * Bytes enqueued on a channel's ring. A single-producer ring (one worker
 * runs) has one writer of its budget too: no atomic read-modify-write.
 */
static inline void
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
static inline uint32_t
budget_fit(const struct batch *b, uint64_t in, uint64_t out, uint64_t limit, uint64_t *bytes)
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
static void
deliver(struct ncd_worker *w, struct ncd_port_stats *ps, struct batch *b)
{
	struct ncd_channel *ch = b->ch;
	struct ncd_chan_stats *cs = &w->cstats[ch->id];
	uint64_t in = __atomic_load_n(&ch->dir->bytes_in, __ATOMIC_RELAXED);
	uint64_t seen = __atomic_load_n(&ch->out_seen, __ATOMIC_RELAXED);
	uint32_t fit, sent;
	uint64_t bytes, unsent = 0;

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
	cs->drop_queue_bytes += b->n - fit;
	ps->delivered += sent;
	ps->drop_ring_full += fit - sent;
	ps->drop_queue_bytes += b->n - fit;
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
static void
wake_consumers(struct ncd_worker *w, const struct batch *batches, uint16_t nb)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	for (uint16_t j = 0; j < nb; j++) {
		struct ncd_channel *ch = batches[j].ch;

		if (batches[j].sent > 0 && __atomic_load_n(&ch->dir->want_wakeup, __ATOMIC_RELAXED) &&
		    __atomic_exchange_n(&ch->dir->want_wakeup, 0, __ATOMIC_RELAXED)) {
			struct ncd_chan_stats *cs = &w->cstats[ch->id];
			int efd = __atomic_load_n(&ch->efd, __ATOMIC_ACQUIRE);
			uint64_t one = 1;

			/* A consumer asks for the eventfd before it sleeps; one that did not has none. */
			cs->wakeups++;
			if (efd < 0 || write(efd, &one, sizeof(one)) != sizeof(one))
				cs->wakeup_errors++;
		}
	}
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

/* Packets translated by NAT, waiting to leave, and whose counters they go to. */
struct nat_out {
	struct rte_mbuf *m[NCD_BURST];
	uint16_t port[NCD_BURST];
	uint32_t chan[NCD_BURST];
	bool back[NCD_BURST];          /* a reply translated back */
	uint16_t n;
};

/* A translated packet, to go out of port with the next nat_send(); back: a reply. */
static inline void
nat_queue(struct nat_out *out, struct rte_mbuf *m, uint16_t port, uint32_t chan, bool back)
{
	out->m[out->n] = m;
	out->port[out->n] = port;
	out->chan[out->n] = chan;
	out->back[out->n++] = back;
}

static inline void
nat_key_of(const struct nc_trie_key *k, struct ncd_nat_key *out)
{
	memset(out, 0, sizeof(*out));
	out->family = k->family;
	out->proto = k->proto;
	out->sport = k->sport;
	out->dport = k->dport;
	memcpy(out->src, k->src.a, 16);
	memcpy(out->dst, k->dst.a, 16);
}

/*
 * The reverse mapping of a flow a NAT channel translates: found and kept
 * fresh, or made for its first packet. A reply tuple another flow holds is a
 * conflict (two clients with the same source port behind one new source):
 * the packet is dropped, as its replies could not find their way back.
 * @return 0, or -1 (dropped and counted)
 */
static int
nat_track(struct ncd *d, unsigned int pi, const struct rte_mbuf *m, const struct ncd_parsed *pp,
	  const struct ncd_channel *ch, const struct ncd_nat_key *k, int32_t pos, uint64_t now,
	  struct ncd_chan_stats *cs, struct ncd_port_stats *ps)
{
	struct ncd_nat_table *t = &d->nat;
	struct ncd_nat_xlate rev;
	struct ncd_nat_flow *f;
	uint32_t want = NCD_NATF_FREE;

	ncd_nat_reverse_of(&pp->key, &ch->nat.x, &rev);
	/* Not there at the burst's lookup: an earlier packet of the burst may have added it. */
	if (pos < 0)
		pos = rte_hash_lookup(t->h, k);
	if (pos < 0) {
		if (__atomic_load_n(&t->used, __ATOMIC_RELAXED) >= t->capacity ||
		    (pos = rte_hash_add_key(t->h, k)) < 0) {
			cs->nat_drop_table_full++;
			ps->drop_nat_table_full++;
			return -1;
		}
	}
	f = &t->flows[pos];
	/*
	 * A new key's slot is free: this worker fills it. A taken one holds this
	 * flow (found, or added by an earlier packet of the burst or by another
	 * worker a moment ago) or another flow with the same reply: a conflict.
	 */
	if (!__atomic_compare_exchange_n(&f->state, &want, NCD_NATF_FILLING, false,
					 __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
		if (ncd_nat_flow_alive(d->channels, f) && f->chan == ch->id &&
		    memcmp(&f->rev, &rev, sizeof(rev)) == 0) {
			__atomic_store_n(&f->last, now, __ATOMIC_RELAXED);
			return 0;
		}
		cs->nat_drop_conflict++;
		ps->drop_nat_conflict++;
		return -1;
	}
	__atomic_fetch_add(&t->used, 1, __ATOMIC_RELAXED);
	f->chan = ch->id;
	f->gen = ch->dir->generation;
	f->last = now;
	f->rev = rev;
	f->port = (uint16_t)pi;
	memcpy(f->mac, rte_pktmbuf_mtod(m, struct rte_ether_hdr *)->src_addr.addr_bytes, 6);
	f->key = *k;
	/* Release: a worker that sees it live sees it whole. */
	__atomic_store_n(&f->state, NCD_NATF_LIVE, __ATOMIC_RELEASE);
	cs->nat_flows++;
	return 0;
}

/* Rewrite a frame's headers; the IPv4 header checksum is left to ports that compute it. */
static enum ncd_nat_result
nat_rewrite(const struct ncd *d, struct rte_mbuf *m, const struct ncd_parsed *pp,
	    const struct ncd_nat_xlate *x, uint16_t op)
{
	bool off = d->ports[op].ip_csum_offload && pp->key.family == NC_TRIE_AF_INET;
	enum ncd_nat_result r = ncd_nat_rewrite(rte_pktmbuf_mtod(m, uint8_t *), m->data_len, pp, x,
						off ? NCD_NAT_F_IP_CSUM_OFFLOAD : 0);
	uint32_t len = pp->l2_len + pp->l3_len;

	if (r != NCD_NAT_OK)
		return r;
	/* Ethernet padding is cut: a frame ends with its IP packet. */
	if (m->pkt_len > len)
		rte_pktmbuf_trim(m, (uint16_t)(m->pkt_len - len));
	m->ol_flags = 0;
	if (off) {
		m->ol_flags = RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM;
		m->l2_len = pp->l2_len;
		m->l3_len = (uint16_t)(pp->l4_off - pp->l2_len);
	}
	return NCD_NAT_OK;
}

/*
 * A packet a NAT channel matched: translated, addressed to the next hop of
 * its new destination out of the channel's port, and queued in out; handed
 * to the control thread if that next hop is not cached.
 * @return 0 (queued in out, or handed over), or -1 (dropped and counted: free it)
 */
static int
nat_forward(struct ncd *d, struct ncd_worker *w, unsigned int pi, struct rte_mbuf *m,
	    const struct ncd_parsed *pp, const struct ncd_channel *ch, const struct ncd_nat_key *k,
	    int32_t pos, uint64_t now, struct nat_out *out)
{
	const struct ncd_nat_conf *nc = &ch->nat;
	struct ncd_chan_stats *cs = &w->cstats[ch->id];
	struct ncd_port_stats *ps = &w->pstats[pi];
	uint16_t op = nc->has_port ? nc->port : (uint16_t)pi;
	struct rte_ether_hdr *eh = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
	const uint8_t *dst = nc->x.flags & NCD_NAT_DST ? nc->x.dst : pp->key.dst.a;
	int nh;

	if (nat_rewrite(d, m, pp, &nc->x, op) != NCD_NAT_OK) {
		cs->nat_drop_invalid++;
		ps->drop_nat_invalid++;
		return -1;
	}
	/* Before the source MAC changes: the mapping keeps it, for the replies. */
	if (nc->reverse && nat_track(d, pi, m, pp, ch, k, pos, now, cs, ps) != 0)
		return -1;
	rte_ether_addr_copy(&d->ports[op].mac, &eh->src_addr);
	if (nc->has_via) {
		memcpy(eh->dst_addr.addr_bytes, nc->via, 6);
	} else if ((nh = ncd_nh_get(d->ports[op].nh, pp->key.family, dst, now,
				    eh->dst_addr.addr_bytes)) == 0) {
		uint64_t one = 1;

		m->hash.usr = ch->id | NCD_NH_NAT;
		m->port = (uint16_t)pi;
		if (rte_ring_mp_enqueue(d->nh_req, m) != 0) {
			cs->nat_drop_no_neigh++;
			ps->drop_nat_no_neigh++;
			return -1;
		}
		if (write(d->nh_efd, &one, sizeof(one)) < 0)
			cs->wakeup_errors++;
		return 0;
	} else if (nh < 0) {
		if (nh == -ENETUNREACH) {
			cs->nat_drop_no_route++;
			ps->drop_nat_no_route++;
		} else {
			cs->nat_drop_no_neigh++;
			ps->drop_nat_no_neigh++;
		}
		return -1;
	}
	nat_queue(out, m, op, ch->id, false);
	return 0;
}

/* A reply of a translated flow: translated back, to the flow's last hop, out of its port. */
static int
nat_back(struct ncd *d, struct ncd_worker *w, unsigned int pi, struct rte_mbuf *m,
	 const struct ncd_parsed *pp, struct ncd_nat_flow *f, uint64_t now, struct nat_out *out)
{
	struct rte_ether_hdr *eh = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);

	if (nat_rewrite(d, m, pp, &f->rev, f->port) != NCD_NAT_OK) {
		w->cstats[f->chan].nat_drop_invalid++;
		w->pstats[pi].drop_nat_invalid++;
		return -1;
	}
	__atomic_store_n(&f->last, now, __ATOMIC_RELAXED);
	rte_ether_addr_copy(&d->ports[f->port].mac, &eh->src_addr);
	memcpy(eh->dst_addr.addr_bytes, f->mac, 6);
	nat_queue(out, m, f->port, f->chan, true);
	return 0;
}

/* Send what NAT translated, one tx burst per port; count it on the port it came in on. */
static void
nat_send(struct ncd_worker *w, const struct ncd *d, unsigned int pi, struct nat_out *o)
{
	struct ncd_port_stats *ps = &w->pstats[pi];
	struct rte_mbuf *b[NCD_BURST];
	uint16_t idx[NCD_BURST];
	uint32_t len[NCD_BURST];

	for (uint16_t done = 0; done < o->n;) {
		uint16_t port = UINT16_MAX, nb = 0, sent, txq;

		/* The packets for the first port not sent yet, in their order. */
		for (uint16_t i = 0; i < o->n; i++) {
			if (o->m[i] == NULL || (port != UINT16_MAX && o->port[i] != port))
				continue;
			port = o->port[i];
			idx[nb] = i;
			len[nb] = o->m[i]->pkt_len;
			b[nb++] = o->m[i];
		}
		txq = w->txq[port];
		sent = txq == NCD_NO_TXQ ? 0 : rte_eth_tx_burst(d->ports[port].port_id, txq, b, nb);
		for (uint16_t j = 0; j < nb; j++) {
			uint16_t i = idx[j];
			struct ncd_chan_stats *cs = &w->cstats[o->chan[i]];

			if (j < sent) {
				ps->nat++;
				if (o->back[i]) {
					ps->nat_reverse++;
					cs->nat_reverse++;
					cs->nat_reverse_bytes += len[j];
				} else {
					cs->nat++;
					cs->nat_bytes += len[j];
				}
			} else {
				ps->drop_nat_tx++;
				if (o->back[i])
					cs->nat_reverse_drop_tx++;
				else
					cs->nat_drop_tx++;
			}
			o->m[i] = NULL;
		}
		if (sent < nb)
			rte_pktmbuf_free_bulk(&b[sent], nb - sent);
		done += nb;
	}
	o->n = 0;
}

/*
 * Replies of flows NAT translated: looked up, in one bulk, by their own
 * 5-tuple. A hit takes the packet away from the classifier.
 */
static void
nat_lookup_replies(const struct ncd *d, const struct ncd_parsed *parsed, const uint8_t *ok,
		   uint16_t n, struct ncd_nat_flow **rev)
{
	struct ncd_nat_key keys[NCD_BURST];
	const void *kp[NCD_BURST];
	int32_t pos[NCD_BURST];
	uint16_t at[NCD_BURST], nk = 0;

	for (uint16_t i = 0; i < n; i++)
		if (ok[i]) {
			nat_key_of(&parsed[i].key, &keys[nk]);
			kp[nk] = &keys[nk];
			at[nk++] = i;
		}
	if (nk == 0 || rte_hash_lookup_bulk(d->nat.h, kp, nk, pos) != 0)
		return;
	for (uint16_t k = 0; k < nk; k++)
		if (pos[k] >= 0 && ncd_nat_flow_alive(d->channels,
						    &d->nat.flows[pos[k]]))
			rev[at[k]] = &d->nat.flows[pos[k]];
}

/*
 * The mappings that packets matched by NAT channels with reverse keep: their
 * keys (the 5-tuple of a reply), looked up in one bulk.
 */
static void
nat_lookup_mappings(const struct ncd *d, const struct ncd_parsed *parsed,
		    struct ncd_channel *const *chs, uint16_t n, struct ncd_nat_key *keys,
		    int32_t *pos)
{
	const void *kp[NCD_BURST];
	int32_t p[NCD_BURST];
	uint16_t at[NCD_BURST], nk = 0;

	for (uint16_t i = 0; i < n; i++) {
		struct nc_trie_key rk;

		pos[i] = -ENOENT;
		if (chs[i] == NULL || chs[i]->action != NCD_ACTION_NAT || !chs[i]->nat.reverse)
			continue;
		ncd_nat_reply_key(&parsed[i].key, &chs[i]->nat.x, &rk);
		nat_key_of(&rk, &keys[i]);
		kp[nk] = &keys[i];
		at[nk++] = i;
	}
	if (nk == 0 || rte_hash_lookup_bulk(d->nat.h, kp, nk, p) != 0)
		return;
	for (uint16_t k = 0; k < nk; k++)
		pos[at[k]] = p[k];
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
	struct ncd_nat_flow *rev[NCD_BURST];
	uint8_t ok[NCD_BURST];
	bool by_mark[NCD_BURST];
	struct rte_mbuf *exc[NCD_BURST], *drop[NCD_BURST];
	struct batch batches[NCD_BURST];
	struct nat_out nout;
	struct ncd_nat_key fkeys[NCD_BURST];   /* NAT with reverse: the mapping each packet keeps */
	int32_t fpos[NCD_BURST];
	uint16_t nexc = 0, ndrop = 0, nk = 0, nb = 0;
	uint8_t buf[PARSE_BYTES];
	uint64_t now = 0;

	ps->rx += n;
	nout.n = 0;
	/* One clock read a burst: what a client measures from it is what the daemon adds. */
	if (unlikely(d->rx_tsc_off >= 0)) {
		uint64_t tsc = rte_rdtsc();

		for (uint16_t i = 0; i < n; i++)
			*RTE_MBUF_DYNFIELD(pkts[i], d->rx_tsc_off, uint64_t *) = tsc;
	}
	for (uint16_t i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];
		uint32_t want = m->pkt_len < PARSE_BYTES ? m->pkt_len : PARSE_BYTES;
		const uint8_t *f = rte_pktmbuf_read(m, 0, want, buf);
		enum ncd_verdict v;

		if (i + 1 < n)
			rte_prefetch0(rte_pktmbuf_mtod(pkts[i + 1], void *));
		v = ncd_parse(f, want, m->pkt_len, p->mac.addr_bytes, csum_flags(m), &parsed[i]);
		chs[i] = NULL;
		rev[i] = NULL;
		by_mark[i] = false;
		ok[i] = v == NCD_PKT_OK;
		if (v != NCD_PKT_OK)
			ps->verdict[v]++;
	}
	/* Only while a NAT channel keeps reverse mappings: otherwise no cost at all. */
	if (__atomic_load_n(&d->nat_reverse, __ATOMIC_RELAXED) != 0) {
		nat_lookup_replies(d, parsed, ok, n, rev);
		now = rte_get_tsc_cycles();
	}
	for (uint16_t i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];

		if (!ok[i] || rev[i] != NULL)
			continue;
		/*
		 * A NIC's mark counts only if it is the mark the channel's flow rule
		 * sets on this port now: not a stale one of an earlier channel with
		 * the same id, nor one whose rule has been taken away.
		 */
		if (p->marks && (m->ol_flags & RTE_MBUF_F_RX_FDIR_ID)) {
			uint32_t mark = m->hash.fdir.hi, cid = mark & NCD_MARK_ID_MASK;
			struct ncd_channel *c = cid < d->cfg.max_channels && mark != 0 ?
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

	if (now != 0)
		nat_lookup_mappings(d, parsed, chs, n, fkeys, fpos);
	for (uint16_t i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];
		struct ncd_channel *ch = chs[i];

		if (rev[i] != NULL) {
			if (nat_back(d, w, pi, m, &parsed[i], rev[i], now, &nout) != 0)
				drop[ndrop++] = m;
			continue;
		}
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
		if (ch->action == NCD_ACTION_NAT) {
			if (now == 0)
				now = rte_get_tsc_cycles();
			if (nat_forward(d, w, pi, m, &parsed[i], ch, &fkeys[i], fpos[i], now,
					&nout) != 0)
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
			nb++;
		}
		batches[j].m[batches[j].n++] = m;
	}
	for (uint16_t j = 0; j < nb; j++)
		deliver(w, ps, &batches[j]);
	if (nb > 0)
		wake_consumers(w, batches, nb);
	if (nout.n > 0)
		nat_send(w, d, pi, &nout);
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

		/* The client's until now (it transmits them marked): the daemon's from here on. */
		ncd_unmark(d, x);
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
		uint32_t usr = m[i]->hash.usr, id = usr & ~NCD_NH_NAT;
		struct ncd_channel *ch = __atomic_load_n(&d->channels[id], __ATOMIC_ACQUIRE);
		uint32_t len = m[i]->pkt_len;
		bool alive = ch != NULL && ch->dir->generation == m[i]->hash.fdir.hi;

		if (usr & NCD_NH_NAT) {
			/* m->port: where it came in, whose counters it goes to. */
			struct ncd_port_stats *ps = &w->pstats[m[i]->port];
			uint16_t op = alive ? ch->nat.has_port ? ch->nat.port : m[i]->port : 0;

			if (alive && w->txq[op] != NCD_NO_TXQ &&
			    rte_eth_tx_burst(d->ports[op].port_id, w->txq[op], &m[i], 1) == 1) {
				ps->nat++;
				w->cstats[id].nat++;
				w->cstats[id].nat_bytes += len;
				continue;
			}
			ps->drop_nat_tx++;
			if (alive)
				w->cstats[id].nat_drop_tx++;
			rte_pktmbuf_free(m[i]);
			continue;
		}
		if (!alive || ch->tx == NULL) {
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

/*
 * A client's alloc ring, topped up from the pool once a quarter of it is
 * gone: what the client allocates never comes from the pool in its own
 * process, where a kill could leave the pool's ring or a cache half-updated.
 */
static void
fill_alloc_ring(const struct ncd *d, unsigned int slot)
{
	struct rte_ring *r = d->alloc_rings[slot];
	struct rte_mbuf *m[NC_ALLOC_RING_SIZE];
	unsigned int n;

	if (!__atomic_load_n(&d->clients[slot].want_alloc, __ATOMIC_RELAXED))
		return;
	n = rte_ring_free_count(r);
	if (n < NC_ALLOC_RING_SIZE / 4 || rte_pktmbuf_alloc_bulk(d->pool, m, n) != 0)
		return;
	rte_ring_enqueue_bulk(r, (void **)m, n, NULL);
}

/*
 * What clients gave back: unmarked, into this worker's mempool cache, where
 * the next rx burst finds them. At most two bursts per ring per loop. And
 * what they will allocate.
 */
static void
serve_slot_rings(const struct ncd *d, const struct ncd_worker *w)
{
	uint64_t act = __atomic_load_n(&d->slot_active, __ATOMIC_ACQUIRE) & w->slots;

	while (act != 0) {
		unsigned int slot = (unsigned int)__builtin_ctzll(act);

		act &= act - 1;
		if (ncd_ring_free_burst(d, d->free_rings[slot]) == NCD_BURST)
			ncd_ring_free_burst(d, d->free_rings[slot]);
		fill_alloc_ring(d, slot);
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
		serve_slot_rings(d, w);
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
	memset(&d->ctl_pstats[port], 0, sizeof(d->ctl_pstats[port]));
	__atomic_store_n(&d->stats_release, gen, __ATOMIC_RELEASE);
}

void
ncd_port_stats_sum(const struct ncd *d, unsigned int port, struct ncd_port_stats *out)
{
	const uint64_t *ctl = (const uint64_t *)&d->ctl_pstats[port];

	sum_counters(d, (uint64_t *)out, sizeof(*out), port_block, port);
	/* And what the control thread counted (NAT packets whose next hop it resolved). */
	for (size_t f = 0; f < sizeof(*out) / sizeof(uint64_t); f++)
		((uint64_t *)out)[f] += ctl[f];
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
