/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The tutorial of docs/protocol.md, whole: a UDP echo server over a channel,
 * in place in the region, that sleeps when idle and comes back by itself
 * when the daemon restarts.
 *
 *   nc-tutorial SOCKET PORT
 *
 * Prints "echoing" once its channel is there, and again each time it is back
 * after a restart; stops on SIGINT or SIGTERM.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NC_ALLOW_EXPERIMENTAL     /* nc_reconnect() */
#include "netchannel.h"

static volatile sig_atomic_t stop;

static void
on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

/* Swap a frame's Ethernet addresses, IPv4 addresses and UDP ports: its echo. */
static void
make_echo(uint8_t *f, uint32_t len)
{
	uint8_t t[6];
	uint32_t ihl;

	if (len < 14 + 20 + 8 || f[12] != 0x08 || f[13] != 0x00 || (ihl = (f[14] & 0xf) * 4u) < 20 ||
	    len < 14 + ihl + 8)
		return;
	memcpy(t, f, 6);
	memcpy(f, f + 6, 6);
	memcpy(f + 6, t, 6);
	memcpy(t, f + 26, 4);
	memcpy(f + 26, f + 30, 4);
	memcpy(f + 30, t, 4);
	memcpy(t, f + 14 + ihl, 2);
	memcpy(f + 14 + ihl, f + 14 + ihl + 2, 2);
	memcpy(f + 14 + ihl + 2, t, 2);
}

int
main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: nc-tutorial SOCKET PORT\n");
		return 2;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	/* tutorial: begin */
	struct nc_client *c = nc_connect(argv[1], 0);             /* HELLO; maps its region */
	if (c == NULL)
		return 1;
	struct nc_rule r = NC_SIZED(nc_rule);                      /* a struct that carries its size */
	nc_rule_flow(&r, "udp", NULL, atol(argv[2]));              /* udp, any address, the port */
	struct nc_channel_opts o = NC_SIZED(nc_channel_opts, .tx = 1);  /* it will transmit */
	struct nc_channel *ch = nc_channel_create(c, "tutorial", &r, &o);
	if (ch == NULL)
		return 1;
	printf("echoing\n");
	fflush(stdout);
	while (!stop) {
		struct nc_buf in[32], out[32];
		uint16_t n = nc_rx_bufs(ch, in, 32), k;            /* in place, in the region */

		if (n == 0) {
			if (errno == ESHUTDOWN || errno == EPIPE) {  /* the daemon stopped, or died */
				if (nc_reconnect(c, 1000) == 0) {    /* a new one: the channel again */
					printf("echoing\n");
					fflush(stdout);
				}
				continue;
			}
			struct pollfd p = { .fd = nc_channel_fd(ch), .events = POLLIN };
			uint64_t v;

			if (nc_channel_arm(ch) == 0 && poll(&p, 1, 100) > 0)  /* idle: sleep */
				(void)!read(p.fd, &v, sizeof(v));
			continue;
		}
		k = nc_tx_bufs_get(c, out, n);                     /* free tx buffers */
		for (uint16_t i = 0; i < k; i++) {
			memcpy(out[i].data, in[i].data, in[i].len);
			make_echo(out[i].data, in[i].len);         /* addresses and ports swapped */
			out[i].len = in[i].len;
		}
		nc_tx_bufs_send(ch, out, k, 0);                    /* 1: IP packets, after */
		nc_bufs_release(c, in, n);                         /*   stripping the Ethernet header */
	}
	nc_channel_destroy(ch);
	nc_disconnect(c);
	/* tutorial: end */
	return 0;
}
