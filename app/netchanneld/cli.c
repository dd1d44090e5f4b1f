/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The CLI's commands (the table is cli_table.c). Each command builds a JSON
 * value: printed as is for --json, rendered as indented "key: value" lines
 * for people, and converted for DPDK telemetry, so the three never disagree.
 * Everything here runs on the control thread, or under ncd.lock.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include <jansson.h>
#include <rte_ethdev.h>
#include <rte_log.h>
#include <rte_mempool.h>
#include <rte_ring.h>

#include "cli_table.h"
#define NCD_LOGTYPE ncd_logtype_control
#include "netchanneld.h"

#define U64(v) json_integer((json_int_t)(v))

static const char *
mac_str(const struct rte_ether_addr *a, char *buf)
{
	rte_ether_format_addr(buf, RTE_ETHER_ADDR_FMT_SIZE, a);
	return buf;
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
	json_object_set_new(o, "next_hop", json_pack("{s:i, s:I, s:I, s:I}", "ifindex",
						      d->ports[pi].nh_ifindex, "resolved",
						      (json_int_t)d->ports[pi].nh_stats.resolved,
						      "no_route", (json_int_t)d->ports[pi].nh_stats.no_route,
						      "no_neigh", (json_int_t)d->ports[pi].nh_stats.no_neigh));
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
	if (rte_eth_link_get_nowait(p->port_id, &link) == 0) {
		if (link.link_status)
			snprintf(status, sizeof(status), "up, %u Mbps, %s duplex", link.link_speed,
				 link.link_duplex ? "full" : "half");
		else
			snprintf(status, sizeof(status), "down");
		json_object_set_new(o, "link", json_string(status));
	}
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
	json_object_set_new(o, "exception_ifindex", json_integer(p->nh_ifindex));
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

static const char *
action_name(enum ncd_action a)
{
	return a == NCD_ACTION_DROP ? "drop" : a == NCD_ACTION_NAT ? "nat" : "deliver";
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
		const uint8_t *m = nc->via;

		snprintf(a, sizeof(a), "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3],
			 m[4], m[5]);
		json_object_set_new(o, "via", json_string(a));
	}
	json_object_set_new(o, "reverse", json_boolean(nc->reverse));
	return o;
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
		json_object_set_new(o, "owner", json_pack("{s:s}", "kind",
							   ch->owner == NCD_OWNER_CONFIG ? "config" :
							   "operator"));
	}
	if (ch->rx != NULL) {
		json_object_set_new(o, "ring_size", U64(ch->dir->ring_size));
		json_object_set_new(o, "ring_count", U64(rte_ring_count(ch->rx)));
		json_object_set_new(o, "queue_bytes", U64(ch->queue_bytes));
		json_object_set_new(o, "bytes_queued",
				    U64(nc_dir_bytes_queued(ch->dir)));
	}
	if (ch->action == NCD_ACTION_NAT)
		json_object_set_new(o, "nat", view_nat(d, &ch->nat));
	json_object_set_new(o, "tx", json_boolean(ch->tx != NULL));
	if (ch->tx != NULL) {
		json_object_set_new(o, "tx_port", json_string(d->cfg.ports[ch->port].name));
		json_object_set_new(o, "tx_count", U64(rte_ring_count(ch->tx)));
	}
#define X(n) json_object_set_new(c, #n, U64(s.n));
	CHAN_FIELDS(X)
#undef X
	json_object_set_new(o, "counters", c);
	json_object_set_new(o, "offload", view_offload(d, ch));
	return o;
}

json_t *
ncd_view_channels(const struct ncd *d)
{
	json_t *a = json_array();

	for (uint32_t i = 0; i < d->cfg.max_channels; i++)
		if (d->channels[i] != NULL)
			json_array_append_new(a, ncd_view_channel(d, i));
	return a;
}

json_t *
ncd_view_classifier(const struct ncd *d)
{
	struct nc_trie_stats s;

	if (nc_trie_get_stats(d->trie, &s) != 0)
		return json_object();
	return json_pack("{s:i, s:i, s:i, s:i, s:i, s:I, s:i}", "rules", (int)s.rules,
			 "exact_rules", (int)s.exact_rules, "tuples", (int)s.tuples, "nodes",
			 (int)s.nodes, "deferred", (int)s.deferred, "bytes", (json_int_t)s.bytes,
			 "max_rules", (int)d->cfg.max_channels);
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

/* ---- text for people ---------------------------------------------------- */

static void
render(FILE *f, const json_t *v, int indent)
{
	const char *k;
	json_t *x;
	size_t i;

	switch (json_typeof(v)) {
	case JSON_OBJECT:
		json_object_foreach((json_t *)v, k, x) {
			fprintf(f, "%*s%s:", indent, "", k);
			if (json_is_object(x) || json_is_array(x)) {
				if (json_is_array(x) && json_array_size(x) == 0) {
					fprintf(f, " none\n");
					continue;
				}
				fputc('\n', f);
				render(f, x, indent + 2);
			} else {
				fputc(' ', f);
				render(f, x, 0);
			}
		}
		break;
	case JSON_ARRAY:
		json_array_foreach(v, i, x) {
			if (json_is_object(x)) {
				render(f, x, indent);
				if (i + 1 < json_array_size(v))
					fputc('\n', f);
			} else {
				fprintf(f, "%*s- ", indent, "");
				render(f, x, 0);
			}
		}
		break;
	case JSON_STRING:
		fprintf(f, "%s\n", json_string_value(v));
		break;
	case JSON_INTEGER:
		fprintf(f, "%" JSON_INTEGER_FORMAT "\n", json_integer_value(v));
		break;
	case JSON_TRUE:
		fprintf(f, "yes\n");
		break;
	case JSON_FALSE:
		fprintf(f, "no\n");
		break;
	default:
		fprintf(f, "-\n");
	}
}

/* ---- the commands ------------------------------------------------------ */

struct cmd_ctx {
	struct ncd *d;
	bool priv;
	FILE *out;
	char err[256];
};

static int __attribute__((format(printf, 3, 4)))
fail(struct cmd_ctx *x, int status, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(x->err, sizeof(x->err), fmt, ap);
	va_end(ap);
	return status;
}

/* <port>: an index, a name, or all. Returns how many go to out[]. */
static int
ports_of(struct cmd_ctx *x, const char *arg, unsigned int *out)
{
	char *end;
	unsigned long v;
	unsigned int n = 0;

	for (unsigned int i = 0; i < x->d->cfg.nports; i++)
		if (strcmp(arg, "all") == 0 || strcmp(arg, x->d->cfg.ports[i].name) == 0)
			out[n++] = i;
	if (n > 0)
		return (int)n;
	v = strtoul(arg, &end, 10);
	if (*arg != '\0' && *end == '\0' && v < x->d->cfg.nports) {
		out[0] = (unsigned int)v;
		return 1;
	}
	return fail(x, -ENODEV, "no port '%s' (ports: 0..%u, by name, or all)", arg,
		    x->d->cfg.nports - 1);
}

/* <channel>: an id or a name (or all, where allowed). -1 for all. */
static int
channel_of(struct cmd_ctx *x, const char *arg, bool all_ok, int32_t *id)
{
	char *end;
	unsigned long v;

	if (all_ok && strcmp(arg, "all") == 0) {
		*id = -1;
		return 0;
	}
	*id = ncd_channel_find(x->d, arg);
	if (*id >= 0)
		return 0;
	v = strtoul(arg, &end, 10);
	if (*arg != '\0' && *end == '\0' && v < x->d->cfg.max_channels && x->d->channels[v] != NULL) {
		*id = (int32_t)v;
		return 0;
	}
	return fail(x, -ENOENT, "no channel '%s'", arg);
}

static int
cmd_show_port(struct cmd_ctx *x, char **argv, json_t **res)
{
	unsigned int ps[NCD_MAX_PORTS];
	int n = ports_of(x, argv[3], ps);

	if (n < 0)
		return n;
	*res = json_array();
	for (int i = 0; i < n; i++)
		json_array_append_new(*res, strcmp(argv[2], "info") == 0 ? ncd_view_port_info(x->d, ps[i]) :
					    strcmp(argv[2], "stats") == 0 ? ncd_view_port_stats(x->d, ps[i]) :
					    ncd_view_port_xstats(x->d, ps[i]));
	return 0;
}

static int
cmd_clear_port(struct cmd_ctx *x, char **argv, json_t **res)
{
	unsigned int ps[NCD_MAX_PORTS];
	int n = ports_of(x, argv[3], ps);

	if (n < 0)
		return n;
	*res = json_array();
	for (int i = 0; i < n; i++) {
		ncd_port_stats_clear(x->d, ps[i]);
		json_array_append_new(*res, json_string(x->d->cfg.ports[ps[i]].name));
	}
	return 0;
}

static int
cmd_show_channel(struct cmd_ctx *x, char **argv, json_t **res)
{
	int32_t id;
	int ret = channel_of(x, argv[2], true, &id);

	if (ret != 0)
		return ret;
	*res = id < 0 ? ncd_view_channels(x->d) : ncd_view_channel(x->d, (uint32_t)id);
	return 0;
}

/* One word (and its value) of "action nat ...": what the translation writes. */
static int
nat_option(struct cmd_ctx *x, struct ncd_nat_conf *nc, char **argv, int argc, int *i)
{
	const char *k = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
	union nc_trie_addr a;
	uint8_t len, fam;
	char err[128], *end;

	if (strcmp(k, "reverse") == 0) {
		nc->reverse = true;
		return 0;
	}
	if (v == NULL)
		return fail(x, -EINVAL, "nat %s: a value is missing", k);
	(*i)++;
	if (strcmp(k, "dst") == 0 || strcmp(k, "src") == 0) {
		bool dst = k[0] == 'd';

		if (ncd_parse_prefix(v, &a, &len, &fam, err, sizeof(err)) != 0 || fam == 0 ||
		    len != (fam == NC_TRIE_AF_INET ? 32 : 128))
			return fail(x, -EINVAL, "nat %s: '%s' is not one IPv4 or IPv6 address", k, v);
		if (nc->family != 0 && nc->family != fam)
			return fail(x, -EINVAL, "nat: dst and src are of different families");
		nc->family = fam;
		memcpy(dst ? nc->x.dst : nc->x.src, a.a, 16);
		nc->x.flags |= dst ? NCD_NAT_DST : NCD_NAT_SRC;
	} else if (strcmp(k, "dport") == 0 || strcmp(k, "sport") == 0) {
		unsigned long n = strtoul(v, &end, 10);

		if (*v == '\0' || *end != '\0' || n < 1 || n > 65535)
			return fail(x, -EINVAL, "nat %s: '%s' is not a port (1..65535)", k, v);
		if (k[0] == 'd') {
			nc->x.dport = (uint16_t)n;
			nc->x.flags |= NCD_NAT_DPORT;
		} else {
			nc->x.sport = (uint16_t)n;
			nc->x.flags |= NCD_NAT_SPORT;
		}
	} else if (strcmp(k, "port") == 0) {
		unsigned int ps[NCD_MAX_PORTS];
		int n = ports_of(x, v, ps);

		if (n != 1)
			return n < 0 ? n : fail(x, -EINVAL, "nat port: one port, not all");
		nc->has_port = true;
		nc->port = (uint16_t)ps[0];
	} else if (strcmp(k, "via") == 0) {
		if (ncd_parse_mac(v, nc->via) != 0)
			return fail(x, -EINVAL, "nat via: '%s' is not a MAC address", v);
		nc->has_via = true;
	} else {
		return fail(x, -EINVAL, "unknown nat option '%s' (dst, dport, src, sport, port, via, "
			    "reverse)", k);
	}
	return 0;
}

/* channel create NAME [key value | tx]...: the config's words, on one line. */
static int
cmd_channel_create(struct cmd_ctx *x, char **argv, int argc, json_t **res)
{
	struct ncd_channel_conf cc;
	char err[128];
	int id;

	memset(&cc, 0, sizeof(cc));
	if (!ncd_valid_name(argv[2], sizeof(cc.name), true))
		return fail(x, -EINVAL, "'%s': a name is 1-31 letters, digits, '_', '-' or '.'", argv[2]);
	snprintf(cc.name, sizeof(cc.name), "%s", argv[2]);
	cc.action = NCD_ACTION_DELIVER;
	cc.ring_size = 1024;
	cc.queue_bytes = 1 << 20;
	for (int i = 3; i < argc; i++) {
		const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		uint8_t fam = 0;
		char *end;

		if (cc.action == NCD_ACTION_NAT) {
			/* After "action nat", the words say what it writes. */
			int r = nat_option(x, &cc.nat, argv, argc, &i);

			if (r != 0)
				return r;
			continue;
		}
		if (strcmp(k, "tx") == 0) {
			cc.tx = true;
			continue;
		}
		if (v == NULL)
			return fail(x, -EINVAL, "%s: a value is missing", k);
		i++;
		if (strcmp(k, "proto") == 0) {
			if (ncd_parse_proto(v, &cc.rule.proto, &cc.rule.proto_mask, err, sizeof(err)))
				return fail(x, -EINVAL, "proto: %s", err);
		} else if (strcmp(k, "dst") == 0 || strcmp(k, "src") == 0) {
			bool dst = k[0] == 'd';

			if (ncd_parse_prefix(v, dst ? &cc.rule.dst : &cc.rule.src,
					     dst ? &cc.rule.dst_len : &cc.rule.src_len, &fam, err,
					     sizeof(err)))
				return fail(x, -EINVAL, "%s: %s", k, err);
			if (fam != 0 && cc.rule.family != 0 && fam != cc.rule.family)
				return fail(x, -EINVAL, "src and dst are of different families");
			if (fam != 0)
				cc.rule.family = fam;
		} else if (strcmp(k, "dport") == 0 || strcmp(k, "sport") == 0) {
			if (ncd_parse_port(v, k[0] == 'd' ? &cc.rule.dport : &cc.rule.sport, err,
					   sizeof(err)))
				return fail(x, -EINVAL, "%s: %s", k, err);
		} else if (strcmp(k, "priority") == 0 || strcmp(k, "ring_size") == 0 ||
			   strcmp(k, "queue_bytes") == 0) {
			unsigned long long n = strtoull(v, &end, 0);
			bool prio = k[0] == 'p', ring = k[0] == 'r';
			unsigned long long lo = prio ? 0 : ring ? 1 : 4096;
			unsigned long long hi = prio ? NC_TRIE_PRIO_MAX : ring ? 1u << 20 : 1ull << 31;

			if (*v == '\0' || *end != '\0' || n < lo || n > hi)
				return fail(x, -EINVAL, "%s: '%s' is not a number in %llu..%llu", k, v,
					    lo, hi);
			if (prio)
				cc.rule.priority = (uint32_t)n;
			else if (ring)
				cc.ring_size = (uint32_t)n;
			else
				cc.queue_bytes = n;
		} else if (strcmp(k, "queue") == 0) {
			unsigned long n = strtoul(v, &end, 10);

			if (*v == '\0' || *end != '\0' || n >= NCD_MAX_QUEUES)
				return fail(x, -EINVAL, "queue: '%s' is not an rx queue (0..%d)", v,
					    NCD_MAX_QUEUES - 1);
			cc.steer = true;
			cc.queue = (uint16_t)n;
		} else if (strcmp(k, "action") == 0) {
			if (strcmp(v, "drop") == 0)
				cc.action = NCD_ACTION_DROP;
			else if (strcmp(v, "nat") == 0)
				cc.action = NCD_ACTION_NAT;
			else if (strcmp(v, "deliver") != 0)
				return fail(x, -EINVAL, "action: '%s': deliver, drop or nat", v);
		} else if (strcmp(k, "port") == 0) {
			unsigned int ps[NCD_MAX_PORTS];
			int n = ports_of(x, v, ps);

			if (n != 1)
				return n < 0 ? n : fail(x, -EINVAL, "port: one port, not all");
			cc.port = (uint16_t)ps[0];
		} else {
			return fail(x, -EINVAL, "unknown option '%s' (proto, src, dst, sport, dport, "
				    "priority, action, ring_size, queue_bytes, port, queue, tx)", k);
		}
	}
	if (cc.tx && cc.action != NCD_ACTION_DELIVER)
		return fail(x, -EINVAL, "tx: only a deliver channel has a client to transmit");
	if (nc_trie_rule_validate(&cc.rule) != 0)
		return fail(x, -EINVAL, "the rule is not valid (a mask or range, or a family)");
	if (cc.action == NCD_ACTION_NAT && ncd_nat_conf_check(&cc.rule, &cc.nat, err, sizeof(err)))
		return fail(x, -EINVAL, "nat: %s", err);
	id = ncd_channel_add(x->d, &cc, NCD_OWNER_OPERATOR);
	if (id == -EEXIST)
		return fail(x, id, "a channel named '%s' exists", cc.name);
	if (id == -EBUSY)
		return fail(x, id, "another channel has the same rule and priority");
	if (id == -ENOTSUP)
		return fail(x, id, "a port requires offload and cannot offload this rule (the "
			    "daemon's log says why)");
	if (id < 0)
		return fail(x, id, "channel create: %s", strerror(-id));
	*res = ncd_view_channel(x->d, (uint32_t)id);
	return 0;
}

static int
cmd_channel_destroy(struct cmd_ctx *x, char **argv, json_t **res)
{
	int32_t id;
	int ret = channel_of(x, argv[2], false, &id);

	if (ret != 0)
		return ret;
	if (x->d->channels[id]->owner >= 0) {
		pid_t pid;
		uid_t uid;

		ncd_client_cred(x->d->channels[id]->owner, &pid, &uid);
		return fail(x, -EPERM, "channel '%s' belongs to client pid %d: it goes when the "
			    "client does", x->d->channels[id]->name, (int)pid);
	}
	*res = json_pack("{s:s, s:i}", "destroyed", x->d->channels[id]->name, "id", (int)id);
	ncd_channel_del(x->d, (uint32_t)id);
	return 0;
}

static int
cmd_set_log(struct cmd_ctx *x, char **argv, json_t **res)
{
	static const char *const names[] = { "emerg", "alert", "crit", "err", "warning", "notice",
					     "info", "debug" };
	char *end;
	long lvl = strtol(argv[4], &end, 10);

	if (*argv[4] == '\0' || *end != '\0') {
		lvl = 0;
		for (unsigned int i = 0; i < RTE_DIM(names); i++)
			if (strcmp(argv[4], names[i]) == 0)
				lvl = (long)i + 1;
	}
	if (lvl < RTE_LOG_EMERG || lvl > RTE_LOG_DEBUG)
		return fail(x, -EINVAL, "level '%s': emerg, alert, crit, err, warning, notice, info, "
			    "debug, or 1..8", argv[4]);
	if (rte_log_set_level_pattern(argv[3], (uint32_t)lvl) != 0)
		return fail(x, -EINVAL, "log type pattern '%s' refused", argv[3]);
	*res = json_pack("{s:s, s:s}", "type", argv[3], "level", names[lvl - 1]);
	return 0;
}

static json_t *
help_json(void)
{
	json_t *a = json_array();

	for (unsigned int i = 0; i < NC_CLI_NCMDS; i++)
		json_array_append_new(a, json_pack("{s:s, s:s}", "command", nc_cli_cmds[i].syntax,
						   "help", nc_cli_cmds[i].help));
	return a;
}

int
ncd_cli_exec(struct ncd *d, const char *line, bool json, bool priv, FILE *out)
{
	struct cmd_ctx x = { .d = d, .priv = priv, .out = out };
	char buf[NC_CLI_MAX_LINE], *argv[NC_CLI_MAX_WORDS];
	const struct nc_cli_cmd *c;
	json_t *res = NULL;
	int argc, ret = 0;

	c = nc_cli_match(line, buf, argv, &argc, x.err, sizeof(x.err));
	if (c == NULL) {
		if (x.err[0] == '\0')
			return 0;          /* an empty line */
		ret = -EINVAL;
		goto out;
	}
	switch (c->id) {
	case NC_CLI_CLEAR_PORT:
	case NC_CLI_CHANNEL_CREATE:
	case NC_CLI_CHANNEL_DESTROY:
	case NC_CLI_SET_LOG_LEVEL:
		if (!priv) {
			ret = fail(&x, -EPERM, "'%s' changes the daemon: root or the daemon's user only",
				   c->syntax);
			goto out;
		}
		break;
	default:
		break;
	}
	switch (c->id) {
	case NC_CLI_SHOW_PORT: ret = cmd_show_port(&x, argv, &res); break;
	case NC_CLI_CLEAR_PORT: ret = cmd_clear_port(&x, argv, &res); break;
	case NC_CLI_SHOW_CHANNEL: ret = cmd_show_channel(&x, argv, &res); break;
	case NC_CLI_SHOW_CLIENTS: res = ncd_view_clients(d); break;
	case NC_CLI_SHOW_CLASSIFIER: res = ncd_view_classifier(d); break;
	case NC_CLI_SHOW_MEMPOOL: res = ncd_view_mempool(d); break;
	case NC_CLI_SHOW_NAT: res = ncd_view_nat(d); break;
	case NC_CLI_CHANNEL_CREATE: ret = cmd_channel_create(&x, argv, argc, &res); break;
	case NC_CLI_CHANNEL_DESTROY: ret = cmd_channel_destroy(&x, argv, &res); break;
	case NC_CLI_SET_LOG_LEVEL: ret = cmd_set_log(&x, argv, &res); break;
	case NC_CLI_HELP:
		if (json)
			res = help_json();
		else
			nc_cli_help(out);
		break;
	case NC_CLI_QUIT:
		return 1;
	case NC_CLI_NCMDS:
		break;
	}
out:
	if (ret < 0) {
		if (json) {
			json_t *e = json_pack("{s:s, s:i}", "error", x.err, "errno", -ret);

			json_dumpf(e, out, JSON_COMPACT);
			fputc('\n', out);
			json_decref(e);
		} else {
			fprintf(out, "error: %s\n", x.err);
		}
	} else if (res != NULL) {
		if (json) {
			json_dumpf(res, out, JSON_COMPACT);
			fputc('\n', out);
		} else {
			render(out, res, 0);
		}
	}
	json_decref(res);
	return ret;
}
