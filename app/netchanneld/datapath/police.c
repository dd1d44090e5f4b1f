/* SPDX-License-Identifier: BSD-3-Clause */
/* The exception path's policer (see police.h; docs/config.md, exception.police). */
#include <errno.h>
#include <string.h>

#include <rte_malloc.h>
#include <rte_mbuf.h>

#include "core/log.h"
#include "core/stats.h"
#include "datapath/police.h"
#include "ncd.h"
#include "packet/parse.h"

/* The workers that poll a port's queues: its buckets' rates are shared among them. */
static unsigned int
port_workers(const struct ncd *d, unsigned int pi)
{
	unsigned int n = 0;

	for (unsigned int w = 0; w < d->cfg.nworkers; w++)
		for (unsigned int q = 0; q < d->cfg.workers[w].nrx; q++)
			if (d->cfg.workers[w].rx[q].port == pi) {
				n++;
				break;
			}
	return n > 0 ? n : 1;
}

static struct ncd_police *
police_new(const struct ncd *d, unsigned int pi)
{
	const struct ncd_police_conf *pcf = &d->cfg.ports[pi].police;
	unsigned int nw = d->cfg.nworkers, share = port_workers(d, pi);
	struct ncd_police *pc;
	int ret = 0;

	pc = rte_zmalloc("ncd_police", sizeof(*pc) + nw * sizeof(pc->w[0]), RTE_CACHE_LINE_SIZE);
	if (pc == NULL)
		return NULL;
	pc->nprotect = pcf->nprotect;
	pc->nbuckets = NCD_POLICE_PROTECT + pcf->nprotect;
	memcpy(pc->protect, pcf->protect, sizeof(pc->protect));
	for (unsigned int b = 0; ret == 0 && b < pc->nbuckets; b++) {
		/* One rate and one bucket: srTCM without an excess burst is never yellow. */
		pc->bytes[b] = pcf->b[b].bytes;
		ret = rte_meter_srtcm_profile_config(&pc->prof[b], &(struct rte_meter_srtcm_params){
			.cir = pcf->b[b].rate / share > 0 ? pcf->b[b].rate / share : 1,
			.cbs = pcf->b[b].burst, .ebs = 0 });
		for (unsigned int w = 0; ret == 0 && w < nw; w++)
			ret = rte_meter_srtcm_config(&pc->w[w].m[b], &pc->prof[b]);
		if (ret != 0)
			NCD_LOG(ERR, "port %s: exception.police.%s (rte_meter): %s",
				d->cfg.ports[pi].name, pcf->name[b], strerror(-ret));
	}
	if (ret != 0) {
		rte_free(pc);
		return NULL;
	}
	return pc;
}

int
ncd_police_init(struct ncd *d)
{
	for (unsigned int pi = 0; pi < d->cfg.nports; pi++) {
		if (!d->cfg.ports[pi].police.on)
			continue;
		d->police[pi] = police_new(d, pi);
		if (d->police[pi] == NULL)
			return -1;
	}
	return 0;
}

void
ncd_police_free(struct ncd *d)
{
	for (unsigned int pi = 0; pi < NCD_MAX_PORTS; pi++) {
		rte_free(d->police[pi]);
		d->police[pi] = NULL;
	}
}

/* The ethertype after up to two VLAN tags, or 0 when the frame is too short to say. */
static uint16_t
ethertype(const struct rte_mbuf *m)
{
	uint8_t buf[22];
	const uint8_t *f = rte_pktmbuf_read(m, 0, m->pkt_len < sizeof(buf) ? m->pkt_len :
					    sizeof(buf), buf);
	uint32_t len = m->pkt_len < sizeof(buf) ? m->pkt_len : sizeof(buf);
	uint32_t off = 12;

	for (int tags = 0; tags < 3 && off + 2 <= len; tags++, off += 4) {
		uint16_t t = ncd_rd16(f + off);

		if (t != 0x8100 && t != 0x88a8)
			return t;
	}
	return 0;
}

uint8_t
ncd_police_class_slow(const struct ncd_police *pc, const struct ncd_parsed *pp,
		      const struct rte_mbuf *m)
{
	if (pp == NULL)
		return ethertype(m) == 0x0806 ? NCD_POLICE_ARP : NCD_POLICE_OTHER;
	for (unsigned int j = 0; j < pc->nprotect; j++)
		if (nc_trie_rule_matches(&pc->protect[j], &pp->key))
			return (uint8_t)(NCD_POLICE_PROTECT + j);
	if (pp->key.proto == 1 && pp->key.family == NC_TRIE_AF_INET)
		return NCD_POLICE_ICMP;
	if (pp->key.proto == 58 && pp->key.family == NC_TRIE_AF_INET6) {
		uint8_t t;
		const uint8_t *tp = pp->frag == NCD_FRAG_LATER ? NULL :
				    rte_pktmbuf_read(m, pp->l4_off, 1, &t);

		/* Router and neighbour solicitations and advertisements, and redirects. */
		return tp != NULL && *tp >= 133 && *tp <= 137 ? NCD_POLICE_ND : NCD_POLICE_ICMP;
	}
	return NCD_POLICE_OTHER;
}

uint16_t
ncd_police_burst(struct ncd_police *pc, unsigned int w, struct ncd_port_stats *ps,
		 struct rte_mbuf **m, const uint8_t *cls, uint16_t n, uint64_t now)
{
	struct rte_meter_srtcm *st = pc->w[w].m;
	uint32_t cnt[NCD_POLICE_MAX] = { 0 }, units[NCD_POLICE_MAX] = { 0 };
	bool all[NCD_POLICE_MAX];
	uint16_t k = 0;

	bool one = true;

	/* A flood's burst is of one bucket: counted at once, not through memory a packet at a time. */
	for (uint16_t i = 1; i < n; i++)
		one &= cls[i] == cls[0];
	if (one && n > 0) {
		cnt[cls[0]] = n;
		units[cls[0]] = n;
		if (pc->bytes[cls[0]]) {
			units[cls[0]] = 0;
			for (uint16_t i = 0; i < n; i++)
				units[cls[0]] += m[i]->pkt_len;
		}
	} else {
		for (uint16_t i = 0; i < n; i++) {
			cnt[cls[i]]++;
			units[cls[i]] += pc->bytes[cls[i]] ? m[i]->pkt_len : 1;
		}
	}
	/*
	 * A bucket's share of the burst at once: green when its tokens cover all
	 * of them, which is what one packet at a time would find (a bucket
	 * without an excess burst has no yellow, and red takes nothing).
	 */
	bool every = true;

	for (unsigned int b = 0; b < pc->nbuckets; b++) {
		all[b] = cnt[b] == 0 ||
			 rte_meter_srtcm_color_blind_check(&st[b], &pc->prof[b], now, units[b]) ==
				 RTE_COLOR_GREEN;
		every &= all[b];
	}
	/* Under its rates, as the port mostly is: counted by bucket, and nothing moves. */
	if (every) {
		for (unsigned int b = 0; b < pc->nbuckets; b++)
			ps->police_pass[b] += cnt[b];
		return n;
	}
	for (uint16_t i = 0; i < n; i++) {
		uint8_t b = cls[i];

		if (all[b] || rte_meter_srtcm_color_blind_check(&st[b], &pc->prof[b], now,
				pc->bytes[b] ? m[i]->pkt_len : 1) == RTE_COLOR_GREEN) {
			ps->police_pass[b]++;
			m[k++] = m[i];
			continue;
		}
		ps->police_drop[b]++;
		ps->drop_exc_police++;
		rte_pktmbuf_free(m[i]);
	}
	return k;
}
