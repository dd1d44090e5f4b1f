/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nc-dump: a channel's packets to a pcap file, or summarised on stdout.
 *
 *   nc-dump [-s SOCKET] (--channel NAME | --dport N [--dst ADDR] [--proto P])
 *           [-w FILE | -q [-b USEC] [-L] [--touch]] [-c COUNT] [-t SECONDS] [--zero-copy]
 *
 * With --channel it attaches to a static channel of the daemon's config;
 * with --dport it creates a channel of its own for that flow, which the
 * daemon removes when nc-dump exits. It is an isolated client, unless it
 * measures latency (-L) or is told --zero-copy: those take a zero-copy
 * client. Only libnetchannel's API is used: copy from here.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <pcap/pcap.h>
#include <rte_cycles.h>
#include <rte_mbuf.h>
#include <rte_version.h>

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
	fprintf(f, "usage: nc-dump [-s SOCKET] (--channel NAME | --dport N [--dst ADDR] [--proto P])\n"
		   "               [-w FILE | -q [-b USEC] [-L] [--touch]] [-c COUNT] [-t SECONDS]\n"
		   "               [--zero-copy] [--meter PPS[,BURST]]\n"
		   "  -s, --socket    the daemon's control socket (default " NC_DEFAULT_SOCKET ")\n"
		   "      --channel   attach to this static channel\n"
		   "      --dport     create a channel for this destination port (udp by default)\n"
		   "      --dst       ... and this destination address or prefix\n"
		   "      --proto     ... and this protocol: tcp, udp, sctp, or a number\n"
		   "  -w, --write     write the packets to this pcap file; else print a line each\n"
		   "  -c, --count     stop after this many packets\n"
		   "  -t, --time      stop after this many seconds\n"
		   "  -q, --quiet     only count the packets (in bursts; for benchmarks)\n"
		   "  -b, --busy-poll with -q: poll an empty channel this many microseconds before\n"
		   "                  sleeping on its fd (default 0: sleep at once; each wake-up\n"
		   "                  costs the daemon's worker a system call)\n"
		   "  -L, --latency   with -q: the time from the daemon's rx burst to this dequeue,\n"
		   "                  median and 99th percentile (the daemon's config must set\n"
		   "                  rx_timestamps; a zero-copy client)\n"
		   "      --touch     with -q: read each frame's first 64 bytes, as a consumer that\n"
		   "                  looks at its headers would (a benchmark's fair share of work)\n"
		   "      --zero-copy a zero-copy client (DPDK secondary process: root, or\n"
		   "                  control.allow's zero_copy)\n"
		   "      --meter     with --dport: meter the channel at PPS packets a second, with a\n"
		   "                  burst of BURST (default a tenth of a second's); red packets\n"
		   "                  are dropped (the daemon counts them)\n"
		   "      --version   the version\n");
}

/* Latencies in LAT_STEP_NS steps up to LAT_BUCKETS of them; the rest in the last. */
#define LAT_STEP_NS 50
#define LAT_BUCKETS 200000

struct latency {
	uint64_t *bucket;
	uint64_t n;
	double ns_per_tsc;
};

/* A burst's packets, dequeued at TSC now. @return 0, or -1: the daemon does not stamp. */
static int
latency_add(struct latency *l, struct nc_client *c, struct rte_mbuf **m, uint16_t n, uint64_t now)
{
	for (uint16_t i = 0; i < n; i++) {
		uint64_t t = nc_mbuf_rx_tsc(c, m[i]), b;

		if (t == 0)
			return -1;
		b = now > t ? (uint64_t)((double)(now - t) * l->ns_per_tsc) / LAT_STEP_NS : 0;
		l->bucket[b < LAT_BUCKETS ? b : LAT_BUCKETS - 1]++;
		l->n++;
	}
	return 0;
}

/* The latency below which a fraction q of the packets fell, in microseconds (a step's top). */
static double
latency_quantile(const struct latency *l, double q)
{
	uint64_t want = (uint64_t)(q * (double)l->n), seen = 0;
	uint64_t b;

	for (b = 0; b < LAT_BUCKETS - 1; b++) {
		seen += l->bucket[b];
		if (seen > want)
			break;
	}
	return (double)((b + 1) * LAT_STEP_NS) / 1000.0;
}

static uint64_t
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

/* One line per packet: addresses, protocol, ports, length. */
static void
summarise(const uint8_t *f, uint32_t len)
{
	char a[INET6_ADDRSTRLEN], b[INET6_ADDRSTRLEN];
	unsigned int off = 14, type, proto, ports;

	if (len < 14)
		goto raw;
	type = (unsigned int)(f[12] << 8 | f[13]);
	while ((type == 0x8100 || type == 0x88a8) && len >= off + 4) {
		type = (unsigned int)(f[off + 2] << 8 | f[off + 3]);
		off += 4;
	}
	if (type == 0x0800 && len >= off + 20) {
		inet_ntop(AF_INET, f + off + 12, a, sizeof(a));
		inet_ntop(AF_INET, f + off + 16, b, sizeof(b));
		proto = f[off + 9];
		off += (f[off] & 0xfu) * 4;
	} else if (type == 0x86dd && len >= off + 40) {
		inet_ntop(AF_INET6, f + off + 8, a, sizeof(a));
		inet_ntop(AF_INET6, f + off + 24, b, sizeof(b));
		proto = f[off + 6];
		off += 40;
	} else {
		goto raw;
	}
	ports = (proto == 6 || proto == 17 || proto == 132) && len >= off + 4;
	if (ports)
		printf("%s.%u > %s.%u proto %u len %u\n", a, f[off] << 8 | f[off + 1], b,
		       f[off + 2] << 8 | f[off + 3], proto, len);
	else
		printf("%s > %s proto %u len %u\n", a, b, proto, len);
	return;
raw:
	printf("ethertype %#x len %u\n", len >= 14 ? (unsigned int)(f[12] << 8 | f[13]) : 0, len);
}

/* What the command line asks for. */
struct dump_opts {
	const char *sock, *channel, *dst, *proto, *out;
	long dport, count, seconds, busy_us;
	int quiet, want_latency, zero_copy, touch;
	struct nc_meter_opts meter;    /* --meter; rate 0: none */
};

/* The command line read: -1 to go on, or the exit code (help, version, a bad argument). */
static int
parse_args(int argc, char **argv, struct dump_opts *op)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "channel", required_argument, NULL, 'n' },
		{ "dport", required_argument, NULL, 'd' },
		{ "dst", required_argument, NULL, 'a' },
		{ "proto", required_argument, NULL, 'p' },
		{ "write", required_argument, NULL, 'w' },
		{ "count", required_argument, NULL, 'c' },
		{ "time", required_argument, NULL, 't' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "busy-poll", required_argument, NULL, 'b' },
		{ "latency", no_argument, NULL, 'L' },
		{ "zero-copy", no_argument, NULL, 'z' },
		{ "touch", no_argument, NULL, 'T' },
		{ "meter", required_argument, NULL, 'M' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	int o;

	while ((o = getopt_long(argc, argv, "s:w:c:t:qb:Lh", opts, NULL)) != -1) {
		switch (o) {
		case 's': op->sock = optarg; break;
		case 'n': op->channel = optarg; break;
		case 'd': op->dport = strtol(optarg, NULL, 0); break;
		case 'a': op->dst = optarg; break;
		case 'p': op->proto = optarg; break;
		case 'w': op->out = optarg; break;
		case 'c': op->count = strtol(optarg, NULL, 0); break;
		case 't': op->seconds = strtol(optarg, NULL, 0); break;
		case 'q': op->quiet = 1; break;
		case 'b': op->busy_us = strtol(optarg, NULL, 0); break;
		case 'L': op->want_latency = 1; break;
		case 'z': op->zero_copy = 1; break;
		case 'T': op->touch = 1; break;
		case 'M': {
			char *end = NULL;

			op->meter.size = sizeof(op->meter);
			op->meter.rate = strtoull(optarg, &end, 0);
			op->meter.burst = *end == ',' ? strtoull(end + 1, &end, 0) :
				op->meter.rate / 10 > 0 ? op->meter.rate / 10 : 1;
			if (*end != '\0' || op->meter.rate == 0 || op->meter.burst == 0) {
				fprintf(stderr, "nc-dump: --meter %s: PPS[,BURST], both above 0\n",
					optarg);
				return 2;
			}
			break;
		}
		case 'h': usage(stdout); return 0;
		case 'V': printf("%s (netchanneld) %s, %s\n", "nc-dump", nc_version(), rte_version()); return 0;
		default: usage(stderr); return 2;
		}
	}
	if ((op->channel == NULL) == (op->dport < 0) || op->dport > 65535 || op->count < 0 ||
	    op->seconds < 0 || (op->quiet && op->out != NULL) || op->busy_us < 0 ||
	    op->busy_us > 1000000 || (op->busy_us && !op->quiet) ||
	    (op->want_latency && !op->quiet) || (op->touch && !op->quiet)) {
		usage(stderr);
		return 2;
	}
	/* The rx timestamps are in the daemon's memory; a static channel is any client's. */
	op->zero_copy |= op->want_latency;
	return -1;
}

/* The static channel attached to, or a channel of our own for the flow. NULL: said why. */
static struct nc_channel *
open_channel(struct nc_client *c, const struct dump_opts *op, const struct nc_rule *rule)
{
	struct nc_channel *ch;

	if (op->channel != NULL) {
		ch = nc_channel_attach(c, op->channel);
	} else {
		struct nc_channel_opts o = { .size = sizeof(o), .meter = &op->meter };
		char name[NC_CHANNEL_NAME_SIZE];

		snprintf(name, sizeof(name), "nc-dump-%d", (int)getpid());
		ch = nc_channel_create(c, name, rule, op->meter.rate != 0 ? &o : NULL);
	}
	if (ch == NULL)
		fprintf(stderr, "nc-dump: channel: %s%s%s\n", nc_strerror(errno),
			NC_REASON(nc_last_reason()));
	return ch;
}

/* What --touch reads of each frame is summed here, so that the reads are made. */
static volatile uint64_t touched;

/* --touch: each frame's first 64 bytes (or all of a shorter one), read. */
static void
touch_burst(int zero_copy, struct rte_mbuf **m, const struct nc_buf *b, uint16_t n)
{
	uint64_t sum = 0;

	for (uint16_t i = 0; i < n; i++) {
		const uint8_t *p = zero_copy ? rte_pktmbuf_mtod(m[i], const uint8_t *) : b[i].data;
		uint32_t len = zero_copy ? m[i]->data_len : b[i].len;

		for (uint32_t k = 0; k < (len < 64 ? len : 64); k++)
			sum += p[k];
	}
	touched += sum;
}

/*
 * -q: count only, in zero-copy bursts or region buffers, with a sleep on the
 * channel's fd when idle, after busy_us of polling in vain (as SO_BUSY_POLL
 * does). The clock is read once every 64 rounds: in a VM a read of it can
 * cost more than a poll (half a busy nc-dump's time went to it).
 * @return 0, or -1 (the latency asked for, and the daemon does not stamp); the packets in *got
 */
static int
count_only(struct nc_client *c, struct nc_channel *ch, const struct dump_opts *op, time_t end,
	   struct latency *lat, long *got_out)
{
	uint64_t idle_since = 0, idle = 0;
	long got = 0;
	int ret = 0;

	for (unsigned long round = 0; !stop && (op->count == 0 || got < op->count); round++) {
		struct rte_mbuf *m[32];
		struct nc_buf b[32];
		uint16_t n, want = op->count && op->count - got < 32 ? (uint16_t)(op->count - got) : 32;

		if (round % 64 == 0 && end != 0 && time(NULL) >= end)
			break;
		errno = 0;
		n = op->zero_copy ? nc_rx_burst(ch, m, want) : nc_rx_bufs(ch, b, want);
		if (n > 0 && op->want_latency && latency_add(lat, c, m, n, rte_rdtsc()) != 0) {
			fprintf(stderr, "nc-dump: --latency: the daemon does not stamp packets "
					"(its config's rx_timestamps is off)\n");
			nc_mbuf_free_bulk(c, m, n);
			ret = -1;
			break;
		}
		if (n == 0 && errno != EPIPE && errno != ESTALE && op->busy_us > 0) {
			if (idle++ == 0)
				idle_since = now_us();
			if (idle % 64 != 0 || now_us() - idle_since < (uint64_t)op->busy_us)
				continue;
		}
		idle = 0;
		if (n == 0) {
			struct pollfd p = { .events = POLLIN };
			uint64_t v;

			if (errno == EPIPE || errno == ESTALE) {
				fprintf(stderr, "nc-dump: receive: %s\n", nc_strerror(errno));
				break;
			}
			p.fd = nc_channel_fd(ch);
			if (nc_channel_arm(ch) == 0 && poll(&p, 1, 100) > 0 && read(p.fd, &v, sizeof(v)) < 0)
				break;
			continue;
		}
		got += n;
		if (op->touch)
			touch_burst(op->zero_copy, m, b, n);
		if (op->zero_copy) {
			nc_mbuf_free_bulk(c, m, n);
		} else {
			/* A frame in several buffers is one packet: its last buffer counts it. */
			for (uint16_t i = 0; i < n; i++)
				got -= (b[i].flags & NC_BUF_F_MORE) != 0;
			nc_bufs_release(c, b, n);
		}
	}
	*got_out = got;
	return ret;
}

/* Each packet to the pcap file (dump), or a line on stdout. @return the packets */
static long
dump_each(struct nc_channel *ch, const struct dump_opts *op, time_t end, pcap_dumper_t *dump)
{
	long got = 0;

	while (!stop && (op->count == 0 || got < op->count) && (end == 0 || time(NULL) < end)) {
		static uint8_t buf[65536];
		/* Sleep at most 100 ms at a time, to notice signals and the deadline. */
		ssize_t n = nc_recv(ch, buf, sizeof(buf), 100);
		struct pcap_pkthdr h;

		if (n < 0) {
			if (n == -EAGAIN)
				continue;
			fprintf(stderr, "nc-dump: receive: %s\n", nc_strerror((int)n));
			break;
		}
		got++;
		if (dump == NULL) {
			summarise(buf, (uint32_t)n);
			continue;
		}
		gettimeofday(&h.ts, NULL);
		h.len = (uint32_t)n;
		h.caplen = (uint32_t)n < sizeof(buf) ? (uint32_t)n : sizeof(buf);
		pcap_dump((u_char *)dump, &h, buf);
	}
	return got;
}

int
main(int argc, char **argv)
{
	struct dump_opts op = { .proto = "udp", .dport = -1 };
	struct latency lat = { 0 };
	struct nc_rule rule = NC_SIZED(nc_rule);
	struct nc_channel *ch;
	struct nc_client *c;
	pcap_dumper_t *dump = NULL;
	pcap_t *pc = NULL;
	int failed = 0, ret;
	long got;
	time_t end;

	ret = parse_args(argc, argv, &op);
	if (ret >= 0)
		return ret;
	if (op.channel == NULL && nc_rule_flow(&rule, op.proto, op.dst, op.dport) != 0) {
		fprintf(stderr, "nc-dump: --proto %s --dst %s: not a protocol and an address\n",
			op.proto, op.dst ? op.dst : "any");
		return 2;
	}
	c = nc_connect(op.sock, op.zero_copy ? NC_CONNECT_ZEROCOPY : 0);
	if (c == NULL) {
		fprintf(stderr, "nc-dump: connect to %s: %s%s%s\n",
			op.sock ? op.sock : NC_DEFAULT_SOCKET, nc_strerror(errno),
			NC_REASON(nc_last_reason()));
		return 1;
	}
	ch = open_channel(c, &op, &rule);
	if (ch == NULL) {
		nc_disconnect(c);
		return 1;
	}
	if (op.out != NULL) {
		pc = pcap_open_dead(DLT_EN10MB, 65535);
		dump = pcap_dump_open(pc, op.out);
		if (dump == NULL) {
			fprintf(stderr, "nc-dump: %s: %s\n", op.out, pcap_geterr(pc));
			return 1;
		}
	}
	if (op.want_latency) {
		lat.bucket = calloc(LAT_BUCKETS, sizeof(*lat.bucket));
		lat.ns_per_tsc = 1e9 / (double)rte_get_tsc_hz();
		if (lat.bucket == NULL) {
			fprintf(stderr, "nc-dump: --latency: out of memory\n");
			failed = 1;
			stop = 1;
		}
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	end = op.seconds ? time(NULL) + op.seconds : 0;
	if (op.quiet)
		failed |= count_only(c, ch, &op, end, &lat, &got) != 0;
	else
		got = dump_each(ch, &op, end, dump);
	if (dump != NULL) {
		pcap_dump_close(dump);
		pcap_close(pc);
	}
	fprintf(stderr, "nc-dump: %ld packets\n", got);
	if (lat.n > 0)
		fprintf(stderr, "nc-dump: rx to dequeue: median %.2f us, p99 %.2f us (%" PRIu64
			" packets)\n", latency_quantile(&lat, 0.5), latency_quantile(&lat, 0.99), lat.n);
	free(lat.bucket);
	nc_channel_destroy(ch);
	nc_disconnect(c);
	return failed || (op.count != 0 && got < op.count) ? 1 : 0;
}
