/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The calls of NETCHANNEL_0.1 whose structs have changed since: what a
 * binary linked against 0.1 calls. Their structs are frozen here as 0.1 had
 * them, and each call reads and writes exactly those, so such a binary
 * works on, with what 0.1 offered: its counters are the 0.1 set, and its
 * options have no NAT (0.1's struct had no field for it).
 */
#include <errno.h>
#include <string.h>

#include "nc_internal.h"

/* struct nc_trie_rule of 0.1, which netchannel.h then took for a channel's rule. */
struct nc_rule_v01 {
	uint8_t family, proto, proto_mask, dst_len, src_len;
	uint8_t pad[3];
	uint8_t dst[16], src[16];
	struct { uint16_t lo, hi; uint8_t kind, pad; } dport, sport;
	uint32_t priority;
};

/* struct nc_channel_opts of 0.1. */
struct nc_channel_opts_v01 {
	int drop;
	uint32_t ring_size;
	uint64_t queue_bytes;
	uint32_t memory_limit_order;
	int tx;
	uint16_t port;
};

/* struct nc_channel_stats of 0.1: the counters up to tx_count. */
struct nc_channel_stats_v01 {
	uint64_t hits, delivered, bytes, drop_ring_full, drop_queue_bytes, dropped, tx, tx_bytes,
		tx_dropped, tx_spoofed, tx_malformed, tx_no_route, tx_no_neigh, tx_ring_full;
	uint32_t rx_count, tx_count;
};

_Static_assert(sizeof(struct nc_rule_v01) == 56, "0.1's rule is frozen");
_Static_assert(sizeof(struct nc_channel_opts_v01) == 32, "0.1's options are frozen");
_Static_assert(sizeof(struct nc_channel_stats_v01) == 120, "0.1's counters are frozen");

static void
rule_from_v01(const struct nc_rule_v01 *o, struct nc_rule *r)
{
	*r = (struct nc_rule){
		.size = sizeof(*r), .family = o->family, .proto = o->proto,
		.proto_mask = o->proto_mask, .dst_len = o->dst_len, .src_len = o->src_len,
		.dport = { o->dport.lo, o->dport.hi, o->dport.kind, 0 },
		.sport = { o->sport.lo, o->sport.hi, o->sport.kind, 0 },
		.priority = o->priority,
	};
	memcpy(r->dst, o->dst, sizeof(r->dst));
	memcpy(r->src, o->src, sizeof(r->src));
}

NC_EXPORT struct nc_channel *
nc_channel_create_v01(struct nc_client *c, const char *name, const struct nc_rule_v01 *rule,
		      const struct nc_channel_opts_v01 *opts)
{
	struct nc_channel_opts o;
	struct nc_rule r;

	if (rule == NULL) {
		errno = EINVAL;
		return NULL;
	}
	rule_from_v01(rule, &r);
	if (opts != NULL)
		o = (struct nc_channel_opts){
			.size = sizeof(o), .drop = opts->drop, .ring_size = opts->ring_size,
			.queue_bytes = opts->queue_bytes,
			.memory_limit_order = opts->memory_limit_order, .tx = opts->tx,
			.port = opts->port,
		};
	return nc__channel_create(c, name, &r, opts != NULL ? &o : NULL, NULL, NULL);
}
NC_SYMVER(nc_channel_create_v01, nc_channel_create, "NETCHANNEL_0.1");

NC_EXPORT int
nc_channel_stats_v01(const struct nc_channel *ch, struct nc_channel_stats_v01 *st)
{
	struct nc_channel_stats all;
	int ret = nc__channel_stats(ch, &all);

	if (ret != 0)
		return ret;
#define COPY(name) .name = all.name
	*st = (struct nc_channel_stats_v01){
		COPY(hits), COPY(delivered), COPY(bytes), COPY(drop_ring_full),
		COPY(drop_queue_bytes), COPY(dropped), COPY(tx), COPY(tx_bytes), COPY(tx_dropped),
		COPY(tx_spoofed), COPY(tx_malformed), COPY(tx_no_route), COPY(tx_no_neigh),
		COPY(tx_ring_full), COPY(rx_count), COPY(tx_count),
	};
#undef COPY
	return 0;
}
NC_SYMVER(nc_channel_stats_v01, nc_channel_stats, "NETCHANNEL_0.1");

NC_EXPORT int
nc_rule_flow_v01(struct nc_rule_v01 *o, const char *proto, const char *dst, long dport)
{
	struct nc_rule r;
	int ret = nc__rule_flow(&r, proto, dst, dport);

	memset(o, 0, sizeof(*o));
	if (ret != 0)
		return ret;
	*o = (struct nc_rule_v01){
		.family = r.family, .proto = r.proto, .proto_mask = r.proto_mask,
		.dst_len = r.dst_len, .src_len = r.src_len,
		.dport = { r.dport.lo, r.dport.hi, r.dport.kind, 0 },
		.sport = { r.sport.lo, r.sport.hi, r.sport.kind, 0 },
		.priority = r.priority,
	};
	memcpy(o->dst, r.dst, sizeof(o->dst));
	memcpy(o->src, r.src, sizeof(o->src));
	return 0;
}
NC_SYMVER(nc_rule_flow_v01, nc_rule_flow, "NETCHANNEL_0.1");
