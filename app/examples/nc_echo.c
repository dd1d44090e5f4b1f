/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nc-echo: a UDP echo server over a channel, receiving and transmitting
 * zero-copy.
 *
 *   nc-echo [-s SOCKET] --dport N [--dst ADDR] [--proto udp] [--ip]
 *           [-c COUNT] [-t SECONDS] [--reconnect] [--zero-copy]
 *
 * It claims the flows to a UDP port and sends each datagram back with its
 * addresses and ports swapped (the IP and UDP checksums do not change). By
 * default it swaps the Ethernet addresses too and sends the frame; with --ip
 * it sends the IP packet and the daemon finds the next hop in the kernel's
 * neighbour table. Between bursts it sleeps on the channel's fd, so an idle
 * echo server uses no CPU. Only libnetchannel's API is used: copy from here.
 */
#define _GNU_SOURCE /* close_range */
#include <errno.h>
#include <stddef.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_udp.h>
#include <rte_version.h>

#define NC_ALLOW_EXPERIMENTAL     /* nc_reconnect() */
#include "netchannel.h"

static volatile sig_atomic_t stop;

static void
on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void
usage(FILE *f)
{
	fprintf(f, "usage: nc-echo [-s SOCKET] --dport N [--dst ADDR] [--proto udp] [--ip]\n"
		   "               [-c COUNT] [-t SECONDS] [--reconnect] [--zero-copy]\n"
		   "  -s, --socket     the daemon's control socket (default " NC_DEFAULT_SOCKET ")\n"
		   "      --dport      the UDP port to claim and echo on\n"
		   "      --dst        ... only for this local address or prefix\n"
		   "      --proto      udp (the only protocol an echo makes sense for here)\n"
		   "      --ip         send IP packets: the daemon adds the next hop's Ethernet header\n"
		   "  -c, --count      stop after echoing this many datagrams\n"
		   "  -t, --time       stop after this many seconds\n"
		   "      --reconnect  if the daemon goes away, wait for a new one and start again\n"
		   "      --zero-copy  a zero-copy client (DPDK secondary process: root, or control.allow's\n"
		   "                   zero_copy), not an isolated one\n"
		   "      --version    the version\n");
}

/*
 * The echo of a received frame, written to out (which may be the frame
 * itself; NULL: only say whether there is one). Returns the Ethernet (and
 * VLAN) header length, or -1 for what is not a UDP datagram to echo. The
 * frame itself is only read: an isolated client's receive buffers are
 * read-only.
 */
static int
make_echo(const uint8_t *f, uint8_t *out, uint32_t len)
{
	const struct rte_ether_hdr *eh = (const struct rte_ether_hdr *)f;
	uint32_t l2 = sizeof(*eh), ip_off, addr_len, udp_off;
	struct rte_ether_hdr *oeh;
	struct rte_udp_hdr *udp;
	uint8_t a[16];
	uint16_t type, port;

	if (len < l2)
		return -1;
	type = rte_be_to_cpu_16(eh->ether_type);
	while ((type == RTE_ETHER_TYPE_VLAN || type == RTE_ETHER_TYPE_QINQ) &&
	       len >= l2 + sizeof(struct rte_vlan_hdr)) {
		type = rte_be_to_cpu_16(((const struct rte_vlan_hdr *)(f + l2))->eth_proto);
		l2 += sizeof(struct rte_vlan_hdr);
	}
	if (type == RTE_ETHER_TYPE_IPV4 && len >= l2 + sizeof(struct rte_ipv4_hdr)) {
		const struct rte_ipv4_hdr *ip = (const struct rte_ipv4_hdr *)(f + l2);
		uint16_t ihl = rte_ipv4_hdr_len(ip);

		if (ip->next_proto_id != IPPROTO_UDP || len < l2 + ihl + sizeof(*udp))
			return -1;
		ip_off = l2 + offsetof(struct rte_ipv4_hdr, src_addr);
		addr_len = 4;
		udp_off = l2 + ihl;
	} else if (type == RTE_ETHER_TYPE_IPV6 &&
		   len >= l2 + sizeof(struct rte_ipv6_hdr) + sizeof(*udp)) {
		const struct rte_ipv6_hdr *ip = (const struct rte_ipv6_hdr *)(f + l2);

		/* Extension headers: not echoed (the daemon delivers them; this example keeps short). */
		if (ip->proto != IPPROTO_UDP)
			return -1;
		ip_off = l2 + offsetof(struct rte_ipv6_hdr, src_addr);
		addr_len = 16;
		udp_off = l2 + sizeof(*ip);
	} else {
		return -1;
	}
	if (out == NULL)
		return (int)l2;
	if (out != f)
		memcpy(out, f, len);
	/* Swapping addresses and ports leaves both checksums as they were. */
	memcpy(a, out + ip_off, addr_len);
	memmove(out + ip_off, out + ip_off + addr_len, addr_len);
	memcpy(out + ip_off + addr_len, a, addr_len);
	udp = (struct rte_udp_hdr *)(out + udp_off);
	port = udp->src_port;
	udp->src_port = udp->dst_port;
	udp->dst_port = port;
	oeh = (struct rte_ether_hdr *)out;
	rte_ether_addr_copy(&oeh->src_addr, (struct rte_ether_addr *)a);
	rte_ether_addr_copy(&oeh->dst_addr, &oeh->src_addr);
	rte_ether_addr_copy((struct rte_ether_addr *)a, &oeh->dst_addr);
	return (int)l2;
}

/* Whether an error says the daemon has gone: it stopped cleanly, or died. */
static int
daemon_went(int err)
{
	return err == ESHUTDOWN || err == EPIPE;
}

/*
 * One burst, zero-copy: the received mbufs, turned round, go back out.
 * @return how many were echoed, or -1 when the daemon is gone
 */
static long
echo_mbufs(struct nc_client *c, struct nc_channel *ch, uint16_t want, int ip, long *skipped)
{
	struct rte_mbuf *m[32], *out[32];
	uint16_t n = nc_rx_burst(ch, m, want), k = 0, sent;

	for (uint16_t i = 0; i < n; i++) {
		uint8_t *f = rte_pktmbuf_mtod(m[i], uint8_t *);
		int l2 = make_echo(f, f, m[i]->data_len);

		if (l2 < 0) {
			(*skipped)++;
			nc_mbuf_free(c, m[i]);
			continue;
		}
		if (ip)
			rte_pktmbuf_adj(m[i], (uint16_t)l2);
		out[k++] = m[i];
	}
	if (n == 0)
		return daemon_went(errno) ? -1 : 0;
	sent = ip ? nc_tx_burst_ip(ch, out, k) : nc_tx_burst(ch, out, k);
	/* A full transmit ring: those are dropped here, as a NIC's full queue would. */
	nc_mbuf_free_bulk(c, out + sent, k - sent);
	return sent < k && daemon_went(errno) ? -1 : sent;
}

/*
 * One burst, isolated: each datagram is turned round as it is copied from
 * its receive buffer into a transmit buffer of the region.
 * @return how many were echoed, or -1 when the daemon is gone
 */
static long
echo_bufs(struct nc_client *c, struct nc_channel *ch, uint16_t want, int ip, long *skipped)
{
	struct nc_buf in[32], out[32];
	int l2[32];
	uint16_t n = nc_rx_bufs(ch, in, want), e = 0, k, j = 0, sent;
	/* Within a frame longer than a buffer (NC_BUF_F_MORE): not echoed, as larger than the MTU. */
	static int in_long;

	if (n == 0)
		return daemon_went(errno) ? -1 : 0;
	for (uint16_t i = 0; i < n; i++) {
		int part = in_long || (in[i].flags & NC_BUF_F_MORE);

		in_long = (in[i].flags & NC_BUF_F_MORE) != 0;
		l2[i] = part ? -1 : make_echo(in[i].data, NULL, in[i].len);
		e += l2[i] >= 0;
		*skipped += l2[i] < 0 && !in_long;
	}
	/* What finds no free transmit buffer is dropped here, as a NIC's full queue would. */
	k = nc_tx_bufs_get(c, out, e);
	for (uint16_t i = 0; i < n && j < k; i++) {
		uint32_t skip = ip ? (uint32_t)l2[i] : 0;

		if (l2[i] < 0)
			continue;
		make_echo(in[i].data, out[j].data, in[i].len);
		if (skip > 0)
			memmove(out[j].data, (uint8_t *)out[j].data + skip, in[i].len - skip);
		out[j++].len = in[i].len - skip;
	}
	sent = nc_tx_bufs_send(ch, out, k, ip);
	nc_bufs_release(c, in, n);
	return sent < k && daemon_went(errno) ? -1 : sent;
}

/* Wait until a daemon answers on the socket again; 0, or -1 if told to stop. */
static int
wait_for_daemon(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	while (!stop) {
		int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
		int ok = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;

		if (fd >= 0)
			close(fd);
		if (ok)
			return 0;
		usleep(100 * 1000);
	}
	return -1;
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "dport", required_argument, NULL, 'd' },
		{ "dst", required_argument, NULL, 'a' },
		{ "proto", required_argument, NULL, 'p' },
		{ "ip", no_argument, NULL, 'i' },
		{ "count", required_argument, NULL, 'c' },
		{ "time", required_argument, NULL, 't' },
		{ "reconnect", no_argument, NULL, 'r' },
		{ "zero-copy", no_argument, NULL, 'z' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	const char *sock = NC_DEFAULT_SOCKET, *dst = NULL, *proto = "udp";
	long dport = -1, count = 0, seconds = 0, echoed = 0, skipped = 0;
	int ip = 0, reconnect = 0, zero_copy = 0, o, gone = 0;
	struct nc_channel_opts copts = NC_SIZED(nc_channel_opts, .tx = 1);
	struct nc_channel_stats st = NC_SIZED(nc_channel_stats);
	struct nc_rule rule = NC_SIZED(nc_rule);
	struct nc_channel *ch;
	struct nc_client *c;
	char name[32];
	time_t end;

	while ((o = getopt_long(argc, argv, "s:c:t:h", opts, NULL)) != -1) {
		switch (o) {
		case 's': sock = optarg; break;
		case 'd': dport = strtol(optarg, NULL, 0); break;
		case 'a': dst = optarg; break;
		case 'p': proto = optarg; break;
		case 'i': ip = 1; break;
		case 'c': count = strtol(optarg, NULL, 0); break;
		case 't': seconds = strtol(optarg, NULL, 0); break;
		case 'r': reconnect = 1; break;
		case 'z': zero_copy = 1; break;
		case 'h': usage(stdout); return 0;
		case 'V': printf("%s (netchanneld) %s, %s\n", "nc-echo", nc_version(), rte_version()); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (dport < 0 || dport > 65535 || count < 0 || seconds < 0 || optind != argc) {
		usage(stderr);
		return 2;
	}
	if (strcmp(proto, "udp") != 0) {
		fprintf(stderr, "nc-echo: --proto %s: only udp is echoed\n", proto);
		return 2;
	}
	if (nc_rule_flow(&rule, proto, dst, dport) != 0) {
		fprintf(stderr, "nc-echo: --dst %s: not an address or prefix\n", dst);
		return 2;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	if (reconnect && wait_for_daemon(sock) != 0)
		return 0;
	c = nc_connect(sock, zero_copy ? NC_CONNECT_ZEROCOPY : 0);
	if (c == NULL) {
		fprintf(stderr, "nc-echo: connect to %s: %s%s%s\n", sock, nc_strerror(errno),
			NC_REASON(nc_last_reason()));
		return 1;
	}
	snprintf(name, sizeof(name), "nc-echo-%ld", dport);
	ch = nc_channel_create(c, name, &rule, &copts);
	if (ch == NULL) {
		fprintf(stderr, "nc-echo: claim %s port %ld: %s%s%s\n", proto, dport,
			nc_strerror(errno), NC_REASON(nc_last_reason()));
		nc_disconnect(c);
		return 1;
	}
	printf("nc-echo: echoing %s port %ld as channel %s (%u)%s\n", proto, dport, name,
	       nc_channel_id(ch), ip ? ", sending IP packets" : "");
	fflush(stdout);
loop:
	end = seconds ? time(NULL) + seconds : 0;
	while (!stop && (count == 0 || echoed < count) && (end == 0 || time(NULL) < end)) {
		uint16_t want = count && count - echoed < 32 ? (uint16_t)(count - echoed) : 32;
		long n;

		errno = 0;
		n = zero_copy ? echo_mbufs(c, ch, want, ip, &skipped) :
				echo_bufs(c, ch, want, ip, &skipped);
		if (n < 0) {
			gone = errno;
			break;
		}
		echoed += n;
		if (n == 0) {
			struct pollfd p = { .events = POLLIN };
			uint64_t v;

			p.fd = nc_channel_fd(ch);
			/* Ask to be woken, look once more, then sleep (100 ms at most, for signals). */
			if (nc_channel_arm(ch) == 0 && poll(&p, 1, 100) > 0 &&
			    read(p.fd, &v, sizeof(v)) < 0)
				break;
		}
	}
	/* The daemon's view, once its worker has dealt with all we handed it (1 s at most). */
	for (int i = 0; !gone && i < 100 && nc_channel_stats(ch, &st) == 0; i++) {
		if (st.tx + st.tx_dropped + st.tx_spoofed + st.tx_malformed + st.tx_no_route +
		    st.tx_no_neigh + st.tx_ring_full >= (uint64_t)echoed)
			break;
		usleep(10 * 1000);
	}
	if (!gone && nc_channel_stats(ch, &st) == 0)
		fprintf(stderr, "nc-echo: %ld echoed, %ld skipped; daemon: tx=%" PRIu64 " tx_spoofed=%"
			PRIu64 " tx_malformed=%" PRIu64 " tx_no_route=%" PRIu64 " tx_no_neigh=%" PRIu64
			" tx_dropped=%" PRIu64 "\n", echoed, skipped, st.tx, st.tx_spoofed,
			st.tx_malformed, st.tx_no_route, st.tx_no_neigh, st.tx_dropped);
	else
		fprintf(stderr, "nc-echo: %ld echoed, %ld skipped%s\n", echoed, skipped,
			gone == ESHUTDOWN ? "; the daemon is stopping" :
			gone ? "; the daemon is gone" : "");
	if (gone && reconnect && !stop && !zero_copy) {
		/* An isolated client: its channel again, under the same handle, from a new daemon. */
		int ret;

		while ((ret = nc_reconnect(c, 100)) == -ETIMEDOUT)
			if (stop)
				goto out;
		if (ret != 0) {
			fprintf(stderr, "nc-echo: reconnect to %s: %s%s%s\n", sock, nc_strerror(ret),
				NC_REASON(nc_last_reason()));
			goto out;
		}
		gone = 0;
		echoed = skipped = 0;
		printf("nc-echo: echoing %s port %ld as channel %s (%u) again\n", proto, dport,
		       name, nc_channel_id(ch));
		fflush(stdout);
		goto loop;
	}
	if (gone && reconnect && !stop) {
		/*
		 * EAL cannot be initialised twice in a process, and this one is attached
		 * to the old daemon's memory: start afresh, without its descriptors.
		 */
		fflush(NULL);
		close_range(3, ~0u, CLOSE_RANGE_CLOEXEC);
		execv("/proc/self/exe", argv);
		fprintf(stderr, "nc-echo: re-exec: %s\n", strerror(errno));
		return 1;
	}
out:
	nc_channel_destroy(ch);
	nc_disconnect(c);
	return gone ? 1 : 0;
}
