/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * NAT on the datapath: a worker hands over a burst's NAT packets at once.
 * Packets a NAT channel matched are translated, their flow's reverse
 * mapping kept (for channels with reverse), addressed to the next hop and
 * sent; replies of those flows are translated back to where the flow came
 * from. No locks: the mappings are an rte_hash with lock-free readers.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_hash.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#define NCD_LOGTYPE ncd_logtype_worker
#include "datapath/datapath.h"
#include "datapath/frag.h"
#include "datapath/nat.h"
#include "ncd.h"
#include "nexthop/nexthop.h"
#include "port/port.h"

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
	struct ncd_nat_table *t = d->nat;
	struct ncd_nat_xlate rev;
	struct ncd_nat_flow *f;
	uint32_t want = NCD_NATF_FREE;

	ncd_nat_reverse_of(&pp->key, &ch->nat.x, &rev);
	/* Not there at the burst's lookup: an earlier packet of the burst may have added it. */
	if (pos < 0)
		pos = rte_hash_lookup(t->h, k);
	if (pos < 0) {
		/* The channel's share first (workers may each pass it at once: by one each). */
		if (__atomic_load_n(&t->live[ch->id], __ATOMIC_RELAXED) >=
		    d->cfg.nat_flows_per_channel) {
			cs->nat_drop_channel_full++;
			ps->drop_nat_table_full++;
			return -1;
		}
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
	__atomic_fetch_add(&t->live[ch->id], 1, __ATOMIC_RELAXED);
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

/* Count a translated packet that went out (sent) or that its port did not take. */
static void
nat_count(struct ncd_worker *w, struct ncd_port_stats *ps, uint32_t chan, bool back, bool sent,
	  uint32_t len)
{
	struct ncd_chan_stats *cs = &w->cstats[chan];

	if (sent) {
		ps->nat++;
		if (back) {
			ps->nat_reverse++;
			cs->nat_reverse++;
			cs->nat_reverse_bytes += len;
		} else {
			cs->nat++;
			cs->nat_bytes += len;
		}
	} else {
		ps->drop_nat_tx++;
		if (back)
			cs->nat_reverse_drop_tx++;
		else
			cs->nat_drop_tx++;
	}
}

/*
 * Send what NAT translated of o->m[from, to), one tx burst per port (in
 * order within a port); count it on port pi, where it came in.
 */
static void
nat_send_range(struct ncd_worker *w, const struct ncd *d, unsigned int pi, struct nat_out *o,
	       uint16_t from, uint16_t to)
{
	struct ncd_port_stats *ps = &w->pstats[pi];
	struct rte_mbuf *b[NCD_BURST];
	uint16_t idx[NCD_BURST];
	uint32_t len[NCD_BURST];

	for (uint16_t done = from; done < to;) {
		uint16_t port = UINT16_MAX, nb = 0, sent, txq;

		/* The packets for the first port not sent yet, in their order. */
		for (uint16_t i = from; i < to; i++) {
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

			nat_count(w, ps, o->chan[i], o->back[i], j < sent, len[j]);
			o->m[i] = NULL;
		}
		if (sent < nb)
			rte_pktmbuf_free_bulk(&b[sent], nb - sent);
		done += nb;
	}
}

/*
 * Send what NAT translated. A packet that must go in pieces goes on its
 * own, after what came before it and before what came after.
 */
static void
nat_send(struct ncd_worker *w, const struct ncd *d, unsigned int pi, struct nat_out *o)
{
	struct ncd_port_stats *ps = &w->pstats[pi];
	uint16_t from = 0;

	for (uint16_t i = 0; i < o->n; i++) {
		uint16_t port = o->port[i], txq = w->txq[port];
		uint32_t l = o->m[i]->pkt_len;
		bool ok = false;

		/* A reassembled datagram, or one too long for the port: in pieces. */
		if (!ncd_frag_must_split(o->m[i], d->cfg.ports[port].mtu))
			continue;
		nat_send_range(w, d, pi, o, from, i);
		if (txq != NCD_NO_TXQ)
			ok = ncd_frag_send(d, d->ports[port].port_id, txq, d->cfg.ports[port].mtu, ps,
					   o->m[i]) == 0;
		else
			rte_pktmbuf_free(o->m[i]);
		nat_count(w, ps, o->chan[i], o->back[i], ok, l);
		o->m[i] = NULL;
		from = i + 1;
	}
	nat_send_range(w, d, pi, o, from, o->n);
	o->n = 0;
}

bool
ncd_nat_replies(const struct ncd *d, const struct ncd_parsed *parsed, const uint8_t *ok,
		uint16_t n, struct ncd_nat_flow **rev)
{
	struct ncd_nat_key keys[NCD_BURST];
	const void *kp[NCD_BURST];
	int32_t pos[NCD_BURST];
	uint16_t at[NCD_BURST], nk = 0;

	for (uint16_t i = 0; i < n; i++)
		rev[i] = NULL;
	if (__atomic_load_n(&d->nat_reverse, __ATOMIC_RELAXED) == 0)
		return false;
	for (uint16_t i = 0; i < n; i++)
		if (ok[i]) {
			nat_key_of(&parsed[i].key, &keys[nk]);
			kp[nk] = &keys[nk];
			at[nk++] = i;
		}
	if (nk == 0 || rte_hash_lookup_bulk(d->nat->h, kp, nk, pos) != 0)
		return true;
	for (uint16_t k = 0; k < nk; k++)
		if (pos[k] >= 0 && ncd_nat_flow_alive(d->channels, &d->nat->flows[pos[k]]))
			rev[at[k]] = &d->nat->flows[pos[k]];
	return true;
}

/*
 * The mappings that packets matched by NAT channels with reverse keep: their
 * keys (the 5-tuple of a reply), looked up in one bulk.
 */
static void
nat_lookup_mappings(const struct ncd *d, const struct ncd_nat_burst *b, struct ncd_nat_key *keys,
		    int32_t *pos)
{
	const void *kp[NCD_BURST];
	int32_t p[NCD_BURST];
	uint16_t at[NCD_BURST], nk = 0;

	for (uint16_t i = 0; i < b->n; i++) {
		const struct ncd_channel *ch = b->ch[i];
		struct nc_trie_key rk;

		pos[i] = -ENOENT;
		if (ch == NULL || !ch->nat.reverse)
			continue;
		ncd_nat_reply_key(&b->pp[i]->key, &ch->nat.x, &rk);
		nat_key_of(&rk, &keys[i]);
		kp[nk] = &keys[i];
		at[nk++] = i;
	}
	if (nk == 0 || rte_hash_lookup_bulk(d->nat->h, kp, nk, p) != 0)
		return;
	for (uint16_t k = 0; k < nk; k++)
		pos[at[k]] = p[k];
}

void
ncd_nat_process(struct ncd *d, struct ncd_worker *w, unsigned int pi, struct ncd_nat_burst *b,
		uint64_t now, struct rte_mbuf **drop, uint16_t *ndrop)
{
	struct ncd_nat_key keys[NCD_BURST];   /* NAT with reverse: the mapping each packet keeps */
	int32_t pos[NCD_BURST];
	struct nat_out out;

	if (now == 0)
		now = rte_get_tsc_cycles();
	out.n = 0;
	nat_lookup_mappings(d, b, keys, pos);
	for (uint16_t i = 0; i < b->n; i++) {
		int r = b->rev[i] != NULL ?
			nat_back(d, w, pi, b->m[i], b->pp[i], b->rev[i], now, &out) :
			nat_forward(d, w, pi, b->m[i], b->pp[i], b->ch[i], &keys[i], pos[i], now,
				    &out);

		if (r != 0)
			drop[(*ndrop)++] = b->m[i];
	}
	if (out.n > 0)
		nat_send(w, d, pi, &out);
	b->n = 0;
}
