/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Clients' transmit path: what a client puts on its channel's tx ring is
 * checked (its own flows only), addressed and sent; and the client slots'
 * free and alloc rings, or their regions, served.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include "channel/channel.h"
#include "channel/region.h"
#include "datapath/capture.h"
#include "datapath/datapath.h"
#include "datapath/dp.h"
#include "datapath/frag.h"
#include "datapath/region.h"
#include "ncd.h"
#include "nexthop/nexthop.h"
#include "packet/parse.h"
#include "port/port.h"

/* A packet a client may not send: counted by reason, and in tx_spoofed. */
#define SPOOFED(cs, reason) ((cs)->tx_spoofed++, (cs)->reason++)

/*
 * A client's packets (the daemon's mbufs now), out of its channel's port. A frame goes as it is; an
 * IP packet gets the port's Ethernet header, addressed to the next hop the
 * kernel's tables give (cached; a miss goes to the control thread, which
 * puts the packet back on the ring once resolved). Either must come from the
 * channel's own flows, or it is dropped as spoofed: a frame from the port's
 * own MAC and with no VLAN tag; its reversed 5-tuple matching the channel's
 * rule (without the rule's source side): the channel's protocol, a source
 * port among its destination ports, a source address in its destination
 * prefix; and, whatever the prefix (a rule for 0.0.0.0/1 spans most of the
 * Internet), from one of the host's addresses on the port, as netlink last
 * gave them: else a user allowed port 7 could send as anyone, the peer too.
 * Nor may it ask to be source-routed, or be longer than the port's MTU
 * (the NIC would drop it uncounted).
 */
void
ncd_dp_tx_send(struct ncd *d, struct ncd_worker *w, const struct ncd_channel *ch,
	       struct rte_mbuf **m, uint16_t n, uint64_t now)
{
	const struct ncd_port *p = &d->ports[ch->port];
	const uint32_t mtu = d->cfg.ports[ch->port].mtu;
	struct ncd_chan_stats *cs = &w->cstats[ch->id];
	struct ncd_port_stats *ps = &w->pstats[ch->port];
	struct rte_mbuf *out[NCD_BURST], *bad[NCD_BURST], *res[NCD_BURST];
	uint32_t len[NCD_BURST];
	uint16_t nout = 0, nbad = 0, nres = 0, sent;
	uint8_t buf[NCD_PARSE_BYTES];

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
		} else if (x->data_len >= sizeof(*eh)) {
			eh = rte_pktmbuf_mtod(x, struct rte_ether_hdr *);
			if (!rte_is_same_ether_addr(&eh->src_addr, &p->mac)) {
				SPOOFED(cs, tx_spoofed_mac);
				bad[nbad++] = x;
				continue;
			}
			if (eh->ether_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_VLAN) ||
			    eh->ether_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_QINQ)) {
				SPOOFED(cs, tx_spoofed_vlan);
				bad[nbad++] = x;
				continue;
			}
		}
		want = x->pkt_len < NCD_PARSE_BYTES ? x->pkt_len : NCD_PARSE_BYTES;
		f = rte_pktmbuf_read(x, 0, want, buf);
		v = ncd_parse(f, want, x->pkt_len, NULL,
			      x->ol_flags & RTE_MBUF_F_TX_IP_CKSUM ? NCD_PARSE_CSUM_GOOD : 0, &pp);
		if (v != NCD_PKT_OK) {
			if (v == NCD_PKT_NOT_IP)
				SPOOFED(cs, tx_spoofed_not_ip);
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
			SPOOFED(cs, tx_spoofed_flow);
			bad[nbad++] = x;
			continue;
		}
		if (!ncd_host_addr(p, &pp.key)) {
			SPOOFED(cs, tx_spoofed_addr);
			bad[nbad++] = x;
			continue;
		}
		if (pp.l3_len > mtu) {
			cs->tx_too_big++;
			bad[nbad++] = x;
			continue;
		}
		if (pp.source_route) {
			cs->tx_source_route++;
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
	struct ncd_capture *cap = __atomic_load_n(&ch->capture, __ATOMIC_ACQUIRE);

	if (unlikely(cap != NULL) && nout > 0)
		ncd_capture_take(cap, p->port_id, w->txq[ch->port], out, nout, 1);
	sent = nout ? rte_eth_tx_burst(p->port_id, w->txq[ch->port], out, nout) : 0;
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
 * A zero-copy client's channel under a transmit meter (its own, its user's):
 * what the meters pass, taken off the ring; the first they do not, and what
 * follows it, stay there (the ring is single-consumer: peeked, then only
 * that much taken).
 */
static uint16_t
tx_dequeue_metered(struct ncd_worker *w, const struct ncd_channel *ch,
		   struct ncd_txm *ut, struct rte_mbuf **m, uint64_t now)
{
	struct ncd_chan_stats *cs = &w->cstats[ch->id];
	uint16_t n = (uint16_t)rte_ring_dequeue_burst_start(ch->tx, (void **)m, NCD_BURST, NULL);
	uint16_t i;

	for (i = 0; i < n; i++) {
		bool ip = !(m[i]->packet_type & RTE_PTYPE_L2_MASK);
		enum rte_color c;

		if (!ncd_txm_pass(ch->tx_meter, ut, m[i]->pkt_len + (ip ? RTE_ETHER_HDR_LEN : 0),
				  now, &c)) {
			cs->tx_held++;
			break;
		}
		cs->tx_meter_green += c == RTE_COLOR_GREEN;
		cs->tx_meter_yellow += c == RTE_COLOR_YELLOW;
	}
	rte_ring_dequeue_finish(ch->tx, i);
	return i;
}

void
ncd_dp_tx_channel(struct ncd *d, struct ncd_worker *w, const struct ncd_channel *ch, uint64_t now)
{
	/* Its client's slot: the creator's, or a static channel's one attached consumer's. */
	int slot = ch->owner >= 0 ? ch->owner : ch->consumer - 1;
	struct ncd_txm *ut = slot >= 0 ? d->slot_txm[slot] : NULL;
	struct rte_mbuf *m[NCD_BURST];
	uint16_t n = unlikely(ut != NULL || ch->tx_meter != NULL) ?
		tx_dequeue_metered(w, ch, ut, m, now) :
		(uint16_t)rte_ring_sc_dequeue_burst(ch->tx, (void **)m, NCD_BURST, NULL);

	/* The client's until now (it transmits them marked): the daemon's from here on. */
	for (uint16_t i = 0; i < n; i++)
		ncd_unmark(d, m[i]);
	if (n > 0)
		ncd_dp_tx_send(d, w, ch, m, n, now);
}

/*
 * IP packets whose next hop the control thread resolved: checked before they
 * left, and now addressed. The generation in hash.fdir.hi says whether their
 * channel is still the one that sent them (its id may have a new owner).
 */
void
ncd_dp_tx_resolved(struct ncd *d, struct ncd_worker *w)
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

			uint32_t mtu = d->cfg.ports[op].mtu;
			int ret = -ENODEV;

			/* What NAT sends is the wire's size: a reassembled datagram goes in pieces. */
			if (alive && w->txq[op] != NCD_NO_TXQ) {
				if (ncd_frag_must_split(m[i], mtu)) {
					ret = ncd_frag_send(d, d->ports[op].port_id, w->txq[op], mtu,
							    ps, m[i]);
					m[i] = NULL;   /* ncd_frag_send() freed it */
				} else if (rte_eth_tx_burst(d->ports[op].port_id, w->txq[op], &m[i],
							    1) == 1) {
					ret = 0;
				}
			}
			if (ret == 0) {
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
		if (!alive || !ch->can_tx) {
			rte_pktmbuf_free(m[i]);
			continue;
		}
		struct ncd_capture *cap = __atomic_load_n(&ch->capture, __ATOMIC_ACQUIRE);

		if (unlikely(cap != NULL))
			ncd_capture_take(cap, d->ports[ch->port].port_id, w->txq[ch->port], &m[i], 1, 1);
		if (rte_eth_tx_burst(d->ports[ch->port].port_id, w->txq[ch->port], &m[i], 1) == 1) {
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
void
ncd_dp_serve_slot_rings(struct ncd *d, struct ncd_worker *w, uint64_t now)
{
	uint64_t act = __atomic_load_n(&d->slot_active, __ATOMIC_ACQUIRE) & w->slots;

	while (act != 0) {
		unsigned int slot = (unsigned int)__builtin_ctzll(act);
		struct ncd_region *rg = __atomic_load_n(&d->regions[slot], __ATOMIC_ACQUIRE);

		act &= act - 1;
		if (rg != NULL) {
			ncd_region_serve(d, w, rg, now);
			continue;
		}
		if (ncd_ring_free_burst(d, d->free_rings[slot]) == NCD_BURST)
			ncd_ring_free_burst(d, d->free_rings[slot]);
		fill_alloc_ring(d, slot);
	}
}

