/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The views (views.h): every JSON the daemon writes is built here once, from
 * the daemon's state, and printed, sent or converted by its users. They run
 * on the control thread, or under ncd.lock (telemetry).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include <jansson.h>
#include <rte_ethdev.h>
#include <rte_mempool.h>
#include <rte_ring.h>
#include <rte_version.h>

#include "channel/channel.h"
#include "channel/region.h"
#include "control/control.h"
#include "control/rates.h"
#include "control/reload.h"
#include "control/views.h"
#include "core/stats.h"
#include "datapath/datapath.h"
#include "nat/nat.h"
#include "nc_build.h"
#include "nc_version.h"
#include "ncd.h"
#include "offload/offload.h"
#include "port/port.h"

#define U64(v) json_integer((json_int_t)(v))

static const char *
mac_str(const struct rte_ether_addr *a, char *buf)
{
	rte_ether_format_addr(buf, RTE_ETHER_ADDR_FMT_SIZE, a);
	return buf;
}

/*
 * Exception mode xdp: what the port's XDP program did with each packet
 * (bpf/ncd_xdp.h), and the keys channels claim there now.
 */
static json_t *
xdp_stats(const struct ncd_port *p)
{
	static const char *const names[NCD_XDP_STATS] = {
		[NCD_XDP_PASS] = "pass", [NCD_XDP_CLAIMED] = "claimed",
		[NCD_XDP_NO_SOCKET] = "no_socket", [NCD_XDP_FRAGMENT] = "fragment",
	};
	uint64_t v[NCD_XDP_STATS];
	int keys = ncd_xdp_claims_count(p->xdp_maps.claims_fd);
	json_t *o = json_object();

	json_object_set_new(o, "claimed_keys", json_integer(keys < 0 ? 0 : keys));
	if (ncd_xdp_stats_read(p->xdp_maps.stats_fd, v) == 0)
		for (unsigned int k = 0; k < NCD_XDP_STATS; k++)
			json_object_set_new(o, names[k], U64(v[k]));
	return o;
}

/*
 * A channel's meter as the config writes it (rates in its unit: packets, or
 * bits a second), its RFC, what red packets get, and each worker's share
 * (nworkers 0: a transmit meter, one bucket, whose red packets wait).
 */
static json_t *
view_meter(const struct ncd_meter_conf *mc, unsigned int nworkers)
{
	const uint64_t k = mc->bytes ? 8 : 1;
	json_t *o = json_object();

	json_object_set_new(o, "mode", json_string(mc->kind == NCD_METER_SRTCM ? "rfc2697" :
						   mc->kind == NCD_METER_TRTCM ? "rfc2698" :
						   "rfc4115"));
	json_object_set_new(o, mc->bytes ? "bps" : "pps", U64(mc->rate * k));
	json_object_set_new(o, mc->bytes ? "burst_bytes" : "burst", U64(mc->burst));
	if (mc->kind != NCD_METER_TRTCM)
		json_object_set_new(o, mc->bytes ? "excess_burst_bytes" : "excess_burst",
				    U64(mc->excess_burst));
	if (mc->kind == NCD_METER_TRTCM) {
		json_object_set_new(o, mc->bytes ? "peak_bps" : "peak_pps", U64(mc->peak_rate * k));
		json_object_set_new(o, mc->bytes ? "peak_burst_bytes" : "peak_burst",
				    U64(mc->peak_burst));
	}
	if (mc->kind == NCD_METER_RFC4115)
		json_object_set_new(o, "eir", U64(mc->peak_rate * k));
	if (nworkers == 0)
		return o;
	json_object_set_new(o, "exceed", json_string(mc->exceed_kernel ? "kernel" : "drop"));
	json_object_set_new(o, "workers", U64(nworkers));
	return o;
}

/* exception.police as the config writes it: each bucket's rate, and a protect entry's match. */
static json_t *
view_police(const struct ncd_police_conf *pc)
{
	json_t *o = json_object(), *prot = json_array();

	for (unsigned int b = 0; b < NCD_POLICE_PROTECT + pc->nprotect; b++) {
		const struct ncd_police_rate *r = &pc->b[b];
		json_t *x = json_object();

		json_object_set_new(x, r->bytes ? "bps" : "pps", U64(r->bytes ? r->rate * 8 : r->rate));
		json_object_set_new(x, r->bytes ? "burst_bytes" : "burst", U64(r->burst));
		if (b < NCD_POLICE_PROTECT) {
			json_object_set_new(o, pc->name[b], x);
			continue;
		}
		char rule[160];

		nc_trie_rule_format(&pc->protect[b - NCD_POLICE_PROTECT], rule, sizeof(rule));
		json_object_set_new(x, "name", json_string(pc->name[b]));
		json_object_set_new(x, "match", json_string(rule));
		json_array_append_new(prot, x);
	}
	json_object_set_new(o, "protect", prot);
	return o;
}

/* A port's policer's counters, by bucket name: {"passed": {...}, "dropped": {...}}. */
static void
police_stats(const struct ncd_police_conf *pc, const struct ncd_port_stats *s, json_t *o)
{
	json_t *pass = json_object(), *drop = json_object();

	for (unsigned int b = 0; b < NCD_POLICE_PROTECT + pc->nprotect; b++) {
		json_object_set_new(pass, pc->name[b], U64(s->police_pass[b]));
		json_object_set_new(drop, pc->name[b], U64(s->police_drop[b]));
	}
	json_object_set_new(o, "police_passed", pass);
	json_object_set_new(o, "police_dropped", drop);
}

json_t *
ncd_view_port_stats(const struct ncd *d, unsigned int pi)
{
	struct ncd_port_stats s;
	struct rte_eth_stats e;
	json_t *o = json_object(), *r = json_object(), *nic = json_object();

	ncd_port_stats_sum(d, pi, &s);
	json_object_set_new(o, "port", U64(pi));
	json_object_set_new(o, "name", json_string(d->cfg.ports[pi].name));
#define X(n) json_object_set_new(o, #n, U64(s.n));
	PORT_FIELDS(X)
#undef X
	for (unsigned int v = 1; v < NCD_PKT_NVERDICTS; v++)
		json_object_set_new(r, ncd_verdict_names[v], U64(s.verdict[v]));
	json_object_set_new(o, "reasons", r);
	if (d->cfg.ports[pi].police.on)
		police_stats(&d->cfg.ports[pi].police, &s, o);
	if (rte_eth_stats_get(d->ports[pi].port_id, &e) == 0) {
		json_object_set_new(nic, "ipackets", U64(e.ipackets));
		json_object_set_new(nic, "opackets", U64(e.opackets));
		json_object_set_new(nic, "ibytes", U64(e.ibytes));
		json_object_set_new(nic, "obytes", U64(e.obytes));
		json_object_set_new(nic, "imissed", U64(e.imissed));
		json_object_set_new(nic, "ierrors", U64(e.ierrors));
		json_object_set_new(nic, "oerrors", U64(e.oerrors));
		json_object_set_new(nic, "rx_nombuf", U64(e.rx_nombuf));
	}
	json_object_set_new(o, "nic", nic);
	json_object_set_new(o, "next_hop", json_pack("{s:i, s:I, s:I, s:I, s:I, s:I, s:I}",
						      "ifindex", d->ports[pi].nh_ifindex, "resolved",
						      (json_int_t)d->ports[pi].nh_stats.resolved,
						      "no_route", (json_int_t)d->ports[pi].nh_stats.no_route,
						      "no_neigh", (json_int_t)d->ports[pi].nh_stats.no_neigh,
						      "queued", (json_int_t)d->ports[pi].nh_stats.queued,
						      "queue_full",
						      (json_int_t)d->ports[pi].nh_stats.queue_full,
						      "failed", (json_int_t)d->ports[pi].nh_stats.failed));
	json_object_set_new(o, "link", json_pack("{s:b, s:I}", "up", d->ports[pi].link.up,
						 "changes", (json_int_t)d->ports[pi].link.changes));
	json_object_set_new(o, "exception", json_pack("{s:b, s:I, s:b, s:I}", "down",
						      d->ports[pi].exc_down, "remade",
						      (json_int_t)d->ports[pi].exc_remade,
						      "admin_down", d->ports[pi].exc_admin_down,
						      "admin_downs",
						      (json_int_t)d->ports[pi].exc_admin_downs));
	json_object_set_new(o, "rates", ncd_rates_port(pi));
	if (d->ports[pi].xdp)
		json_object_set_new(o, "xdp", xdp_stats(&d->ports[pi]));
	return o;
}

static const char *
offload_mode_name(const struct ncd_port_conf *pc)
{
	if (pc->bifurcated)
		return "required (exception mode bifurcated)";
	return pc->flow_offload == NCD_OFFLOAD_OFF ? "off" :
	       pc->flow_offload == NCD_OFFLOAD_REQUIRED ? "required" : "auto";
}

/* Per port: offloaded or not, how, and why not. */
static json_t *
view_offload(const struct ncd *d, const struct ncd_channel *ch)
{
	static const char *const state[] = { "off", "software", "mark", "mark+queue" };
	json_t *a = json_array();

	for (unsigned int pi = 0; pi < d->cfg.nports; pi++) {
		const struct ncd_chan_offload *o = &ch->off[pi];
		json_t *e = json_pack("{s:s, s:b, s:s}", "port", d->cfg.ports[pi].name, "offloaded",
				      o->state >= NCD_OFF_MARK, "state", state[o->state]);

		if (o->state >= NCD_OFF_MARK)
			json_object_set_new(e, "mark", U64(ch->mark[pi]));
		if (o->state < NCD_OFF_MARK && o->why[0] != '\0')
			json_object_set_new(e, "reason", json_string(o->why));
		if (ch->queue >= 0)
			json_object_set_new(e, "queue", json_integer(ch->queue));
		json_array_append_new(a, e);
	}
	return a;
}

json_t *
ncd_view_port_info(const struct ncd *d, unsigned int pi)
{
	const struct ncd_port *p = &d->ports[pi];
	const struct ncd_port_conf *pc = &d->cfg.ports[pi];
	struct rte_eth_dev_info info;
	struct rte_eth_link link;
	char mac[RTE_ETHER_ADDR_FMT_SIZE], status[64];
	json_t *o = json_object(), *w = json_array();

	json_object_set_new(o, "port", U64(pi));
	json_object_set_new(o, "name", json_string(pc->name));
	json_object_set_new(o, "device", json_string(pc->device));
	if (rte_eth_dev_info_get(p->port_id, &info) == 0)
		json_object_set_new(o, "driver", json_string(info.driver_name));
	json_object_set_new(o, "port_id", U64(p->port_id));
	json_object_set_new(o, "mac", json_string(mac_str(&p->mac, mac)));
	/* As the control thread last saw it (at most a second ago), the kernel's word included. */
	if (p->link.known && p->link.up && rte_eth_link_get_nowait(p->port_id, &link) == 0)
		snprintf(status, sizeof(status), "up, %u Mbps, %s duplex", p->link.speed,
			 link.link_duplex ? "full" : "half");
	else
		snprintf(status, sizeof(status), p->link.known ? "down" : "unknown");
	json_object_set_new(o, "link", json_string(status));
	json_object_set_new(o, "link_changes", U64(p->link.changes));
	json_object_set_new(o, "mtu", U64(pc->mtu));
	json_object_set_new(o, "rx_queues", U64(pc->rx_queues));
	for (unsigned int i = 0; i < d->cfg.nworkers; i++)
		for (unsigned int q = 0; q < d->workers[i].nrx; q++)
			if (d->workers[i].rx[q].port == pi)
				json_array_append_new(w, json_pack("{s:i, s:i}", "lcore",
								   (int)d->workers[i].lcore, "queue",
								   (int)d->workers[i].rx[q].queue));
	json_object_set_new(o, "workers", w);
	json_object_set_new(o, "exception", json_string(p->has_exc ? pc->exc_device : "none"));
	json_object_set_new(o, "exception_ifindex", json_integer(p->exc_ifindex));
	json_object_set_new(o, "exception_mode", json_string(pc->xdp ? "xdp" :
							      pc->bifurcated ? "bifurcated" : "tap"));
	if (pc->xdp)
		json_object_set_new(o, "xdp", json_pack("{s:s, s:s, s:i, s:b}", "program",
							pc->xdp_prog, "attach",
							p->xdp_generic ? "generic" : "native",
							"ifindex", p->xdp_ifindex, "took_over",
							p->xdp_took_over));
	if (pc->police.on)
		json_object_set_new(o, "police", view_police(&pc->police));
	json_object_set_new(o, "flow_offload", json_string(offload_mode_name(pc)));
	json_object_set_new(o, "marks", json_string(p->mock != NULL ? "mock" :
						    !p->marks ? "refused by the PMD" :
						    p->mark_negotiated == 1 ? "negotiated" :
						    "not negotiated (the PMD has no negotiation)"));
	json_object_set_new(o, "rte_flow", json_boolean(p->flow_api));
	json_object_set_new(o, "flow_rules", U64(p->flows));
	json_object_set_new(o, "flow_errors", U64(p->flow_errors));
	/* Whether NAT leaves IPv4 header checksums of what it sends here to the device. */
	json_object_set_new(o, "ip_csum_offload", json_boolean(p->ip_csum_offload));
	return o;
}

json_t *
ncd_view_port_xstats(const struct ncd *d, unsigned int pi)
{
	uint16_t id = d->ports[pi].port_id;
	int n = rte_eth_xstats_get_names(id, NULL, 0);
	json_t *o = json_object();
	struct rte_eth_xstat_name *names;
	struct rte_eth_xstat *vals;

	json_object_set_new(o, "port", U64(pi));
	json_object_set_new(o, "name", json_string(d->cfg.ports[pi].name));
	if (n <= 0)
		return o;
	names = calloc((size_t)n, sizeof(*names));
	vals = calloc((size_t)n, sizeof(*vals));
	if (names != NULL && vals != NULL && rte_eth_xstats_get_names(id, names, (unsigned int)n) == n &&
	    rte_eth_xstats_get(id, vals, (unsigned int)n) == n) {
		json_t *x = json_object();

		for (int i = 0; i < n; i++)
			json_object_set_new(x, names[vals[i].id].name, U64(vals[i].value));
		json_object_set_new(o, "xstats", x);
	}
	free(names);
	free(vals);
	return o;
}

/* A channel's counters, summed, into o. */
static void
chan_counters(json_t *o, const struct ncd_chan_stats *s)
{
#define X(n) json_object_set_new(o, #n, U64(s->n));
	CHAN_FIELDS(X)
#undef X
}

static const char *
action_name(enum nc_dir_action a)
{
	return a == NC_ACTION_DROP ? "drop" : a == NC_ACTION_NAT ? "nat" : "deliver";
}

static json_t *
view_nat(const struct ncd *d, const struct ncd_nat_conf *nc)
{
	json_t *o = json_object();
	char a[INET6_ADDRSTRLEN];
	int af = nc->family == NC_TRIE_AF_INET ? AF_INET : AF_INET6;

	if (nc->x.flags & NCD_NAT_DST)
		json_object_set_new(o, "dst", json_string(inet_ntop(af, nc->x.dst, a, sizeof(a))));
	if (nc->x.flags & NCD_NAT_DPORT)
		json_object_set_new(o, "dport", U64(nc->x.dport));
	if (nc->x.flags & NCD_NAT_SRC)
		json_object_set_new(o, "src", json_string(inet_ntop(af, nc->x.src, a, sizeof(a))));
	if (nc->x.flags & NCD_NAT_SPORT)
		json_object_set_new(o, "sport", U64(nc->x.sport));
	json_object_set_new(o, "port", nc->has_port ? json_string(d->cfg.ports[nc->port].name) :
			    json_string("in"));
	if (nc->has_via) {
		struct rte_ether_addr via;

		memcpy(via.addr_bytes, nc->via, sizeof(via.addr_bytes));
		json_object_set_new(o, "via", json_string(mac_str(&via, a)));
	}
	json_object_set_new(o, "reverse", json_boolean(nc->reverse));
	return o;
}

static const char *
owner_kind(const struct ncd_channel *ch)
{
	return ch->owner == NCD_OWNER_CONFIG ? "config" :
	       ch->owner == NCD_OWNER_OPERATOR ? "operator" : "client";
}

json_t *
ncd_view_channel(const struct ncd *d, uint32_t id)
{
	const struct ncd_channel *ch = d->channels[id];
	struct ncd_chan_stats s;
	char rule[256];
	json_t *o = json_object(), *c = json_object();

	nc_trie_rule_format(&ch->rule, rule, sizeof(rule));
	ncd_chan_stats_sum(d, id, &s);
	json_object_set_new(o, "id", U64(id));
	json_object_set_new(o, "name", json_string(ch->name));
	json_object_set_new(o, "rule", json_string(rule));
	json_object_set_new(o, "action", json_string(action_name(ch->action)));
	if (ch->owner >= 0) {
		pid_t pid;
		uid_t uid;

		ncd_client_cred(ch->owner, &pid, &uid);
		json_object_set_new(o, "owner", json_pack("{s:s, s:i, s:i}", "kind", "client", "pid",
							   (int)pid, "uid", (int)uid));
	} else {
		json_t *who = json_array();

		json_object_set_new(o, "owner", json_pack("{s:s}", "kind", owner_kind(ch)));
		/* Who may attach to it besides root. */
		for (unsigned int k = 0; k < ch->nattach; k++) {
			json_t *a = json_object();

			if (ch->attach[k].uid >= 0)
				json_object_set_new(a, "uid", json_integer(ch->attach[k].uid));
			if (ch->attach[k].gid >= 0)
				json_object_set_new(a, "gid", json_integer(ch->attach[k].gid));
			json_array_append_new(who, a);
		}
		json_object_set_new(o, "attach", who);
	}
	if (ch->region != NULL) {
		json_object_set_new(o, "ring_size", U64(ch->region_limit));
		json_object_set_new(o, "ring_count", U64(ncd_channel_rx_count(ch)));
		json_object_set_new(o, "region", json_true());
	} else if (ch->rx != NULL) {
		json_object_set_new(o, "ring_size", U64(ch->dir->ring_size));
		json_object_set_new(o, "ring_count", U64(rte_ring_count(ch->rx)));
		json_object_set_new(o, "queue_bytes", U64(ch->queue_bytes));
		json_object_set_new(o, "bytes_queued",
				    U64(nc_dir_bytes_queued(ch->dir)));
	}
	if (ch->action == NC_ACTION_NAT)
		json_object_set_new(o, "nat", view_nat(d, &ch->nat));
	if (ch->meter != NULL)
		json_object_set_new(o, "meter", view_meter(&ch->meter->conf, d->cfg.nworkers));
	if (ch->tx_meter != NULL)
		json_object_set_new(o, "tx_meter", view_meter(&ch->tx_meter->m[0]->conf, 0));
	/* A shared channel: how many consumers, each with its share of the flows and its ring. */
	if (ch->shared) {
		json_t *k = json_array();

		for (uint32_t i = 0; ch->share != NULL && i < ch->share->n; i++)
			json_array_append_new(k, json_pack("{s:I}", "ring_count",
				(json_int_t)ncd_region_rx_count(ch->share->c[i].rg,
								ch->share->c[i].ring)));
		json_object_set_new(o, "consumers", json_pack("{s:s, s:o}", "kind", "shared",
							       "attached", k));
	}
	json_object_set_new(o, "tx", json_boolean(ch->can_tx));
	if (ch->can_tx)
		json_object_set_new(o, "tx_port", json_string(d->cfg.ports[ch->port].name));
	if (ch->tx != NULL)
		json_object_set_new(o, "tx_count", U64(rte_ring_count(ch->tx)));
chan_counters(c, &s);
	json_object_set_new(o, "counters", c);
	json_object_set_new(o, "rates", ncd_rates_channel(d, id));
	json_object_set_new(o, "offload", view_offload(d, ch));
	return o;
}

json_t *
ncd_view_channels(const struct ncd *d, const struct ncd_conn *viewer)
{
	json_t *a = json_array();

	for (uint32_t i = 0; i < d->cfg.max_channels; i++)
		if (d->channels[i] != NULL && ncd_conn_sees(d, viewer, d->channels[i]))
			json_array_append_new(a, ncd_view_channel(d, i));
	return a;
}

json_t *
ncd_view_classifier(const struct ncd *d)
{
	struct nc_trie_stats s = { .size = sizeof(s) };

	static const char *const states[] = { "none", "building", "ready", "off" };

	if (nc_trie_get_stats(d->trie, &s) != 0)
		return json_object();
	/* snapshot: the rte_acl compiled in front of the trie (lib/trie/README.md). */
	return json_pack("{s:i, s:i, s:i, s:i, s:i, s:I, s:i, s:{s:s, s:i, s:i, s:i, s:i, s:i, "
			 "s:I, s:I, s:I, s:{s:s, s:s}}}", "rules", (int)s.rules,
			 "exact_rules", (int)s.exact_rules, "tuples", (int)s.tuples, "nodes",
			 (int)s.nodes, "deferred", (int)s.deferred, "bytes", (json_int_t)s.bytes,
			 "max_rules", (int)d->cfg.max_channels, "snapshot",
			 "state", s.snapshot_state < 4 ? states[s.snapshot_state] : "unknown",
			 "rules", (int)s.snapshot_rules, "delta_rules", (int)s.delta_rules,
			 "stale_rules", (int)s.stale_rules, "builds", (int)s.snapshot_builds,
			 "failures", (int)s.snapshot_failures, "build_us",
			 (json_int_t)s.snapshot_build_us, "bytes", (json_int_t)s.snapshot_bytes,
			 "build_total_us", (json_int_t)s.snapshot_build_total_us, "layout", "ipv4",
			 s.snapshot_layout[0], "ipv6", s.snapshot_layout[1]);
}

json_t *
ncd_view_mempool(const struct ncd *d)
{
	return json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:I, s:I}", "name", d->pool->name,
			 "socket", d->pool->socket_id, "size", (int)d->pool->size, "cache",
			 (int)d->pool->cache_size, "in_use", (int)rte_mempool_in_use_count(d->pool),
			 "available", (int)rte_mempool_avail_count(d->pool), "reclaimed",
			 (json_int_t)d->mbufs_reclaimed, "cache_flushed",
			 (json_int_t)d->cache_flushed);
}

/* A channel in brief: who and what, how full, and the counters an operator scans first. */
static json_t *
view_channel_brief(const struct ncd *d, const struct ncd_channel *ch)
{
	struct ncd_chan_stats st;
	char rule[256];

	nc_trie_rule_format(&ch->rule, rule, sizeof(rule));
	ncd_chan_stats_sum(d, ch->id, &st);
	return json_pack("{s:s, s:i, s:s, s:s, s:s, s:i, s:I, s:I, s:I, s:I}",
			 "name", ch->name, "id", (int)ch->id, "action", action_name(ch->action),
			 "owner", owner_kind(ch), "rule", rule,
			 "ring_count", (int)ncd_channel_rx_count(ch),
			 "bytes_queued", (json_int_t)nc_dir_bytes_queued(ch->dir),
			 "hits", (json_int_t)st.hits, "delivered", (json_int_t)st.delivered,
			 "drops", (json_int_t)ncd_chan_drops(&st));
}

json_t *
ncd_view_channel_list(const struct ncd *d, const struct ncd_conn *viewer)
{
	json_t *a = json_array();

	for (uint32_t i = 0; i < d->cfg.max_channels; i++) {
		const struct ncd_channel *ch = d->channels[i];

		if (ch != NULL && ncd_conn_sees(d, viewer, ch))
			json_array_append_new(a, view_channel_brief(d, ch));
	}
	return a;
}

json_t *
ncd_view_channel_page(const struct ncd *d, const struct ncd_conn *viewer, uint32_t from,
		      bool brief, size_t budget, int64_t *next)
{
	json_t *a = json_array();
	size_t used = 0;

	*next = -1;
	for (uint32_t i = from; i < d->cfg.max_channels; i++) {
		const struct ncd_channel *ch = d->channels[i];
		json_t *o;
		size_t n;

		if (ch == NULL || !ncd_conn_sees(d, viewer, ch))
			continue;
		o = brief ? view_channel_brief(d, ch) : ncd_view_channel(d, i);
		n = json_dumpb(o, NULL, 0, JSON_COMPACT);
		/* At least one a page, so that every page moves on. */
		if (used > 0 && used + n > budget) {
			json_decref(o);
			*next = i;
			break;
		}
		used += n;
		json_array_append_new(a, o);
	}
	return a;
}

json_t *
ncd_view_workers(const struct ncd *d)
{
	json_t *a = json_array();

	for (unsigned int i = 0; i < d->cfg.nworkers; i++) {
		const struct ncd_worker *w = &d->workers[i];
		json_t *q = json_array();

		for (unsigned int k = 0; k < w->nrx; k++)
			json_array_append_new(q, json_pack("{s:s, s:i}", "port",
							   d->cfg.ports[w->rx[k].port].name, "queue",
							   (int)w->rx[k].queue));
		json_array_append_new(a, json_pack("{s:i, s:i, s:s, s:o, s:I, s:I, s:I, s:I, s:I, s:f, "
						   "s:o}", "worker", (int)i, "lcore", (int)w->lcore,
						   "idle", ncd_idle_name(d->cfg.workers[i].idle),
						   "rx", q, "loops",
						   (json_int_t)__atomic_load_n(&w->loops, __ATOMIC_RELAXED),
						   "busy_loops", (json_int_t)__atomic_load_n(&w->busy_loops,
											 __ATOMIC_RELAXED),
						   "packets", (json_int_t)__atomic_load_n(&w->packets,
										      __ATOMIC_RELAXED),
						   "sleeps", (json_int_t)__atomic_load_n(&w->sleeps,
										     __ATOMIC_RELAXED),
						   "wakeups", (json_int_t)__atomic_load_n(&w->wakeups,
										      __ATOMIC_RELAXED),
						   "asleep_seconds",
						   (double)__atomic_load_n(&w->slept_ns, __ATOMIC_RELAXED) /
						   1e9,
						   "rates", ncd_rates_worker(i)));
	}
	return a;
}

json_t *
ncd_view_version(void)
{
	char build[NC_BUILD_SIZE];

	/* build: what a zero-copy client's HELLO must name (nc_build.h). */
	nc_build_zc(build, sizeof(build));
	return json_pack("{s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:s}", "netchanneld",
			 NC_PROJECT_VERSION, "git", NC_GIT_DESCRIBE, "dpdk", rte_version(),
			 "control_protocol", NC_CONTROL_PROTOCOL_VERSION, "control_protocol_min",
			 NC_CONTROL_PROTOCOL_MIN, "region", NC_REGION_LAYOUT_VERSION,
			 "shared_memory", NC_SHM_LAYOUT_VERSION, "build", build);
}

json_t *
ncd_view_stats(const struct ncd *d, const struct ncd_conn *viewer)
{
	json_t *o = json_object(), *ports = json_array(), *chans = json_array();

	for (unsigned int i = 0; i < d->cfg.nports; i++)
		json_array_append_new(ports, ncd_view_port_stats(d, i));
	for (uint32_t i = 0; i < d->cfg.max_channels; i++) {
		const struct ncd_channel *ch = d->channels[i];
		struct ncd_chan_stats s;
		json_t *c;

		if (ch == NULL || !ncd_conn_sees(d, viewer, ch))
			continue;
		ncd_chan_stats_sum(d, i, &s);
		c = json_pack("{s:s, s:i, s:s}", "name", ch->name, "id", (int)ch->id, "action",
			      action_name(ch->action));
		chan_counters(c, &s);
		json_array_append_new(chans, c);
	}
	json_object_set_new(o, "ports", ports);
	json_object_set_new(o, "channels", chans);
	json_object_set_new(o, "mempool", ncd_view_mempool(d));
	json_object_set_new(o, "control", ncd_view_control());
	json_object_set_new(o, "nat", ncd_view_nat(d));
	json_object_set_new(o, "reload", ncd_view_reload());
	return o;
}

int
ncd_stats_write_json(const struct ncd *d, const char *path)
{
	json_t *v = ncd_view_stats(d, NULL);
	int ret = json_dump_file(v, path, 0);

	json_decref(v);
	if (ret != 0)
		NCD_LOG(ERR, "writing the counters to %s failed", path);
	return ret != 0 ? -1 : 0;
}

static int
serve_channel_list(struct ncd *d, struct ncd_conn *c, const struct nc_ctl_req *req,
		   const void *body, uint32_t len)
{
	(void)body;
	(void)len;
	return ncd_ctl_reply_json(c, req, ncd_view_channel_list(d, c));
}

static int
serve_stats(struct ncd *d, struct ncd_conn *c, const struct nc_ctl_req *req, const void *body,
	    uint32_t len)
{
	(void)body;
	(void)len;
	return ncd_ctl_reply_json(c, req, ncd_view_stats(d, c));
}

int
ncd_views_register(void)
{
	int ret = ncd_control_register(NC_CTL_CHANNEL_LIST, serve_channel_list);

	return ret != 0 ? ret : ncd_control_register(NC_CTL_STATS, serve_stats);
}
