/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A libnetchannel client for the tests.
 *
 *   nc_client_test SOCKET create NAME DPORT COUNT copy|zerocopy|bulk|alloc|hold [TIMEOUT_MS]
 *   nc_client_test SOCKET attach NAME DPORT COUNT copy|zerocopy|bulk|alloc|hold [TIMEOUT_MS]
 *   nc_client_test SOCKET spoof NAME DPORT
 *   nc_client_test SOCKET create|attach NAME DPORT BASE soak
 *   nc_client_test SOCKET latency NAME DPORT COUNT
 *   nc_client_test SOCKET drain PREFIX N
 *   nc_client_test SOCKET drain-iso PREFIX N
 *   nc_client_test SOCKET lock
 *
 * Receives COUNT packets of its channel, checks that each is UDP to DPORT,
 * prints "received N held H" (H: the mbufs the library still counts as held,
 * 0 once all are freed), and exits 0. Exits 1 on a short count (printing the
 * error of nc_recv), 2 when the channel cannot be had (printing nc_strerror).
 * TIMEOUT_MS -1 waits for ever: the test of a daemon that dies.
 *
 * bulk: as zerocopy, and frees each burst with one nc_mbuf_free_bulk(), as
 * fast as it can (as nc-dump -q does).
 *
 * alloc: as zerocopy, and allocates and frees an mbuf (nc_mbuf_alloc) for
 * each packet, so a kill may come in the middle of either.
 *
 * hold: keeps the COUNT mbufs instead of freeing them, prints "holding N"
 * (fewer if the quota stops it: "holding N quota Q") and sleeps until killed.
 *
 * soak (scripts/soak.py, scripts/bench_datapath.py): receives until the
 * daemon goes (then exits 0), or SIGTERM, or SIGKILL,
 * checking every packet: the soak traffic's packets carry "flow=N" in their
 * payload, and flow N is sent to port BASE + N, so a packet is misdelivered
 * when it is not UDP to DPORT or names another flow. It holds the last 64
 * mbufs it received (a client killed with SIGKILL then leaves the daemon
 * mbufs to take back) and prints "ok N misdelivered M" every 50 ms, since the
 * soak kills it without warning. DPORT 0 (with attach): any port, the
 * payload's flow still has to be the one sent to the packet's port.
 *
 * lock: takes DPDK's memory hotplug lock for reading, prints "locked" and
 * sleeps until killed, as a client killed inside rte_eal_init() would.
 *
 * drain (scripts/bench_datapath.py): attaches the static channels PREFIX0 ..
 * PREFIX<N-1> and empties them in turn until the daemon goes or a signal.
 * drain-iso: the same as an isolated client with one ring for all
 * (NC_CONNECT_ONE_RING), which it empties, giving each burst's buffers back.
 *
 * latency (scripts/bench_datapath.py): COUNT times, creates a channel for UDP
 * to DPORT at priority 10 while traffic flows, waits for its first packet and
 * destroys it; prints the medians and 99th percentiles of the create call
 * and of create-to-first-packet, in microseconds.
 *
 * spoof: a transmitting channel for udp 192.0.2.1:DPORT sends one packet of
 * its own flow and six that it may not send (see below), waits until the
 * daemon has counted all seven, and prints the channel's counters.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>

#include <rte_eal_memconfig.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_udp.h>

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

/* The source MAC of the frames udp4_frame() builds: the channel's port's (nc_channel_tx_mac()). */
static uint8_t smac[6];

/* An Ethernet + IPv4 + UDP frame from src:sport to 203.0.113.9:4000; returns its length. */
static size_t
udp4_frame(uint8_t *f, const char *src, uint16_t sport, uint8_t proto)
{
	struct rte_ether_hdr *eh = (struct rte_ether_hdr *)f;
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(eh + 1);
	struct rte_udp_hdr *udp = (struct rte_udp_hdr *)(ip + 1);
	static const uint8_t dmac[6] = { 0x02, 0, 0, 0, 0, 0x09 };
	size_t payload = 18;

	memset(f, 0, 14 + 20 + 8 + payload);
	memcpy(eh->dst_addr.addr_bytes, dmac, 6);
	memcpy(eh->src_addr.addr_bytes, smac, 6);
	eh->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
	ip->version_ihl = 0x45;
	ip->time_to_live = 64;
	ip->next_proto_id = proto;
	ip->total_length = rte_cpu_to_be_16((uint16_t)(20 + 8 + payload));
	inet_pton(AF_INET, src, &ip->src_addr);
	inet_pton(AF_INET, "203.0.113.9", &ip->dst_addr);
	udp->src_port = rte_cpu_to_be_16(sport);
	udp->dst_port = rte_cpu_to_be_16(4000);
	udp->dgram_len = rte_cpu_to_be_16((uint16_t)(8 + payload));
	memcpy(udp + 1, "netchannel spoof t", payload);
	ip->hdr_checksum = rte_ipv4_cksum(ip);
	udp->dgram_cksum = rte_ipv4_udptcp_cksum(ip, udp);
	return 14 + 20 + 8 + payload;
}

/*
 * A zero-copy client sending as fast as it can for secs seconds on static
 * channel name (udp port sport, with tx): bursts of 32 mbufs; what
 * nc_tx_burst() does not take is refused and freed. Prints "sent N refused M".
 */
static int
flood(struct nc_client *c, const char *name, uint16_t sport, double secs)
{
	struct nc_channel *ch = nc_channel_attach(c, name);
	uint64_t sent = 0, refused = 0;
	struct rte_mbuf *m[32];
	struct timespec t0, t;

	if (ch == NULL) {
		printf("attach %s: %s\n", name, nc_strerror(errno));
		return 2;
	}
	nc_channel_tx_mac(ch, smac);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		unsigned int k = 0, taken;

		while (k < 32 && (m[k] = nc_mbuf_alloc(c)) != NULL) {
			size_t n = udp4_frame(rte_pktmbuf_mtod(m[k], uint8_t *), "192.0.2.1", sport,
					      IPPROTO_UDP);

			rte_pktmbuf_append(m[k++], (uint16_t)n);
		}
		taken = nc_tx_burst(ch, m, (uint16_t)k);
		sent += taken;
		refused += k - taken;
		nc_mbuf_free_bulk(c, m + taken, k - taken);
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9 < secs);
	printf("sent %" PRIu64 " refused %" PRIu64 "\n", sent, refused);
	fflush(stdout);
	nc_channel_destroy(ch);
	return 0;
}

/* nc_send() or nc_send_ip(), waiting for room on the (small) transmit ring. */
static int
send_one(struct nc_channel *ch, const uint8_t *f, size_t n, int ip)
{
	for (int i = 0; i < 1000; i++) {
		ssize_t r = ip ? nc_send_ip(ch, f, n) : nc_send(ch, f, n);

		if (r == (ssize_t)n)
			return 1;
		if (r != -EAGAIN)
			break;
		usleep(1000);
	}
	return 0;
}

static int
spoof(struct nc_client *c, const char *name, int dport)
{
	struct nc_channel_opts o = NC_SIZED(nc_channel_opts, .tx = 1, .ring_size = 4);
	struct rte_mbuf *burst[64];
	unsigned int taken;
	uint64_t held_after;
	struct nc_channel_stats st = NC_SIZED(nc_channel_stats);
	struct nc_rule rule = NC_SIZED(nc_rule);
	struct nc_channel *ch;
	uint8_t f[128];
	size_t n;
	int sent = 0;

	nc_rule_flow(&rule, "udp", "192.0.2.1", dport);
	ch = nc_channel_create(c, name, &rule, &o);
	if (ch == NULL) {
		printf("channel %s: %s\n", name, nc_strerror(errno));
		return 2;
	}
	nc_channel_tx_mac(ch, smac);
	/* 1. Its own flow: on the wire. */
	n = udp4_frame(f, "192.0.2.1", (uint16_t)dport, IPPROTO_UDP);
	sent += send_one(ch, f, n, 0);
	/* 2-4. Another source port, another source address, another protocol: spoofed. */
	n = udp4_frame(f, "192.0.2.1", (uint16_t)(dport + 1), IPPROTO_UDP);
	sent += send_one(ch, f, n, 0);
	n = udp4_frame(f, "192.0.2.99", (uint16_t)dport, IPPROTO_UDP);
	sent += send_one(ch, f, n, 0);
	n = udp4_frame(f, "192.0.2.1", (uint16_t)dport, IPPROTO_TCP);
	sent += send_one(ch, f, n, 0);
	/* 5. Not IP at all (an ARP-typed frame): spoofed, it is the kernel's to send. */
	n = udp4_frame(f, "192.0.2.1", (uint16_t)dport, IPPROTO_UDP);
	f[12] = 0x08;
	f[13] = 0x06;
	sent += send_one(ch, f, n, 0);
	/* 6. A broken IPv4 header checksum: malformed. */
	n = udp4_frame(f, "192.0.2.1", (uint16_t)dport, IPPROTO_UDP);
	f[14 + 10] ^= 0xff;
	sent += send_one(ch, f, n, 0);
	/* 7. An IP packet of its flow, but the port has no kernel interface to route by. */
	n = udp4_frame(f, "192.0.2.1", (uint16_t)dport, IPPROTO_UDP);
	sent += send_one(ch, f + 14, n - 14, 1);
	/* 8. Its own flow from a source MAC not the port's: spoofed. */
	n = udp4_frame(f, "192.0.2.1", (uint16_t)dport, IPPROTO_UDP);
	f[11] ^= 0x40;
	sent += send_one(ch, f, n, 0);
	/* 9. Its own flow in a VLAN tag of its choosing: spoofed. */
	n = udp4_frame(f, "192.0.2.1", (uint16_t)dport, IPPROTO_UDP);
	memmove(f + 16, f + 12, n - 12);
	f[12] = 0x81;
	f[13] = 0x00;
	f[14] = 0x00;
	f[15] = 0x2a;
	sent += send_one(ch, f, n + 4, 0);
	/*
	 * 10. Over the transmit ring's size (4) in one burst: what it did not take is
	 * still ours, and counted as held until freed.
	 */
	for (unsigned int i = 0; i < 64; i++) {
		burst[i] = nc_mbuf_alloc(c);
		if (burst[i] == NULL) {
			printf("nc_mbuf_alloc: %s\n", nc_strerror(errno));
			return 1;
		}
		n = udp4_frame(rte_pktmbuf_mtod(burst[i], uint8_t *), "192.0.2.1", (uint16_t)dport,
			       IPPROTO_UDP);
		rte_pktmbuf_append(burst[i], (uint16_t)n);
	}
	/* The ring empty first (the worker sends what is there), so there is room for 4. */
	for (int i = 0; i < 200 && nc_channel_stats(ch, &st) == 0 && st.tx_count > 0; i++)
		usleep(10000);
	taken = nc_tx_burst(ch, burst, 64);
	held_after = nc_mbufs_held(c, NULL);
	nc_mbuf_free_bulk(c, burst + taken, 64 - taken);
	printf("burst taken %u held %" PRIu64 "\n", taken, held_after);
	/* Until the daemon has an outcome for every packet (2 s at most). */
	for (int i = 0; i < 200; i++) {
		if (nc_channel_stats(ch, &st) != 0 ||
		    st.tx + st.tx_dropped + st.tx_spoofed + st.tx_malformed + st.tx_no_route +
		    st.tx_no_neigh + st.tx_ring_full >= (uint64_t)sent + taken)
			break;
		usleep(10000);
	}
	printf("sent %d tx %" PRIu64 " spoofed %" PRIu64 " malformed %" PRIu64 " no_route %" PRIu64
	       " no_neigh %" PRIu64 " dropped %" PRIu64 " held %" PRIu64 "\n", sent, st.tx,
	       st.tx_spoofed, st.tx_malformed, st.tx_no_route, st.tx_no_neigh, st.tx_dropped,
	       nc_mbufs_held(c, NULL));
	/* The channel stays until stdin closes: the test reads its counters by reason. */
	fflush(stdout);
	while (getchar() != EOF)
		;
	nc_channel_destroy(ch);
	return 0;
}

/* Take count mbufs and keep them; report how many the quota let through. */
static __rte_noreturn void
hold(struct nc_client *c, struct nc_channel *ch, long count)
{
	struct rte_mbuf *m[32];
	long got = 0;
	uint64_t quota;

	for (int idle = 0; got < count && idle < 5000;) {
		uint16_t n = nc_rx_burst(ch, m, count - got < 32 ? (uint16_t)(count - got) : 32);

		if (n == 0 && errno == ENOBUFS)
			break;
		idle = n ? 0 : idle + 1;
		if (n == 0)
			usleep(1000);
		got += n;
	}
	printf("holding %ld", got);
	if (nc_mbufs_held(c, &quota) != (uint64_t)got)
		printf(" (library counts %" PRIu64 ")", nc_mbufs_held(c, NULL));
	if (got < count)
		printf(" quota %" PRIu64, quota);
	printf("\n");
	fflush(stdout);
	for (;;)
		pause();
}

static uint64_t
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

/* Is this frame UDP to dport, with a payload naming the flow that goes there? */
static int
soak_good(const uint8_t *f, size_t n, int dport, int base)
{
	size_t ihl, l4;
	char flow[24];
	unsigned int id;

	if (n < 14 + 20 || f[12] != 0x08 || f[13] != 0x00 || f[14 + 9] != 17)
		return 0;
	ihl = (f[14] & 0xf) * 4u;
	l4 = 14 + ihl;
	if (n < l4 + 8 || (dport != 0 && (f[l4 + 2] << 8 | f[l4 + 3]) != dport))
		return 0;
	dport = f[l4 + 2] << 8 | f[l4 + 3];
	n -= l4 + 8;
	if (n >= sizeof(flow))
		n = sizeof(flow) - 1;
	memcpy(flow, f + l4 + 8, n);
	flow[n] = '\0';
	return sscanf(flow, "flow=%u", &id) == 1 && (int)id + base == dport;
}

#define SOAK_HOLD 64

/* The soak mode (see the top): never returns. */
static void
soak(struct nc_client *c, struct nc_channel *ch, int dport, int base)
{
	struct rte_mbuf *held[SOAK_HOLD] = { NULL };
	uint64_t ok = 0, bad = 0, last = 0;
	unsigned int next = 0;

	for (;;) {
		struct rte_mbuf *m[32];
		uint16_t n;

		errno = 0;
		n = nc_rx_burst(ch, m, 32);
		if (n == 0 && errno == EPIPE)
			break;
		for (uint16_t i = 0; i < n; i++) {
			if (soak_good(rte_pktmbuf_mtod(m[i], uint8_t *), rte_pktmbuf_data_len(m[i]),
				      dport, base))
				ok++;
			else
				bad++;
			if (held[next] != NULL)
				nc_mbuf_free(c, held[next]);
			held[next] = m[i];
			next = (next + 1) % SOAK_HOLD;
		}
		if (n == 0)
			usleep(200);
		if (now_us() - last >= 50000) {
			printf("ok %lu misdelivered %lu\n", (unsigned long)ok, (unsigned long)bad);
			fflush(stdout);
			last = now_us();
		}
	}
	printf("ok %lu misdelivered %lu\n", (unsigned long)ok, (unsigned long)bad);
	for (unsigned int i = 0; i < SOAK_HOLD; i++)
		if (held[i] != NULL)
			nc_mbuf_free(c, held[i]);
	nc_channel_destroy(ch);
	nc_disconnect(c);
	exit(0);
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The drain mode (see the top). */
static int
drain(struct nc_client *c, const char *prefix, long n)
{
	struct nc_channel **ch = calloc((size_t)n, sizeof(*ch));

	if (ch == NULL || n <= 0)
		return 2;
	for (long i = 0; i < n; i++) {
		char name[NC_CHANNEL_NAME_SIZE];

		snprintf(name, sizeof(name), "%s%ld", prefix, i);
		ch[i] = nc_channel_attach(c, name);
		if (ch[i] == NULL) {
			printf("channel %s: %s\n", name, nc_strerror(errno));
			return 2;
		}
	}
	printf("attached %ld\n", n);
	fflush(stdout);
	for (;;)
		for (long i = 0; i < n; i++) {
			struct rte_mbuf *m[32];
			uint16_t k;

			errno = 0;
			k = nc_rx_burst(ch[i], m, 32);
			if (k == 0 && errno == EPIPE)
				return 0;
			nc_mbuf_free_bulk(c, m, k);
		}
}

/* The drain-iso mode (see the top). */
static int
drain_iso(struct nc_client *c, const char *prefix, long n)
{
	for (long i = 0; i < n; i++) {
		char name[NC_CHANNEL_NAME_SIZE];

		snprintf(name, sizeof(name), "%s%ld", prefix, i);
		if (nc_channel_attach(c, name) == NULL) {
			printf("channel %s: %s\n", name, nc_strerror(errno));
			return 2;
		}
	}
	printf("attached %ld\n", n);
	fflush(stdout);
	for (;;) {
		struct nc_buf b[32];
		uint16_t k;

		errno = 0;
		k = nc_client_rx_bufs(c, b, 32);
		if (k == 0 && errno == EPIPE)
			return 0;
		nc_bufs_release(c, b, k);
	}
}

/* The latency mode (see the top). */
static int
latency(struct nc_client *c, const char *name, int dport, long count)
{
	uint64_t *create = calloc((size_t)count, sizeof(uint64_t));
	uint64_t *first = calloc((size_t)count, sizeof(uint64_t));
	struct nc_rule rule = NC_SIZED(nc_rule);
	long done = 0;

	if (create == NULL || first == NULL || count <= 0)
		return 2;
	rule.proto = 17;
	rule.proto_mask = 0xff;
	rule.priority = 10;
	rule.dport = (struct nc_port){ (uint16_t)dport, (uint16_t)dport, NC_PORT_RANGE, 0 };
	for (long i = 0; i < count; i++) {
		uint64_t t0 = now_us(), t1, t2;
		struct nc_channel *ch = nc_channel_create(c, name, &rule, NULL);
		struct rte_mbuf *m[32];
		uint16_t n = 0;

		t1 = now_us();
		if (ch == NULL) {
			printf("channel %s: %s\n", name, nc_strerror(errno));
			return 2;
		}
		while ((n = nc_rx_burst(ch, m, 32)) == 0 && now_us() - t0 < 1000000)
			;
		t2 = now_us();
		nc_mbuf_free_bulk(c, m, n);
		nc_channel_destroy(ch);
		if (n > 0) {
			create[done] = t1 - t0;
			first[done++] = t2 - t0;
		}
	}
	if (done == 0) {
		printf("no packet in 1 s, %ld times\n", count);
		return 1;
	}
	qsort(create, (size_t)done, sizeof(uint64_t), cmp_u64);
	qsort(first, (size_t)done, sizeof(uint64_t), cmp_u64);
	printf("latency n %ld create_median_us %lu create_p99_us %lu first_median_us %lu "
	       "first_p99_us %lu\n", done, (unsigned long)create[done / 2],
	       (unsigned long)create[(done * 99) / 100], (unsigned long)first[done / 2],
	       (unsigned long)first[(done * 99) / 100]);
	free(create);
	free(first);
	return done == count ? 0 : 1;
}

/*
 * A NAT channel made with the library: UDP to DPORT goes on to TARGET:TPORT
 * (IPv4), with reverse mappings. It lives until stdin closes.
 */
static int
nat(struct nc_client *c, const char *name, int dport, const char *target, int tport)
{
	struct nc_channel_opts o = NC_SIZED(nc_channel_opts);
	struct nc_nat_opts n = NC_SIZED(nc_nat_opts);
	struct nc_rule rule = NC_SIZED(nc_rule);
	struct nc_channel *ch;
	char b;

	rule.family = NC_AF_INET;
	rule.proto = 17;
	rule.proto_mask = 0xff;
	rule.dport = (struct nc_port){ (uint16_t)dport, (uint16_t)dport, NC_PORT_RANGE, 0 };
	n.flags = NC_NAT_OPT_DST | NC_NAT_OPT_DPORT | NC_NAT_OPT_REVERSE;
	n.family = NC_AF_INET;
	n.dport = (uint16_t)tport;
	if (inet_pton(AF_INET, target, n.dst) != 1) {
		printf("%s: not an IPv4 address\n", target);
		return 2;
	}
	o.nat = &n;
	ch = nc_channel_create(c, name, &rule, &o);
	if (ch == NULL) {
		printf("channel %s: %s\n", name, nc_strerror(errno));
		return 2;
	}
	printf("channel %s: id %u\n", name, nc_channel_id(ch));
	fflush(stdout);
	while (read(0, &b, 1) > 0)
		;
	return nc_channel_destroy(ch) == 0 ? 0 : 1;
}

/*
 * What a client killed inside its rte_eal_init() leaves: DPDK's memory
 * hotplug lock, in the daemon's shared memory, held for ever.
 */
static int
hold_memory_lock(void)
{
	rte_mcfg_mem_read_lock();
	printf("locked\n");
	fflush(stdout);
	for (;;)
		pause();
	return 0;
}

int
main(int argc, char **argv)
{
	struct nc_rule rule = NC_SIZED(nc_rule);
	struct nc_channel *ch;
	struct nc_client *c;
	long count, got = 0, timeout = 5000;
	int dport, zerocopy;
	long waited_ms = 0;
	uint64_t idle_since = 0;

	/* The modes that run one function on a connection. */
	if ((argc == 6 && strcmp(argv[2], "latency") == 0) ||
	    (argc == 5 && strcmp(argv[2], "drain") == 0) ||
	    (argc == 5 && strcmp(argv[2], "drain-iso") == 0) ||
	    (argc == 7 && strcmp(argv[2], "nat") == 0) ||
	    (argc == 5 && strcmp(argv[2], "spoof") == 0) ||
	    (argc == 6 && strcmp(argv[2], "flood") == 0) ||
	    (argc == 3 && strcmp(argv[2], "lock") == 0)) {
		int ret;

		c = nc_connect(argv[1], strcmp(argv[2], "drain-iso") == 0 ? NC_CONNECT_ONE_RING :
							 NC_CONNECT_ZEROCOPY);
		if (c == NULL) {
			printf("nc_connect: %s\n", nc_strerror(errno));
			return 2;
		}
		if (strcmp(argv[2], "latency") == 0)
			ret = latency(c, argv[3], atoi(argv[4]), atol(argv[5]));
		else if (strcmp(argv[2], "drain") == 0)
			ret = drain(c, argv[3], atol(argv[4]));
		else if (strcmp(argv[2], "drain-iso") == 0)
			ret = drain_iso(c, argv[3], atol(argv[4]));
		else if (strcmp(argv[2], "nat") == 0)
			ret = nat(c, argv[3], atoi(argv[4]), argv[5], atoi(argv[6]));
		else if (strcmp(argv[2], "lock") == 0)
			ret = hold_memory_lock();
		else if (strcmp(argv[2], "flood") == 0)
			ret = flood(c, argv[3], (uint16_t)atoi(argv[4]), atof(argv[5]));
		else
			ret = spoof(c, argv[3], atoi(argv[4]));
		nc_disconnect(c);
		return ret;
	}
	if (argc < 7) {
		fprintf(stderr, "usage: %s SOCKET create|attach NAME DPORT COUNT copy|zerocopy|alloc|hold "
				"[TIMEOUT_MS]\n       %s SOCKET spoof NAME DPORT\n"
				"       %s SOCKET create|attach NAME DPORT BASE soak\n"
				"       %s SOCKET latency NAME DPORT COUNT\n"
				"       %s SOCKET drain|drain-iso PREFIX N\n"
				"       %s SOCKET nat NAME DPORT TARGET TPORT\n"
				"       %s SOCKET lock\n"
				"       %s SOCKET flood NAME SPORT SECONDS\n",
			argv[0], argv[0], argv[0], argv[0], argv[0], argv[0], argv[0], argv[0]);
		return 2;
	}
	dport = atoi(argv[4]);
	count = atol(argv[5]);
	zerocopy = strcmp(argv[6], "zerocopy") == 0 || strcmp(argv[6], "alloc") == 0 ||
		   strcmp(argv[6], "bulk") == 0;
	if (argc > 7)
		timeout = atol(argv[7]);
	c = nc_connect(argv[1], NC_CONNECT_ZEROCOPY);
	if (c == NULL) {
		printf("nc_connect: %s%s%s\n", nc_strerror(errno), NC_REASON(nc_last_reason()));
		return 2;
	}
	rule.proto = 17;
	rule.proto_mask = 0xff;
	rule.dport = (struct nc_port){ (uint16_t)dport, (uint16_t)dport, NC_PORT_RANGE, 0 };
	ch = strcmp(argv[2], "create") == 0 ? nc_channel_create(c, argv[3], &rule, NULL) :
					      nc_channel_attach(c, argv[3]);
	if (ch == NULL) {
		int err = errno;

		printf("channel %s: %s%s%s\n", argv[3], nc_strerror(err),
		       *nc_last_reason() ? ": " : "", nc_last_reason());
		nc_disconnect(c);
		return 2;
	}
	printf("channel %s: id %u\n", argv[3], nc_channel_id(ch));
	fflush(stdout);
	if (strcmp(argv[6], "hold") == 0)
		hold(c, ch, count);
	if (strcmp(argv[6], "soak") == 0)
		soak(c, ch, dport, (int)count);
	while (got < count) {
		static uint8_t buf[16384];
		struct rte_mbuf *m[32];
		int bad = 0;

		if (zerocopy) {
			uint16_t n = nc_rx_burst(ch, m, count - got < 32 ? (uint16_t)(count - got) : 32);

			for (uint16_t i = 0; i < n; i++) {
				bad |= udp_dport(rte_pktmbuf_mtod(m[i], uint8_t *),
						 rte_pktmbuf_data_len(m[i])) != dport;
				if (argv[6][0] != 'b')
					nc_mbuf_free(c, m[i]);
				if (argv[6][0] == 'a')
					nc_mbuf_free(c, nc_mbuf_alloc(c));
			}
			if (argv[6][0] == 'b')
				nc_mbuf_free_bulk(c, m, n);
			got += n;
			/* bulk polls without sleeping; its timeout counts from the last packet. */
			if (argv[6][0] == 'b') {
				uint64_t now = now_us();

				if (n > 0 || idle_since == 0)
					idle_since = now;
				else if (timeout >= 0 && now - idle_since >= (uint64_t)timeout * 1000)
					break;
			} else if (n == 0) {
				if (waited_ms++ >= timeout && timeout >= 0)
					break;
				usleep(1000);
			}
		} else {
			ssize_t n = nc_recv(ch, buf, sizeof(buf), (int)timeout);

			if (n < 0) {
				printf("nc_recv: %s\n", nc_strerror((int)n));
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
	printf("received %ld held %" PRIu64 "\n", got, nc_mbufs_held(c, NULL));
	/* Out before nc_disconnect(), which can wait for ever on a lock a dead client held. */
	fflush(stdout);
	nc_channel_destroy(ch);
	nc_disconnect(c);
	return got < count ? 1 : 0;
}
