/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The worker loop and the per-packet path. For each burst: parse every
 * frame, take NIC marks, classify the rest in one bulk lookup, then hand out
 * the burst: isolated clients' matches copied into their regions in burst
 * order (one lock hold a region), zero-copy ones to their channels (one ring
 * enqueue per channel per burst), NAT's packets to NAT, drops to the pool,
 * everything else to the exception device unchanged. No lock but a region's,
 * no syscall but a wake-up, no allocation; counters are per worker, on the
 * worker's own cache lines.
 */
#include <string.h>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_hash_crc.h>
#include <rte_ip_frag.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_pause.h>
#include <rte_prefetch.h>
#include <rte_rcu_qsbr.h>

#define NCD_LOGTYPE ncd_logtype_worker
#include "channel/channel.h"
#include "datapath/capture.h"
#include "datapath/datapath.h"
#include "datapath/deliver.h"
#include "datapath/dp.h"
#include "datapath/frag.h"
#include "datapath/idle.h"
#include "datapath/police.h"
#include "datapath/nat.h"
#include "ncd.h"
#include "nexthop/nexthop.h"
#include "offload/offload.h"
#include "packet/mbuf_free.h"
#include "port/port.h"

static inline unsigned int
csum_flags(const struct rte_mbuf *m)
{
	switch (m->ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK) {
	case RTE_MBUF_F_RX_IP_CKSUM_GOOD: return NCD_PARSE_CSUM_GOOD;
	case RTE_MBUF_F_RX_IP_CKSUM_BAD: return NCD_PARSE_CSUM_BAD;
	default: return 0;
	}
}

/* A channel's packet to its capture, if one runs. */
static inline void
capture_hit(const struct ncd_channel *ch, uint16_t port_id, struct rte_mbuf *m)
{
	/* Acquire: pairs with the control thread's publication of the capture. */
	struct ncd_capture *cap = __atomic_load_n(&ch->capture, __ATOMIC_ACQUIRE);

	if (unlikely(cap != NULL))
		ncd_capture_take(cap, port_id, 0, &m, 1, 0);
}

/* n hits of a channel, marks of them found by the NIC's mark. */
static inline void
count_hits(struct ncd_worker *w, const struct ncd_channel *ch, uint32_t n, uint32_t marks)
{
	struct ncd_chan_stats *cs = &w->cstats[ch->id];

	cs->hits += n;
	cs->hits_mark += marks;
	cs->hits_trie += n - marks;
}

/* One hit of a NAT or drop channel: captured, and counted at once. */
static inline void
count_hit(struct ncd_worker *w, const struct ncd_channel *ch, bool by_mark, uint16_t port_id,
	  struct rte_mbuf *m)
{
	capture_hit(ch, port_id, m);
	count_hits(w, ch, 1, by_mark);
}

/*
 * A flow's hash, to pick a shared channel's consumer. CRC alone is linear:
 * flows that differ in a few port bits can all land on one consumer; the
 * finaliser of MurmurHash3 spreads every input bit over every output bit.
 */
static inline uint32_t
flow_hash(const struct nc_trie_key *k)
{
	/* rte_hash_crc() reads 8 bytes at a time: from a copy aligned for it. */
	uint64_t a[(sizeof(*k) + 7) / 8];
	uint32_t h;

	memcpy(a, k, sizeof(*k));
	h = rte_hash_crc(a, sizeof(*k), 0);

	h ^= h >> 16;
	h *= 0x85ebca6bu;
	h ^= h >> 13;
	h *= 0xc2b2ae35u;
	return h ^ (h >> 16);
}

/* The packets of a burst as the stages pass them on. */
struct burst {
	uint16_t n;
	struct ncd_parsed parsed[NCD_BURST];
	uint8_t ok[NCD_BURST];                 /* parsed as IP, to be classified */
	bool whole[NCD_BURST];                 /* a datagram reassembled from fragments */
	struct ncd_channel *ch[NCD_BURST];     /* the channel it matched, or NULL */
	bool by_mark[NCD_BURST];               /* found by the NIC's mark, not the trie */
	struct ncd_nat_flow *rev[NCD_BURST];   /* a reply of a flow NAT translated, or NULL */
	uint16_t kpkt[NCD_BURST];              /* the trie's keys: the packet of each */
	uint16_t nk;
	uint16_t taken;                        /* how many have a channel or a NAT flow */
	bool odd;                              /* a fragment, or a frame too big for the kernel */
	uint64_t now;                          /* TSC, once something needed it; or 0 */
};

/* Parse one frame into slot i; count what is not IP (it goes to the kernel, not classified). */
static inline void
parse_one(const struct ncd_port *p, struct ncd_port_stats *ps, struct rte_mbuf *m,
	  unsigned int flags, struct burst *b, uint16_t i)
{
	uint8_t buf[NCD_PARSE_BYTES];
	uint32_t want = m->pkt_len < NCD_PARSE_BYTES ? m->pkt_len : NCD_PARSE_BYTES;
	const uint8_t *f = rte_pktmbuf_read(m, 0, want, buf);
	enum ncd_verdict v = ncd_parse(f, want, m->pkt_len, p->mac.addr_bytes, flags, &b->parsed[i]);

	b->ch[i] = NULL;
	b->by_mark[i] = false;
	b->ok[i] = v == NCD_PKT_OK;
	if (v != NCD_PKT_OK)
		ps->verdict[v]++;
}

/*
 * Parse every frame. A fragment goes to reassembly: its slot is empty
 * (NULL) until a fragment completes a datagram, which takes that slot and
 * is parsed again, whole, ports and all.
 */
static inline void
parse_burst(struct ncd *d, struct ncd_worker *w, unsigned int pi, struct rte_mbuf **pkts,
	    struct burst *b)
{
	const struct ncd_port *p = &d->ports[pi];
	struct ncd_port_stats *ps = &w->pstats[pi];
	const uint16_t n = b->n;
	bool frags = false, big = false;

	for (uint16_t i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];

		if (i + 1 < n)
			rte_prefetch0(rte_pktmbuf_mtod(pkts[i + 1], void *));
		parse_one(p, ps, m, csum_flags(m), b, i);
		big |= m->pkt_len > p->exc_max_frame;
		b->whole[i] = false;
		if (likely(b->parsed[i].frag == NCD_FRAG_NONE) || !b->ok[i])
			continue;
		if (!frags) {
			frags = true;
			if (b->now == 0)
				b->now = rte_get_tsc_cycles();
		}
		m = ncd_frag_gather(d, w, ps, m, &b->parsed[i], b->now);
		pkts[i] = m;
		b->ok[i] = 0;
		if (m == NULL)
			continue;
		b->whole[i] = true;
		parse_one(p, ps, m, NCD_PARSE_CSUM_GOOD, b, i);
	}
	if (frags && w->frag_dr->cnt > 0)
		rte_ip_frag_free_death_row(w->frag_dr, 0);
	b->odd = frags | big;
}

/*
 * The NIC's marks: a mark counts only if it is the mark the channel's flow
 * rule sets on this port now, not a stale one of an earlier channel with the
 * same id, nor one whose rule has been taken away. What no mark decides
 * (and no NAT mapping took) becomes a key for the trie.
 */
static inline void
mark_burst(const struct ncd *d, unsigned int pi, struct ncd_port_stats *ps,
	   struct rte_mbuf **pkts, struct burst *b, struct nc_trie_key *keys, bool revs)
{
	const bool marks = d->ports[pi].marks;
	const uint16_t n = b->n;
	uint16_t nk = 0, taken = 0;

	/* No marks to read and no NAT replies: every IP packet is the trie's. */
	if (!marks && !revs) {
		for (uint16_t i = 0; i < n; i++)
			if (b->ok[i]) {
				b->kpkt[nk] = i;
				keys[nk++] = b->parsed[i].key;
			}
		b->nk = nk;
		b->taken = 0;
		return;
	}
	for (uint16_t i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];

		if (!b->ok[i])
			continue;
		if (b->rev[i] != NULL) {
			taken++;
			continue;
		}
		if (marks && (m->ol_flags & RTE_MBUF_F_RX_FDIR_ID)) {
			uint32_t mark = m->hash.fdir.hi, cid = mark & NCD_MARK_ID_MASK;
			struct ncd_channel *c = cid < d->cfg.max_channels && mark != 0 ?
				__atomic_load_n(&d->channels[cid], __ATOMIC_ACQUIRE) : NULL;

			if (c != NULL && __atomic_load_n(&c->mark[pi], __ATOMIC_ACQUIRE) == mark) {
				b->ch[i] = c;
				b->by_mark[i] = true;
				ps->mark_hits++;
				taken++;
				continue;
			}
			ps->mark_ignored++;
		}
		b->kpkt[nk] = i;
		keys[nk++] = b->parsed[i].key;
	}
	b->nk = nk;
	b->taken = taken;
}

/* The trie, in one bulk lookup, for the keys the marks left. */
static inline void
classify_burst(const struct ncd *d, struct ncd_port_stats *ps, struct burst *b,
	       const struct nc_trie_key *keys)
{
	const uint16_t nk = b->nk;
	uint32_t res[NCD_BURST];
	unsigned int hits = 0;

	if (nk == 0)
		return;
	nc_trie_lookup_bulk(d->trie, keys, res, nk);
	for (uint16_t k = 0; k < nk; k++) {
		/* Acquire: pairs with the control thread's publication of the channel. */
		struct ncd_channel *ch = res[k] != NC_TRIE_NOMATCH ?
			__atomic_load_n(&d->channels[res[k]], __ATOMIC_ACQUIRE) : NULL;

		b->ch[b->kpkt[k]] = ch;
		hits += ch != NULL;
	}
	ps->miss += nk - hits;
	b->taken += hits;
}

/* A kernel-bound packet's policer bucket, from what the parser found. */
static inline uint8_t
police_class(const struct ncd_police *pc, const struct burst *b, uint16_t i,
	     const struct rte_mbuf *m)
{
	return ncd_police_class(pc, b->ok[i] ? &b->parsed[i] : NULL, m);
}

/*
 * What goes to the kernel: exc, or whole (a reassembled datagram), or drop
 * when too big for the exception device; returns how many in exc. A
 * function of its own: inlined into the burst's, whose live values are
 * many, the counts lived on the stack, a store and a reload a packet.
 */
static __rte_noinline uint16_t
kernel_collect(const struct burst *b, struct rte_mbuf **pkts, uint32_t max_frame,
	       const struct ncd_police *pc, struct rte_mbuf **exc, uint8_t *cls,
	       struct rte_mbuf **drop, uint16_t *ndrop, struct rte_mbuf **whole, uint8_t *wcls,
	       uint16_t *nwhole)
{
	unsigned int ne = 0, nd = 0, nw = 0;

	for (uint16_t i = 0; i < b->n; i++) {
		struct rte_mbuf *m = pkts[i];

		if (m == NULL || b->ch[i] != NULL || b->rev[i] != NULL)
			continue;
		if (unlikely(b->whole[i])) {
			if (pc != NULL)
				wcls[nw] = police_class(pc, b, i, m);
			whole[nw++] = m;
		} else if (unlikely(m->pkt_len > max_frame)) {
			drop[nd++] = m;
		} else {
			if (pc != NULL)
				cls[ne] = police_class(pc, b, i, m);
			exc[ne++] = m;
		}
	}
	*ndrop = (uint16_t)nd;
	*nwhole = (uint16_t)nw;
	return (uint16_t)ne;
}

/*
 * A metered channel's packet: its colour from this worker's buckets (one
 * clock read a burst, in *now), counted. @return whether it is red.
 */
static inline bool
meter_red(struct ncd_worker *w, const struct ncd_channel *ch, struct ncd_meter *mt,
	  const struct rte_mbuf *m, uint64_t *now)
{
	struct ncd_meter_state *st = &mt->st[w->index];
	uint32_t len = mt->bytes ? m->pkt_len : 1;
	struct ncd_chan_stats *cs = &w->cstats[ch->id];
	enum rte_color c;

	if (*now == 0)
		*now = rte_get_tsc_cycles();
	c = ncd_meter_colour(mt, st, *now, len);
	cs->meter_green += c == RTE_COLOR_GREEN;
	cs->meter_yellow += c == RTE_COLOR_YELLOW;
	cs->meter_red += c == RTE_COLOR_RED;
	return c == RTE_COLOR_RED;
}

/*
 * A burst whose matches are all one metered channel's (a flood, or a
 * channel's steady flow): its meter asked once for all of them, on a copy of
 * this worker's buckets. Green for all at once is green for each in turn
 * (one clock read a burst, and tokens only ever go down within it), so then
 * the copy stands and they are counted green: *gch's packets need no more.
 * Otherwise nothing changed, and each asks in turn. @return the meter, or NULL.
 */
static __rte_noinline struct ncd_meter *
meter_burst(struct ncd_worker *w, struct rte_mbuf **pkts, struct burst *b,
	    struct ncd_channel **gch)
{
	struct ncd_channel *ch = NULL;
	struct ncd_meter_state copy;
	struct ncd_meter *mt;
	uint32_t cnt = 0, units;

	for (uint16_t i = 0; i < b->n; i++) {
		if (pkts[i] == NULL || b->ch[i] == NULL || b->rev[i] != NULL)
			continue;
		if (ch != NULL && b->ch[i] != ch)
			return NULL;
		ch = b->ch[i];
		cnt++;
	}
	mt = ch != NULL ? __atomic_load_n(&ch->meter, __ATOMIC_ACQUIRE) : NULL;
	if (mt == NULL)
		return NULL;
	units = cnt;
	if (mt->bytes) {
		units = 0;
		for (uint16_t i = 0; i < b->n; i++)
			if (pkts[i] != NULL && b->ch[i] == ch && b->rev[i] == NULL)
				units += pkts[i]->pkt_len;
	}
	if (b->now == 0)
		b->now = rte_get_tsc_cycles();
	copy = mt->st[w->index];
	if (ncd_meter_colour(mt, &copy, b->now, units) != RTE_COLOR_GREEN)
		return NULL;
	mt->st[w->index] = copy;
	w->cstats[ch->id].meter_green += cnt;
	*gch = ch;
	return mt;
}

/*
 * Hand out the burst: matches to their channels' batches, NAT's packets to
 * NAT, drops to the pool, everything else to the kernel unchanged.
 */
static inline void
dispatch_burst(struct ncd *d, struct ncd_worker *w, unsigned int pi, struct rte_mbuf **pkts,
	       struct burst *b)
{
	const struct ncd_port *p = &d->ports[pi];
	struct ncd_port_stats *ps = &w->pstats[pi];
	struct ncd_police *pc = d->police[pi];
	struct rte_mbuf *exc[NCD_BURST], *drop[NCD_BURST], *whole[NCD_BURST];
	uint8_t cls[NCD_BURST], wcls[NCD_BURST];
	struct ncd_batch batches[NCD_BURST];
	struct ncd_nat_burst nat;
	struct ncd_iso_burst iso;
	const uint16_t n = b->n;
	uint16_t nexc = 0, ndrop = 0, nb = 0, nwhole = 0;

	/* The kernel's burst as it came: nothing to sort, but its policer's buckets. */
	if (b->taken == 0 && !b->odd) {
		uint16_t k = n;

		if (pc != NULL) {
			for (uint16_t i = 0; i < n; i++)
				cls[i] = police_class(pc, b, i, pkts[i]);
			if (b->now == 0)
				b->now = rte_get_tsc_cycles();
			k = ncd_police_burst(pc, w->index, ps, pkts, cls, n, b->now);
		}
		ncd_dp_to_kernel(p, w->exc_txq[pi], ps, pkts, k);
		return;
	}
	nat.n = 0;
	iso.n = 0;
	iso.nrun = 0;
	if (b->taken < n) {
		nexc = kernel_collect(b, pkts, p->exc_max_frame, pc, exc, cls, drop, &ndrop, whole,
				      wcls, &nwhole);
		ps->drop_too_big += ndrop;
	}
	/* A burst of one metered channel's, green at once: its packets skip the meter below. */
	struct ncd_channel *gch = NULL;
	struct ncd_meter *gmt = __atomic_load_n(&d->nmeters, __ATOMIC_RELAXED) != 0 && b->taken > 0 ?
				meter_burst(w, pkts, b, &gch) : NULL;

	for (uint16_t i = 0; i < n && b->taken > 0; i++) {
		struct rte_mbuf *m = pkts[i];
		struct ncd_channel *ch = b->ch[i];
		uint16_t j;

		if (m == NULL || (ch == NULL && b->rev[i] == NULL))
			continue;              /* a fragment held by reassembly, or the kernel's */
		/*
		 * Acquire, once: a meter changed at run time (ncd_channel_set_meter())
		 * is freed only after this burst, but may be gone from the channel.
		 */
		struct ncd_meter *mt = ch == NULL ? NULL : ch == gch ? gmt :
				       __atomic_load_n(&ch->meter, __ATOMIC_ACQUIRE);

		if (unlikely(mt != NULL && mt != gmt && b->rev[i] == NULL) &&
		    meter_red(w, ch, mt, m, &b->now)) {
			count_hit(w, ch, b->by_mark[i], p->port_id, m);
			/* Red: to the kernel as a miss would go, or dropped. */
			if (mt->exceed_kernel && m->pkt_len <= p->exc_max_frame) {
				if (pc != NULL)
					cls[nexc] = police_class(pc, b, i, m);
				exc[nexc++] = m;
			} else if (mt->exceed_kernel) {
				ps->drop_too_big++;
				drop[ndrop++] = m;
			} else {
				w->cstats[ch->id].drop_meter++;
				ps->drop_meter++;
				drop[ndrop++] = m;
			}
			continue;
		}
		if (b->rev[i] != NULL || ch->action == NC_ACTION_NAT) {
			if (ch != NULL)
				count_hit(w, ch, b->by_mark[i], p->port_id, m);
			nat.m[nat.n] = m;
			nat.pp[nat.n] = &b->parsed[i];
			nat.ch[nat.n] = b->rev[i] != NULL ? NULL : ch;
			nat.rev[nat.n++] = b->rev[i];
			continue;
		}
		if (ch->action == NC_ACTION_DROP) {
			count_hit(w, ch, b->by_mark[i], p->port_id, m);
			w->cstats[ch->id].dropped++;
			ps->dropped_by_rule++;
			drop[ndrop++] = m;
			continue;
		}
		capture_hit(ch, p->port_id, m);
		/* Delivered frames end with their IP packet: Ethernet padding is cut. */
		uint32_t len = b->parsed[i].l2_len + b->parsed[i].l3_len;

		if (m->pkt_len > len)
			rte_pktmbuf_trim(m, (uint16_t)(m->pkt_len - len));
		/*
		 * An isolated client's: into its region in burst order, unsorted.
		 * Acquire: pairs with the client's attach (its ring and limit are
		 * set). Decided once a burst: a region attached after this look gets
		 * what went on the channel's ring once no worker is in such a burst
		 * (ncd_region_hand_over()).
		 */
		struct ncd_region *rg = __atomic_load_n(&ch->region, __ATOMIC_ACQUIRE);

		if (rg != NULL) {
			if (iso.nrun == 0 || iso.run[iso.nrun - 1].ch != ch)
				iso.run[iso.nrun++] = (struct ncd_iso_run){ .ch = ch, .rg = rg,
									    .first = iso.n };
			iso.run[iso.nrun - 1].n++;
			iso.run[iso.nrun - 1].marks += b->by_mark[i];
			iso.m[iso.n++] = m;
			continue;
		}
		for (j = 0; j < nb && batches[j].ch != ch; j++)
			;
		if (j == nb) {
			batches[nb].ch = ch;
			batches[nb].n = 0;
			batches[nb].marks = 0;
			nb++;
		}
		batches[j].marks += b->by_mark[i];
		if (unlikely(ch->shared))
			batches[j].hash[batches[j].n] = flow_hash(&b->parsed[i].key);
		batches[j].m[batches[j].n++] = m;
	}
	/* A batch's hits at once: counted a packet at a time, each add waited for the last. */
	for (uint16_t j = 0; j < nb; j++)
		count_hits(w, batches[j].ch, batches[j].n, batches[j].marks);
	ncd_dp_deliver(w, ps, batches, nb, &iso);
	if (nat.n > 0)
		ncd_nat_process(d, w, pi, &nat, b->now, drop, &ndrop);
	if (pc != NULL && nexc + nwhole > 0) {
		if (b->now == 0)
			b->now = rte_get_tsc_cycles();
		nexc = ncd_police_burst(pc, w->index, ps, exc, cls, nexc, b->now);
		nwhole = ncd_police_burst(pc, w->index, ps, whole, wcls, nwhole, b->now);
	}
	ncd_dp_to_kernel(p, w->exc_txq[pi], ps, exc, nexc);
	for (uint16_t i = 0; i < nwhole; i++)
		ncd_dp_to_kernel_whole(d, p, w->exc_txq[pi], ps, whole[i]);
	if (ndrop > 0)
		ncd_mbuf_free_burst(drop, ndrop);
}

/* A burst from port pi: parse, mark, classify, dispatch. */
static void
process_burst(struct ncd *d, struct ncd_worker *w, unsigned int pi, struct rte_mbuf **pkts,
	      uint16_t n)
{
	struct ncd_port_stats *ps = &w->pstats[pi];
	struct nc_trie_key keys[NCD_BURST];
	struct burst b;

	ps->rx += n;
	b.n = n;
	b.now = 0;
	/* One clock read a burst: what a client measures from it is what the daemon adds. */
	if (unlikely(d->rx_tsc_off >= 0)) {
		uint64_t tsc = rte_rdtsc();

		for (uint16_t i = 0; i < n; i++)
			*RTE_MBUF_DYNFIELD(pkts[i], d->rx_tsc_off, uint64_t *) = tsc;
	}
	parse_burst(d, w, pi, pkts, &b);
	/* Replies of NAT's flows are NAT's: they skip the classifier. */
	bool revs = ncd_nat_replies(d, b.parsed, b.ok, n, b.rev);

	if (revs)
		b.now = rte_get_tsc_cycles();
	mark_burst(d, pi, ps, pkts, &b, keys, revs);
	classify_burst(d, ps, &b, keys);
	dispatch_burst(d, w, pi, pkts, &b);
}

int
ncd_workers_init(struct ncd *d)
{
	d->workers = rte_zmalloc("ncd_workers", d->cfg.nworkers * sizeof(*d->workers),
				 RTE_CACHE_LINE_SIZE);
	d->channels = rte_zmalloc("ncd_channels", d->cfg.max_channels * sizeof(*d->channels),
				  RTE_CACHE_LINE_SIZE);
	if (d->workers == NULL || d->channels == NULL)
		return -1;
	for (unsigned int i = 0; i < d->cfg.nworkers; i++) {
		struct ncd_worker *w = &d->workers[i];
		const struct ncd_worker_conf *wc = &d->cfg.workers[i];

		w->index = i;
		w->lcore = wc->lcore;
		/* Client slots' free and alloc rings go round the workers. */
		for (unsigned int slot = i; slot < NC_MAX_CLIENTS; slot += d->cfg.nworkers)
			w->slots |= UINT64_C(1) << slot;
		w->nrx = wc->nrx;
		for (unsigned int q = 0; q < wc->nrx; q++)
			w->rx[q] = (struct ncd_rxq){ wc->rx[q].port, wc->rx[q].queue };
		w->cstats = rte_zmalloc("ncd_cstats", d->cfg.max_channels * sizeof(*w->cstats),
					RTE_CACHE_LINE_SIZE);
		w->txch = rte_zmalloc("ncd_txch", d->cfg.max_channels * sizeof(*w->txch),
				      RTE_CACHE_LINE_SIZE);
		if (w->cstats == NULL || w->txch == NULL)
			return -1;
	}
	d->ctl_cstats = rte_zmalloc("ncd_ctl_cstats", d->cfg.max_channels * sizeof(*d->ctl_cstats),
				    RTE_CACHE_LINE_SIZE);
	if (d->ctl_cstats == NULL || ncd_police_init(d) != 0)
		return -1;
	return ncd_frag_init(d);
}

void
ncd_workers_free(struct ncd *d)
{
	ncd_frag_free(d);
	ncd_police_free(d);
	for (unsigned int i = 0; d->workers != NULL && i < d->cfg.nworkers; i++) {
		rte_free(d->workers[i].cstats);
		rte_free(d->workers[i].txch);
	}
	rte_free(d->workers);
	d->workers = NULL;
	rte_free(d->channels);
	d->channels = NULL;
	rte_free(d->ctl_cstats);
	d->ctl_cstats = NULL;
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
	w->nh_done = ncd_nh_done(w->index);
	/* Its queues, on its own lines: the ports' maps are read once, here. */
	for (unsigned int p = 0; p < d->cfg.nports; p++) {
		w->txq[p] = d->ports[p].txq[w->index];
		w->exc_txq[p] = d->ports[p].exc_txq[w->index];
	}
	rte_rcu_qsbr_thread_register(d->qsbr, w->index);
	rte_rcu_qsbr_thread_online(d->qsbr, w->index);
	NCD_LOG(INFO, "worker %u on lcore %u: %u rx queues, idle %s", w->index, w->lcore, w->nrx,
		ncd_idle_name(w->idle));
	ncd_idle_start(w);
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
		uint32_t got = 0;

		for (unsigned int i = 0; i < w->nrx; i++) {
			const struct ncd_rxq *q = &w->rx[i];
			uint16_t n = rte_eth_rx_burst(d->ports[q->port].port_id, q->queue, pkts,
						      NCD_BURST);

			if (n > 0) {
				__atomic_store_n(&w->burst_seq, w->burst_seq + 1, __ATOMIC_RELAXED);
				__atomic_thread_fence(__ATOMIC_RELEASE);
				process_burst(d, w, q->port, pkts, n);
				__atomic_store_n(&w->burst_seq, w->burst_seq + 1, __ATOMIC_RELEASE);
			}
			got += n;
		}
		/* One writer: plain stores the control thread reads whole. */
		__atomic_store_n(&w->loops, w->loops + 1, __ATOMIC_RELAXED);
		if (got > 0) {
			__atomic_store_n(&w->busy_loops, w->busy_loops + 1, __ATOMIC_RELAXED);
			__atomic_store_n(&w->packets, w->packets + got, __ATOMIC_RELAXED);
		}
		for (unsigned int pi = 0; pi < d->cfg.nports; pi++)
			if (polls_port[pi] && d->ports[pi].has_exc)
				ncd_dp_from_kernel(d, w, pi);
		/* Acquire: pairs with the control thread's publication of each entry. */
		uint32_t ntx = __atomic_load_n(&w->ntx, __ATOMIC_ACQUIRE);

		uint64_t now = ntx > 0 || (__atomic_load_n(&d->slot_active, __ATOMIC_RELAXED) & w->slots) ?
			rte_get_tsc_cycles() : 0;

		for (uint32_t i = 0; i < ntx; i++)
			ncd_dp_tx_channel(d, w, __atomic_load_n(&w->txch[i], __ATOMIC_ACQUIRE), now);
		/* Also with no transmitting channel left: what was resolved for a gone one is freed. */
		ncd_dp_tx_resolved(d, w);
		ncd_dp_serve_slot_rings(d, w, now);
		/* Once it has held a fragment: what waited too long is given up, and counted. */
		if (unlikely(w->frag_used))
			ncd_frag_expire(d, w, now != 0 ? now : rte_get_tsc_cycles());
		rte_rcu_qsbr_quiescent(d->qsbr, w->index);
		if (w->idle != NCD_IDLE_POLL)
			ncd_idle_loop(d, w);
	}
	rte_rcu_qsbr_thread_offline(d->qsbr, w->index);
	rte_rcu_qsbr_thread_unregister(d->qsbr, w->index);
	return 0;
}

/* Release, twice: a worker that sees ntx grow sees the entry, and the entry whole. */
static void
tx_list_add(struct ncd_worker *w, struct ncd_channel *ch)
{
	__atomic_store_n(&w->txch[w->ntx], ch, __ATOMIC_RELEASE);
	__atomic_store_n(&w->ntx, w->ntx + 1, __ATOMIC_RELEASE);
}

static void
tx_list_del(struct ncd_worker *w, const struct ncd_channel *ch)
{
	for (uint32_t i = 0; i < w->ntx; i++)
		if (w->txch[i] == ch) {
			/*
			 * The last entry moves into the hole, then the list shrinks. A worker
			 * between the two may see the moved channel twice in one pass: harmless,
			 * it is that ring's only consumer.
			 */
			__atomic_store_n(&w->txch[i], w->txch[w->ntx - 1], __ATOMIC_RELEASE);
			__atomic_store_n(&w->ntx, w->ntx - 1, __ATOMIC_RELEASE);
			return;
		}
}

/* A new channel's counters start at zero in every worker, whatever its id counted before. */
static void
channel_init(struct ncd *d, struct ncd_channel *ch)
{
	for (unsigned int w = 0; w < d->cfg.nworkers; w++)
		memset(&d->workers[w].cstats[ch->id], 0, sizeof(d->workers[w].cstats[ch->id]));
}

/* Its tx ring joins the list of the worker that empties it. */
static int
channel_added(struct ncd *d, struct ncd_channel *ch)
{
	if (ch->tx != NULL)
		tx_list_add(&d->workers[ch->tx_worker], ch);
	return 0;
}

static void
channel_leaving(struct ncd *d, struct ncd_channel *ch)
{
	if (ch->tx != NULL)
		tx_list_del(&d->workers[ch->tx_worker], ch);
}

const struct ncd_channel_hooks ncd_dp_channel_hooks = {
	.init = channel_init,
	.added = channel_added,
	.leaving = channel_leaving,
};
