/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The soak test's client (scripts/soak.py): a channel for UDP to DPORT, and a
 * check of every packet it receives. The soak traffic's packets carry
 * "flow=N" in their payload, and flow N is sent to port BASE + N: a packet is
 * misdelivered when it is not UDP to DPORT, or its payload names another
 * flow. It holds the last 64 mbufs it received (a client killed with SIGKILL
 * then leaves the daemon mbufs to take back), and prints its running totals
 * every 50 ms, since the soak kills it without warning:
 *
 *   nc_soak_client SOCKET NAME DPORT BASE
 *   -> "ok N misdelivered M" lines; exits 0 when the daemon goes (EPIPE)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rte_mbuf.h>

#include "netchannel.h"

#define HOLD 64

static uint64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Is this frame UDP to dport, with a payload naming the flow that goes there? */
static int
good(const uint8_t *f, size_t n, int dport, int base)
{
	size_t ihl, l4;
	char flow[24];
	unsigned int id;

	if (n < 14 + 20 || f[12] != 0x08 || f[13] != 0x00 || f[14 + 9] != 17)
		return 0;
	ihl = (f[14] & 0xf) * 4u;
	l4 = 14 + ihl;
	if (n < l4 + 8 || (f[l4 + 2] << 8 | f[l4 + 3]) != dport)
		return 0;
	n -= l4 + 8;
	if (n >= sizeof(flow))
		n = sizeof(flow) - 1;
	memcpy(flow, f + l4 + 8, n);
	flow[n] = '\0';
	return sscanf(flow, "flow=%u", &id) == 1 && (int)id + base == dport;
}

int
main(int argc, char **argv)
{
	struct rte_mbuf *held[HOLD] = { NULL };
	struct nc_trie_rule rule;
	struct nc_channel *ch;
	struct nc_client *c;
	uint64_t ok = 0, bad = 0, last = 0;
	unsigned int next = 0;
	int dport, base;

	if (argc != 5) {
		fprintf(stderr, "usage: %s SOCKET NAME DPORT BASE\n", argv[0]);
		return 2;
	}
	dport = atoi(argv[3]);
	base = atoi(argv[4]);
	c = nc_connect(argv[1], 0);
	if (c == NULL) {
		printf("nc_connect: %s\n", nc_strerror(errno));
		return 2;
	}
	memset(&rule, 0, sizeof(rule));
	rule.proto = 17;
	rule.proto_mask = 0xff;
	rule.dport = (struct nc_trie_port){ (uint16_t)dport, (uint16_t)dport, NC_TRIE_PORT_RANGE };
	ch = nc_channel_create(c, argv[2], &rule, NULL);
	if (ch == NULL) {
		printf("channel %s: %s\n", argv[2], nc_strerror(errno));
		nc_disconnect(c);
		return 2;
	}
	printf("channel %s: id %u\n", argv[2], nc_channel_id(ch));
	fflush(stdout);
	for (;;) {
		struct rte_mbuf *m[32];
		uint16_t n;

		errno = 0;
		n = nc_rx_burst(ch, m, 32);

		if (n == 0 && errno == EPIPE)
			break;
		for (uint16_t i = 0; i < n; i++) {
			if (good(rte_pktmbuf_mtod(m[i], uint8_t *), rte_pktmbuf_data_len(m[i]), dport,
				 base))
				ok++;
			else
				bad++;
			if (held[next] != NULL)
				nc_mbuf_free(c, held[next]);
			held[next] = m[i];
			next = (next + 1) % HOLD;
		}
		if (n == 0)
			usleep(200);
		if (now_ms() - last >= 50) {
			printf("ok %lu misdelivered %lu\n", (unsigned long)ok, (unsigned long)bad);
			fflush(stdout);
			last = now_ms();
		}
	}
	printf("ok %lu misdelivered %lu\n", (unsigned long)ok, (unsigned long)bad);
	for (unsigned int i = 0; i < HOLD; i++)
		if (held[i] != NULL)
			nc_mbuf_free(c, held[i]);
	nc_channel_destroy(ch);
	nc_disconnect(c);
	return 0;
}
