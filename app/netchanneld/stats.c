/* SPDX-License-Identifier: BSD-3-Clause */
/* The counters, for people and for programs. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <rte_mempool.h>
#include <rte_ring.h>

#include "netchanneld.h"

void
ncd_stats_json(const struct ncd *d, FILE *f)
{
	fprintf(f, "{\"ports\": [");
	for (unsigned int i = 0; i < d->cfg.nports; i++) {
		struct ncd_port_stats s;
		const char *sep = "";

		ncd_port_stats_sum(d, i, &s);
		fprintf(f, "%s{\"name\": \"%s\"", i ? ", " : "", d->cfg.ports[i].name);
#define X(n) fprintf(f, ", \"" #n "\": %" PRIu64, s.n);
		PORT_FIELDS(X)
#undef X
		fprintf(f, ", \"reasons\": {");
		for (unsigned int v = 1; v < NCD_PKT_NVERDICTS; v++, sep = ", ")
			fprintf(f, "%s\"%s\": %" PRIu64, sep, ncd_verdict_names[v], s.verdict[v]);
		fprintf(f, "}, \"next_hop\": {\"ifindex\": %d, \"resolved\": %" PRIu64
			", \"no_route\": %" PRIu64 ", \"no_neigh\": %" PRIu64 "}}",
			d->ports[i].nh_ifindex, d->ports[i].nh_stats.resolved,
			d->ports[i].nh_stats.no_route, d->ports[i].nh_stats.no_neigh);
	}
	fprintf(f, "], \"channels\": [");
	for (unsigned int i = 0, first = 1; i < d->cfg.max_channels; i++) {
		const struct ncd_channel *ch = d->channels[i];
		struct ncd_chan_stats s;

		if (ch == NULL)
			continue;
		ncd_chan_stats_sum(d, i, &s);
		fprintf(f, "%s{\"name\": \"%s\", \"id\": %u, \"action\": \"%s\"", first ? "" : ", ",
			ch->name, ch->id, ch->action == NCD_ACTION_DROP ? "drop" :
			ch->action == NCD_ACTION_NAT ? "nat" : "deliver");
#define X(n) fprintf(f, ", \"" #n "\": %" PRIu64, s.n);
		CHAN_FIELDS(X)
#undef X
		fprintf(f, "}");
		first = 0;
	}
	fprintf(f, "], \"mempool\": {\"size\": %u, \"in_use\": %u, \"reclaimed\": %" PRIu64
		", \"cache_flushed\": %" PRIu64 "}, \"control\": {\"bad_messages\": %" PRIu64 "}"
		", \"nat\": {\"capacity\": %u, \"used\": %u, \"expired\": %" PRIu64 ", \"gone\": %"
		PRIu64 "}}\n",
		d->pool->size, rte_mempool_in_use_count(d->pool), d->mbufs_reclaimed, d->cache_flushed,
		ncd_control_bad_messages(), d->nat.capacity,
		__atomic_load_n(&d->nat.used, __ATOMIC_RELAXED), d->nat.expired, d->nat.gone);
}

void
ncd_channels_json(const struct ncd *d, FILE *f)
{
	char rule[256];
	int first = 1;

	fprintf(f, "[");
	for (unsigned int i = 0; i < d->cfg.max_channels; i++) {
		const struct ncd_channel *ch = d->channels[i];

		if (ch == NULL)
			continue;
		nc_trie_rule_format(&ch->rule, rule, sizeof(rule));
		fprintf(f, "%s{\"name\": \"%s\", \"id\": %u, \"action\": \"%s\", \"owner\": %s, "
			"\"rule\": \"%s\", \"ring_count\": %u, \"bytes_queued\": %" PRIu64 "}",
			first ? "" : ", ", ch->name, ch->id,
			ch->action == NCD_ACTION_DROP ? "drop" : "deliver",
			ch->owner == NCD_OWNER_CONFIG ? "\"config\"" :
			ch->owner == NCD_OWNER_OPERATOR ? "\"operator\"" : "\"client\"", rule,
			ch->rx ? rte_ring_count(ch->rx) : 0,
			nc_dir_bytes_queued(ch->dir));
		first = 0;
	}
	fprintf(f, "]\n");
}

int
ncd_stats_write_json(const struct ncd *d, const char *path)
{
	FILE *f = fopen(path, "w");
	int bad;

	if (f == NULL) {
		NCD_LOG(ERR, "fopen(%s): %s", path, strerror(errno));
		return -1;
	}
	ncd_stats_json(d, f);
	bad = ferror(f);
	bad |= fclose(f);
	if (bad)
		NCD_LOG(ERR, "write %s failed", path);
	return bad ? -1 : 0;
}

void
ncd_stats_print(const struct ncd *d, FILE *f)
{
	for (unsigned int i = 0; i < d->cfg.nports; i++) {
		struct ncd_port_stats s;

		ncd_port_stats_sum(d, i, &s);
		fprintf(f, "port %s:", d->cfg.ports[i].name);
#define X(n) if (s.n) fprintf(f, " " #n "=%" PRIu64, s.n);
		PORT_FIELDS(X)
#undef X
		for (unsigned int v = 1; v < NCD_PKT_NVERDICTS; v++)
			if (s.verdict[v])
				fprintf(f, " %s=%" PRIu64, ncd_verdict_names[v], s.verdict[v]);
		fputc('\n', f);
	}
	for (unsigned int i = 0; i < d->cfg.max_channels; i++) {
		struct ncd_chan_stats s;

		if (d->channels[i] == NULL)
			continue;
		ncd_chan_stats_sum(d, i, &s);
		fprintf(f, "channel %s:", d->channels[i]->name);
#define X(n) fprintf(f, " " #n "=%" PRIu64, s.n);
		CHAN_FIELDS(X)
#undef X
		fputc('\n', f);
	}
}
