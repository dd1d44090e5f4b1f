/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A libnetchannel client for the tests.
 *
 *   nc_client_test SOCKET create NAME DPORT COUNT copy|zerocopy [TIMEOUT_MS]
 *   nc_client_test SOCKET attach NAME DPORT COUNT copy|zerocopy [TIMEOUT_MS]
 *
 * Receives COUNT packets of its channel, checks that each is UDP to DPORT,
 * prints "received N", and exits 0. Exits 1 on a short count (printing the
 * errno of nc_recv), 2 when the channel cannot be had (printing nc_strerror).
 * TIMEOUT_MS -1 waits for ever: the test of a daemon that dies.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_mbuf.h>

#include "netchannel.h"

/* UDP destination port of an untagged IPv4 frame, or -1. */
static int
udp_dport(const uint8_t *f, size_t n)
{
	size_t ihl;

	if (n < 14 + 20 || f[12] != 0x08 || f[13] != 0x00 || f[14 + 9] != 17)
		return -1;
	ihl = (f[14] & 0xf) * 4u;
	if (n < 14 + ihl + 4)
		return -1;
	return f[14 + ihl + 2] << 8 | f[14 + ihl + 3];
}

int
main(int argc, char **argv)
{
	struct nc_trie_rule rule;
	struct nc_channel *ch;
	struct nc_client *c;
	long count, got = 0, timeout = 5000;
	int dport, zerocopy;
	long waited_ms = 0;

	if (argc < 7) {
		fprintf(stderr, "usage: %s SOCKET create|attach NAME DPORT COUNT copy|zerocopy "
				"[TIMEOUT_MS]\n", argv[0]);
		return 2;
	}
	dport = atoi(argv[4]);
	count = atol(argv[5]);
	zerocopy = strcmp(argv[6], "zerocopy") == 0;
	if (argc > 7)
		timeout = atol(argv[7]);
	c = nc_connect(argv[1], 0);
	if (c == NULL) {
		printf("nc_connect: %s\n", nc_strerror(errno));
		return 2;
	}
	memset(&rule, 0, sizeof(rule));
	rule.proto = 17;
	rule.proto_mask = 0xff;
	rule.dport = (struct nc_trie_port){ (uint16_t)dport, (uint16_t)dport, NC_TRIE_PORT_RANGE };
	ch = strcmp(argv[2], "create") == 0 ? nc_channel_create(c, argv[3], &rule, NULL) :
					      nc_channel_attach(c, argv[3]);
	if (ch == NULL) {
		printf("channel %s: %s\n", argv[3], nc_strerror(errno));
		nc_disconnect(c);
		return 2;
	}
	printf("channel %s: id %u\n", argv[3], nc_channel_id(ch));
	fflush(stdout);
	while (got < count) {
		static uint8_t buf[16384];
		struct rte_mbuf *m[32];
		int bad = 0;

		if (zerocopy) {
			uint16_t n = nc_rx_burst(ch, m, count - got < 32 ? (uint16_t)(count - got) : 32);

			for (uint16_t i = 0; i < n; i++) {
				bad |= udp_dport(rte_pktmbuf_mtod(m[i], uint8_t *),
						 rte_pktmbuf_data_len(m[i])) != dport;
				rte_pktmbuf_free(m[i]);
			}
			got += n;
			if (n == 0) {
				if (waited_ms++ >= timeout && timeout >= 0)
					break;
				usleep(1000);
			}
		} else {
			ssize_t n = nc_recv(ch, buf, sizeof(buf), (int)timeout);

			if (n < 0) {
				printf("nc_recv: %s\n", nc_strerror(errno));
				break;
			}
			bad = udp_dport(buf, (size_t)n) != dport;
			got++;
		}
		if (bad) {
			printf("a packet not for udp port %d\n", dport);
			return 1;
		}
	}
	printf("received %ld\n", got);
	nc_channel_destroy(ch);
	nc_disconnect(c);
	return got < count ? 1 : 0;
}
