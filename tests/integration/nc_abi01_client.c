/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A binary built against libnetchannel 0.1, as it would have been: the API
 * is declared here as 0.1's netchannel.h had it (not from today's header),
 * and the calls whose structs have changed since are bound to their
 * NETCHANNEL_0.1 versions, as a link against 0.1 bound them. Each struct it
 * passes sits before a guard of poison bytes: a library that read past 0.1's
 * size would take them for fields (the NAT options' pointer), and one that
 * wrote past it would change them.
 *
 *   nc_abi01_client SOCKET DPORT COUNT
 *
 * Creates a udp channel for DPORT, receives COUNT frames, reads its
 * counters; prints "abi01 received N hits H delivered D rx_count R guards
 * intact" and exits 0, or says what went wrong and exits 1.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

/* 0.1's netchannel.h, the parts this program uses. */
struct nc_client;
struct nc_channel;

struct nc_trie_port {
	uint16_t lo, hi;
	uint8_t kind;
};

union nc_trie_addr {
	uint8_t a[16];
	uint32_t v4;
};

struct nc_trie_rule {
	uint8_t family, proto, proto_mask, dst_len, src_len;
	union nc_trie_addr dst, src;
	struct nc_trie_port dport, sport;
	uint32_t priority;
};

struct nc_channel_opts {
	int drop;
	uint32_t ring_size;
	uint64_t queue_bytes;
	uint32_t memory_limit_order;
	int tx;
	uint16_t port;
};

struct nc_channel_stats {
	uint64_t hits, delivered, bytes, drop_ring_full, drop_queue_bytes, dropped, tx, tx_bytes,
		tx_dropped, tx_spoofed, tx_malformed, tx_no_route, tx_no_neigh, tx_ring_full;
	uint32_t rx_count, tx_count;
};

struct nc_client *nc_connect(const char *socket_path, unsigned int flags);
void nc_disconnect(struct nc_client *c);
struct nc_channel *nc_channel_create(struct nc_client *c, const char *name,
				     const struct nc_trie_rule *rule,
				     const struct nc_channel_opts *opts);
int nc_channel_destroy(struct nc_channel *ch);
ssize_t nc_recv(struct nc_channel *ch, void *buf, size_t len, int timeout_ms);
int nc_channel_stats(const struct nc_channel *ch, struct nc_channel_stats *st);
int nc_rule_flow(struct nc_trie_rule *r, const char *proto, const char *dst, long dport);
const char *nc_strerror(int err);

/* What a link against 0.1 recorded for the calls that have newer versions. */
__asm__(".symver nc_channel_create, nc_channel_create@NETCHANNEL_0.1");
__asm__(".symver nc_channel_stats, nc_channel_stats@NETCHANNEL_0.1");
__asm__(".symver nc_rule_flow, nc_rule_flow@NETCHANNEL_0.1");

#define GUARD 64
#define POISON 0xa5

/* A struct of 0.1, and poison after it. */
#define GUARDED(type) struct { type v; uint8_t guard[GUARD]; }

static int
intact(const uint8_t *guard)
{
	for (int i = 0; i < GUARD; i++)
		if (guard[i] != POISON)
			return 0;
	return 1;
}

int
main(int argc, char **argv)
{
	GUARDED(struct nc_trie_rule) rule;
	GUARDED(struct nc_channel_opts) opts;
	GUARDED(struct nc_channel_stats) st;
	struct nc_channel *ch;
	struct nc_client *c;
	long count, got = 0;
	char frame[2048];
	int ret;

	if (argc != 4) {
		fprintf(stderr, "usage: nc_abi01_client SOCKET DPORT COUNT\n");
		return 2;
	}
	count = atol(argv[3]);
	memset(&rule, POISON, sizeof(rule));
	memset(&opts, POISON, sizeof(opts));
	memset(&st, POISON, sizeof(st));
	c = nc_connect(argv[1], 0);
	if (c == NULL) {
		printf("nc_connect: %s\n", nc_strerror(errno));
		return 1;
	}
	ret = nc_rule_flow(&rule.v, "udp", NULL, atol(argv[2]));
	if (ret != 0 || !intact(rule.guard)) {
		printf("nc_rule_flow: %s, guard %s\n", nc_strerror(ret),
		       intact(rule.guard) ? "intact" : "overwritten");
		return 1;
	}
	memset(&opts.v, 0, sizeof(opts.v));
	opts.v.ring_size = 64;
	ch = nc_channel_create(c, "abi01", &rule.v, &opts.v);
	if (ch == NULL) {
		printf("nc_channel_create: %s\n", nc_strerror(errno));
		return 1;
	}
	printf("created\n");
	fflush(stdout);
	while (got < count) {
		ssize_t n = nc_recv(ch, frame, sizeof(frame), 10000);

		if (n < 0) {
			printf("nc_recv: %s after %ld\n", nc_strerror((int)n), got);
			return 1;
		}
		got++;
	}
	ret = nc_channel_stats(ch, &st.v);
	if (ret != 0) {
		printf("nc_channel_stats: %s\n", nc_strerror(ret));
		return 1;
	}
	printf("abi01 received %ld hits %llu delivered %llu rx_count %u guards %s\n", got,
	       (unsigned long long)st.v.hits, (unsigned long long)st.v.delivered, st.v.rx_count,
	       intact(rule.guard) && intact(opts.guard) && intact(st.guard) ? "intact" :
									  "overwritten");
	nc_channel_destroy(ch);
	nc_disconnect(c);
	return 0;
}
