/* SPDX-License-Identifier: BSD-3-Clause */
/* Packet capture by the daemon (see capture.h). */
#define _GNU_SOURCE /* pipe2, F_SETPIPE_SZ, pthread_timedjoin_np */
/* librte_pcapng is experimental in 22.11. */
#define ALLOW_EXPERIMENTAL_API

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <pcap/pcap.h>
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_pcapng.h>
#include <rte_rcu_qsbr.h>
#include <rte_ring.h>

#define NCD_LOGTYPE ncd_logtype_control
#include "channel/channel.h"
#include "core/config.h"
#include "datapath/capture.h"
#include "ncd.h"
#include "port/port.h"

#define CAPTURE_RING 1024              /* copies on their way to the writer */
#define CAPTURE_MBUFS 2047             /* the capture's pool: the ring's and the workers' bursts */
#define CAPTURE_MBUF_DATA 2048         /* a longer packet's copy is a chain of such */

struct ncd_capture {
	unsigned int slot;
	char what[80];                     /* "port wire0", "channel dns" */
	char filter_text[256];
	int port;                          /* a port capture's index, or -1 */
	uint16_t port_id;
	int32_t chan;                      /* a channel capture's id, or -1 */
	struct ncd_channel *ch;            /* and the channel it was started on */
	uint64_t gen;                      /* its directory entry's generation then */
	const struct rte_eth_rxtx_callback **rx_cb, **tx_cb;
	uint16_t nrx, ntx;
	struct rte_ring *ring;
	struct rte_mempool *mp;
	uint32_t snaplen;
	uint64_t limit;
	bool has_filter;
	struct bpf_program prog;
	/* Workers': copies reserved (past limit: refused), and settled (enqueued or lost). */
	uint64_t taken, settled, lost;
	/* The writer's. */
	rte_pcapng_t *png;
	int wfd;
	pthread_t thread;
	bool thread_started;
	uint64_t written, start_ns;
	uint64_t start_tsc;                /* the TSC at start_ns: packets' times from the TSC */
	double ns_per_tsc;
	int werr;                          /* errno of the write that failed, or 0 */
	volatile bool stop, finished;
};

static struct ncd_capture *caps[NCD_CAPTURE_MAX];

static uint64_t
wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * The Enhanced Packet Block's time, in the nanoseconds since the epoch that
 * the interface blocks declare: 22.11's librte_pcapng takes its TSC base
 * before EAL has measured the TSC, and writes times centuries off.
 */
static inline void
stamp(const struct ncd_capture *c, struct rte_mbuf *x, uint64_t tsc)
{
	uint64_t ns = c->start_ns + (uint64_t)((double)(tsc - c->start_tsc) * c->ns_per_tsc);
	uint32_t hi = (uint32_t)(ns >> 32), lo = (uint32_t)ns;
	uint8_t *epb = rte_pktmbuf_mtod(x, uint8_t *);

	/* Block type, length and interface id come first (the pcapng spec's layout). */
	memcpy(epb + 12, &hi, sizeof(hi));
	memcpy(epb + 16, &lo, sizeof(lo));
}

void
ncd_capture_take(struct ncd_capture *c, uint16_t port_id, uint16_t queue, struct rte_mbuf **m,
		 uint16_t n, int out)
{
	struct rte_mbuf *cp[NCD_BURST];
	uint64_t tsc = rte_get_tsc_cycles();
	unsigned int k = 0, reserved = 0;

	for (uint16_t i = 0; i < n; i++) {
		if (c->has_filter) {
			/* The filter reads the first segment: a chain's headers are there. */
			struct pcap_pkthdr h = { .caplen = m[i]->data_len, .len = m[i]->pkt_len };

			if (pcap_offline_filter(&c->prog, &h, rte_pktmbuf_mtod(m[i], const u_char *)) == 0)
				continue;
		}
		if (__atomic_load_n(&c->taken, __ATOMIC_RELAXED) >= c->limit ||
		    __atomic_fetch_add(&c->taken, 1, __ATOMIC_RELAXED) >= c->limit)
			break;
		reserved++;
		cp[k] = rte_pcapng_copy(port_id, queue, m[i], c->mp, c->snaplen, tsc,
					out ? RTE_PCAPNG_DIRECTION_OUT : RTE_PCAPNG_DIRECTION_IN);
		if (cp[k] != NULL)
			stamp(c, cp[k++], tsc);
		if (k == RTE_DIM(cp))
			break;
	}
	if (reserved == 0)
		return;
	unsigned int q = k ? rte_ring_mp_enqueue_burst(c->ring, (void **)cp, k, NULL) : 0;

	if (q < k)
		rte_pktmbuf_free_bulk(&cp[q], k - q);
	if (reserved > q)
		__atomic_fetch_add(&c->lost, reserved - q, __ATOMIC_RELAXED);
	/* Release: what the writer sees settled is on the ring. */
	__atomic_fetch_add(&c->settled, reserved, __ATOMIC_RELEASE);
}

static uint16_t
on_rx(uint16_t port_id, uint16_t queue, struct rte_mbuf **m, uint16_t n, uint16_t max,
      void *arg)
{
	(void)max;
	for (uint16_t i = 0; i < n; i += NCD_BURST)
		ncd_capture_take(arg, port_id, queue, m + i, RTE_MIN(n - i, NCD_BURST), 0);
	return n;
}

static uint16_t
on_tx(uint16_t port_id, uint16_t queue, struct rte_mbuf **m, uint16_t n, void *arg)
{
	for (uint16_t i = 0; i < n; i += NCD_BURST)
		ncd_capture_take(arg, port_id, queue, m + i, RTE_MIN(n - i, NCD_BURST), 1);
	return n;
}

/* The reader closed its end: a write would fail, so nothing more is wanted. */
static bool
reader_gone(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = 0 };

	return poll(&p, 1, ms) > 0 && (p.revents & (POLLERR | POLLHUP)) != 0;
}

/* The writer: copies from the ring to the pipe, until the count is reached or nobody reads. */
static void *
writer(void *arg)
{
	struct ncd_capture *c = arg;
	struct rte_mbuf *b[64];

	for (;;) {
		/* Acquire: pairs with the workers' release of settled. */
		uint64_t settled = __atomic_load_n(&c->settled, __ATOMIC_ACQUIRE);
		unsigned int n = rte_ring_sc_dequeue_burst(c->ring, (void **)b, RTE_DIM(b), NULL);

		if (n > 0) {
			if (rte_pcapng_write_packets(c->png, b, (uint16_t)n) < 0) {
				c->werr = errno != 0 ? errno : EIO;
				break;
			}
			/* One writer; show capture reads it from the control thread. */
			__atomic_store_n(&c->written, c->written + n, __ATOMIC_RELAXED);
			continue;
		}
		if (c->stop || (settled >= c->limit && rte_ring_empty(c->ring)))
			break;
		if (reader_gone(c->wfd, 5))
			break;
	}
	if (c->werr == 0) {
		uint64_t lost = __atomic_load_n(&c->lost, __ATOMIC_RELAXED);

		rte_pcapng_write_stats(c->png, c->port_id, c->what, c->start_ns, wall_ns(),
				       c->written + lost, lost);
	}
	/* Closes the pipe: the reader sees the end of the stream. */
	rte_pcapng_close(c->png);
	c->png = NULL;
	c->wfd = -1;
	__atomic_store_n(&c->finished, true, __ATOMIC_RELEASE);
	return NULL;
}

/* The channel a capture was started on is still there (not destroyed, its id not reused). */
static bool
same_channel(const struct ncd *d, const struct ncd_capture *c)
{
	return d->channels[c->chan] == c->ch && c->ch->dir->generation == c->gen;
}

/* Workers no longer reach c: callbacks removed or the channel's pointer cleared, then waited. */
static void
detach(struct ncd *d, struct ncd_capture *c)
{
	if (c->port >= 0) {
		for (uint16_t q = 0; q < c->nrx; q++)
			if (c->rx_cb[q] != NULL)
				rte_eth_remove_rx_callback(c->port_id, q, c->rx_cb[q]);
		for (uint16_t q = 0; q < c->ntx; q++)
			if (c->tx_cb[q] != NULL)
				rte_eth_remove_tx_callback(c->port_id, q, c->tx_cb[q]);
	} else if (c->chan >= 0 && same_channel(d, c)) {
		__atomic_store_n(&c->ch->capture, NULL, __ATOMIC_RELEASE);
	}
	/* Every worker passes a quiescent state between bursts: none is still in a callback. */
	rte_rcu_qsbr_synchronize(d->qsbr, RTE_QSBR_THRID_INVALID);
	if (c->port >= 0) {
		/* ethdev leaves a removed callback's memory to the application. */
		for (uint16_t q = 0; q < c->nrx; q++)
			rte_free((void *)(uintptr_t)c->rx_cb[q]);
		for (uint16_t q = 0; q < c->ntx; q++)
			rte_free((void *)(uintptr_t)c->tx_cb[q]);
	}
}

static void
capture_free(struct ncd *d, struct ncd_capture *c, bool log)
{
	struct rte_mbuf *m;

	detach(d, c);
	c->stop = true;
	if (c->thread_started) {
		struct timespec until;

		/* A writer stuck on a reader that stopped reading: write() is a cancellation point. */
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += 1;
		if (pthread_timedjoin_np(c->thread, NULL, &until) != 0) {
			pthread_cancel(c->thread);
			pthread_join(c->thread, NULL);
		}
	}
	if (c->png != NULL)
		rte_pcapng_close(c->png);
	else if (c->wfd >= 0)
		close(c->wfd);
	if (c->ring != NULL) {
		while (rte_ring_sc_dequeue(c->ring, (void **)&m) == 0)
			rte_pktmbuf_free(m);
		rte_ring_free(c->ring);
	}
	rte_mempool_free(c->mp);
	if (c->has_filter)
		pcap_freecode(&c->prog);
	if (log) {
		uint64_t lost = __atomic_load_n(&c->lost, __ATOMIC_RELAXED);

		NCD_LOG(NOTICE, "capture %u (%s%s%s) ended: %" PRIu64 " packets written, %" PRIu64
			" lost (capture pool or ring full)%s%s", c->slot, c->what,
			c->has_filter ? ", filter " : "", c->has_filter ? c->filter_text : "",
			c->written, lost, c->werr ? ", writing: " : "",
			c->werr ? strerror(c->werr) : "");
	}
	free(c->rx_cb);
	free(c->tx_cb);
	caps[c->slot] = NULL;
	free(c);
}

/* A pcap filter, compiled for Ethernet frames. */
static int
compile_filter(struct ncd_capture *c, const char *expr, char *err, size_t errlen)
{
	pcap_t *p = pcap_open_dead(DLT_EN10MB, (int)c->snaplen);
	int ret = 0;

	if (p == NULL) {
		snprintf(err, errlen, "capture: pcap_open_dead failed");
		return -ENOMEM;
	}
	if (pcap_compile(p, &c->prog, expr, 1, PCAP_NETMASK_UNKNOWN) != 0) {
		snprintf(err, errlen, "capture: filter '%s': %s", expr, pcap_geterr(p));
		ret = -EINVAL;
	} else {
		c->has_filter = true;
		snprintf(c->filter_text, sizeof(c->filter_text), "%s", expr);
	}
	pcap_close(p);
	return ret;
}

static int
attach_port(struct ncd_capture *c, char *err, size_t errlen)
{
	struct rte_eth_dev_info info;

	if (rte_eth_dev_info_get(c->port_id, &info) != 0) {
		snprintf(err, errlen, "capture: rte_eth_dev_info_get(%u) failed", c->port_id);
		return -ENODEV;
	}
	c->nrx = info.nb_rx_queues;
	c->ntx = info.nb_tx_queues;
	c->rx_cb = calloc(c->nrx + 1u, sizeof(*c->rx_cb));
	c->tx_cb = calloc(c->ntx + 1u, sizeof(*c->tx_cb));
	if (c->rx_cb == NULL || c->tx_cb == NULL)
		return -ENOMEM;
	for (uint16_t q = 0; q < c->nrx; q++)
		if ((c->rx_cb[q] = rte_eth_add_rx_callback(c->port_id, q, on_rx, c)) == NULL)
			goto fail;
	for (uint16_t q = 0; q < c->ntx; q++)
		if ((c->tx_cb[q] = rte_eth_add_tx_callback(c->port_id, q, on_tx, c)) == NULL)
			goto fail;
	return 0;
fail:
	snprintf(err, errlen, "capture: rte_eth_add_rx/tx_callback(port %u): %s", c->port_id,
		 rte_strerror(rte_errno));
	return -ENOTSUP;
}

int
ncd_capture_start(struct ncd *d, const struct ncd_capture_req *req, char *err, size_t errlen,
		  int *fd, json_t **res)
{
	struct ncd_capture *c;
	char name[RTE_MEMPOOL_NAMESIZE];
	int pfd[2] = { -1, -1 }, ret;
	unsigned int slot;

	for (slot = 0; slot < NCD_CAPTURE_MAX && caps[slot] != NULL; slot++)
		;
	if (slot == NCD_CAPTURE_MAX) {
		snprintf(err, errlen, "capture: %d captures are running already", NCD_CAPTURE_MAX);
		return -EBUSY;
	}
	if (req->channel >= 0 && d->channels[req->channel]->capture != NULL) {
		snprintf(err, errlen, "capture: channel %s has a capture running already",
			 d->channels[req->channel]->name);
		return -EBUSY;
	}
	c = calloc(1, sizeof(*c));
	if (c == NULL)
		return -ENOMEM;
	caps[slot] = c;
	c->slot = slot;
	c->wfd = -1;
	c->port = req->port;
	c->chan = req->channel;
	c->limit = req->count;
	c->snaplen = req->snaplen;
	c->start_ns = wall_ns();
	c->start_tsc = rte_get_tsc_cycles();
	c->ns_per_tsc = 1e9 / (double)rte_get_tsc_hz();
	if (c->port >= 0) {
		c->port_id = d->ports[c->port].port_id;
		snprintf(c->what, sizeof(c->what), "port %s", d->cfg.ports[c->port].name);
	} else {
		c->ch = d->channels[c->chan];
		c->gen = c->ch->dir->generation;
		c->port_id = d->ports[c->ch->port].port_id;
		snprintf(c->what, sizeof(c->what), "channel %s", c->ch->name);
	}
	ret = req->filter != NULL ? compile_filter(c, req->filter, err, errlen) : 0;
	if (ret != 0)
		goto fail;
	ret = -ENOMEM;
	snprintf(name, sizeof(name), "ncd_cap%u", slot);
	c->mp = rte_pktmbuf_pool_create(name, CAPTURE_MBUFS, 0, 0,
					rte_pcapng_mbuf_size(CAPTURE_MBUF_DATA), SOCKET_ID_ANY);
	c->ring = rte_ring_create(name, CAPTURE_RING, SOCKET_ID_ANY, RING_F_SC_DEQ);
	if (c->mp == NULL || c->ring == NULL) {
		snprintf(err, errlen, "capture: its pool or ring: %s", rte_strerror(rte_errno));
		goto fail;
	}
	/* The writer blocks on a slow reader; the workers and this thread never do. */
	if (pipe2(pfd, O_CLOEXEC) != 0) {
		ret = -errno;
		snprintf(err, errlen, "capture: pipe2: %s", strerror(errno));
		goto fail;
	}
	c->wfd = pfd[1];
	fcntl(c->wfd, F_SETPIPE_SZ, 1 << 20);
	c->png = rte_pcapng_fdopen(c->wfd, NULL, NULL, "netchanneld " NC_PROJECT_VERSION, c->what);
	if (c->png == NULL) {
		snprintf(err, errlen, "capture: rte_pcapng_fdopen: %s", rte_strerror(rte_errno));
		goto fail;
	}
	/*
	 * The writer learns of a reader gone from EPIPE: SIGPIPE, which would end the
	 * daemon, stays blocked in its thread (the mask is inherited).
	 */
	sigset_t pipe_sig, old;

	sigemptyset(&pipe_sig);
	sigaddset(&pipe_sig, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_sig, &old);
	c->thread_started = pthread_create(&c->thread, NULL, writer, c) == 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!c->thread_started) {
		snprintf(err, errlen, "capture: pthread_create failed");
		goto fail;
	}
	rte_thread_setname(c->thread, "ncd-capture");
	if (c->port >= 0) {
		ret = attach_port(c, err, errlen);
		if (ret != 0)
			goto fail;
	} else {
		/* Release: a worker that sees the pointer sees the capture whole. */
		__atomic_store_n(&c->ch->capture, c, __ATOMIC_RELEASE);
	}
	*fd = pfd[0];
	*res = json_pack("{s:i, s:s, s:I, s:i, s:s?}", "capture", (int)slot, "what", c->what,
			 "count", (json_int_t)c->limit, "snaplen", (int)c->snaplen, "filter",
			 c->has_filter ? c->filter_text : NULL);
	NCD_LOG(NOTICE, "capture %u (%s%s%s): %" PRIu64 " packets, snaplen %u", slot, c->what,
		c->has_filter ? ", filter " : "", c->has_filter ? c->filter_text : "", c->limit,
		c->snaplen);
	return 0;
fail:
	if (pfd[0] >= 0)
		close(pfd[0]);
	capture_free(d, c, false);
	return ret;
}

void
ncd_capture_reap(struct ncd *d)
{
	for (unsigned int i = 0; i < NCD_CAPTURE_MAX; i++) {
		struct ncd_capture *c = caps[i];

		if (c == NULL)
			continue;
		/* A channel destroyed (or its id reused): its capture has nothing more to see. */
		if (c->chan >= 0 && !same_channel(d, c))
			c->stop = true;
		if (__atomic_load_n(&c->finished, __ATOMIC_ACQUIRE))
			capture_free(d, c, true);
	}
}

void
ncd_capture_close_all(struct ncd *d)
{
	for (unsigned int i = 0; i < NCD_CAPTURE_MAX; i++)
		if (caps[i] != NULL)
			capture_free(d, caps[i], true);
}

json_t *
ncd_capture_view(void)
{
	json_t *a = json_array();

	for (unsigned int i = 0; i < NCD_CAPTURE_MAX; i++) {
		const struct ncd_capture *c = caps[i];

		if (c == NULL)
			continue;
		uint64_t taken = __atomic_load_n(&c->taken, __ATOMIC_RELAXED);
		uint64_t written = __atomic_load_n(&c->written, __ATOMIC_RELAXED);
		uint64_t lost = __atomic_load_n(&c->lost, __ATOMIC_RELAXED);

		json_array_append_new(a, json_pack("{s:i, s:s, s:s?, s:I, s:I, s:I, s:I}", "capture",
						   (int)i, "what", c->what, "filter",
						   c->has_filter ? c->filter_text : NULL,
						   "count", (json_int_t)c->limit,
						   "taken", (json_int_t)RTE_MIN(taken, c->limit),
						   "written", (json_int_t)written,
						   "lost", (json_int_t)lost));
	}
	return a;
}
