/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Workers that sleep when there is nothing to do (workers[].idle). A
 * sleeping worker waits, level-triggered, on its rx queues' wake fds (the
 * ports' and the exception devices' it polls: ncd_rxq_wake_fd()), so a
 * packet wakes it; and for a time that starts at NCD_IDLE_NAP_MIN_US after
 * its last work and doubles up to NCD_IDLE_MAX_SLEEP_US, so that its
 * clients' transmit rings, what the control thread resolved for them, and
 * its fragments' timeouts are served soon after, and within the longest
 * sleep even when nothing arrives.
 * While asleep it is offline to RCU: a grace period does not wait for it.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/prctl.h>

#include <rte_cycles.h>
#include <rte_pause.h>
#include <rte_rcu_qsbr.h>

#define NCD_LOGTYPE ncd_logtype_worker
#include "datapath/datapath.h"
#include "datapath/idle.h"
#include "ncd.h"
#include "port/port.h"

const char *
ncd_idle_name(enum ncd_idle idle)
{
	return idle == NCD_IDLE_ADAPTIVE ? "adaptive" :
	       idle == NCD_IDLE_INTERRUPT ? "interrupt" : "poll";
}

/* The exception devices' remakes, summed: a change means their fds changed. */
static uint64_t
remakes(const struct ncd *d)
{
	uint64_t n = 0;

	for (unsigned int p = 0; p < d->cfg.nports; p++)
		n += __atomic_load_n(&d->ports[p].exc_remade, __ATOMIC_RELAXED);
	return n;
}

static int
add_fd(struct ncd_worker *w, int fd)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };

	return epoll_ctl(w->epfd, EPOLL_CTL_ADD, fd, &ev) != 0 && errno != EEXIST ? -1 : 0;
}

/* The rx queues of net_af_xdp ports: all of them, or this worker's (mine). */
static unsigned int
xsk_queues(const struct ncd *d, const struct ncd_worker *w, bool mine)
{
	unsigned int n = 0;

	for (unsigned int p = 0; p < d->cfg.nports; p++) {
		if (strncmp(d->cfg.ports[p].device, "net_af_xdp", 10) != 0)
			continue;
		if (!mine) {
			n += d->cfg.ports[p].rx_queues;
			continue;
		}
		for (unsigned int i = 0; i < w->nrx; i++)
			n += w->rx[i].port == p;
	}
	return n;
}

/*
 * Add a queue's wake fd to the worker's set: 0, or -1 if the queue has none.
 * A net_af_xdp queue the kernel would not name (no xsk_diag) is woken by the
 * process's AF_XDP sockets, all of them, when this worker polls every
 * net_af_xdp queue there is; otherwise another worker's busy queue would
 * keep it awake, and it has none.
 */
static int
add_queue(const struct ncd *d, struct ncd_worker *w, uint16_t port_id, uint16_t queue)
{
	int fd = ncd_rxq_wake_fd(port_id, queue), fds[NCD_MAX_PORTS * NCD_MAX_QUEUES], n;

	if (fd >= 0)
		return add_fd(w, fd);
	if (fd != NCD_WAKE_XSK_UNNAMED || xsk_queues(d, w, true) != xsk_queues(d, w, false))
		return -1;
	n = ncd_xsk_fds(fds, (int)RTE_DIM(fds));
	if (n <= 0 || (unsigned int)n != xsk_queues(d, w, false))
		return -1;
	for (int i = 0; i < n; i++)
		if (add_fd(w, fds[i]) != 0)
			return -1;
	return 0;
}

/*
 * The worker's epoll set, made (again): its ports' queues and, for each port
 * it polls, its queue of the exception device. what names the first queue
 * without a wake fd (NULL if every one has one). @return 0, or -1 (epoll)
 */
static int
wake_setup(struct ncd *d, struct ncd_worker *w, char *what, size_t len)
{
	if (w->epfd >= 0)
		close(w->epfd);
	w->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (w->epfd < 0)
		return -1;
	w->wake_gen = remakes(d);
	w->timed = false;
	if (what != NULL)
		what[0] = '\0';
	for (unsigned int i = 0; i < w->nrx; i++) {
		const struct ncd_rxq *q = &w->rx[i];

		if (add_queue(d, w, d->ports[q->port].port_id, q->queue) == 0)
			continue;
		if (!w->timed && what != NULL)
			snprintf(what, len, "port %s queue %u (%s)", d->cfg.ports[q->port].name,
				 q->queue, d->cfg.ports[q->port].device);
		w->timed = true;
	}
	for (unsigned int p = 0; p < d->cfg.nports; p++) {
		const struct ncd_port *port = &d->ports[p];
		bool polls = false;

		for (unsigned int i = 0; i < w->nrx; i++)
			polls |= w->rx[i].port == p;
		if (!polls || !port->has_exc || port->exc_down)
			continue;
		if (add_queue(d, w, port->exc_id, port->exc_txq[w->index]) == 0)
			continue;
		if (!w->timed && what != NULL)
			snprintf(what, len, "port %s's exception device %s", d->cfg.ports[p].name,
				 d->cfg.ports[p].exc_device);
		w->timed = true;
	}
	return 0;
}

int
ncd_workers_idle_init(struct ncd *d)
{
	for (unsigned int i = 0; i < d->cfg.nworkers; i++) {
		struct ncd_worker *w = &d->workers[i];
		char what[320];

		w->idle = d->cfg.workers[i].idle;
		w->epfd = -1;
		if (w->idle == NCD_IDLE_POLL)
			continue;
		if (wake_setup(d, w, what, sizeof(what)) != 0) {
			NCD_LOG(ERR, "worker %u: epoll_create1: %s", i, strerror(errno));
			return 1;
		}
		if (w->timed && w->idle == NCD_IDLE_INTERRUPT) {
			fprintf(stderr, "%s: workers[%u].idle: interrupt, but %s has no rx wake-up "
				"(net_af_xdp, net_tap and net_memif have one): use adaptive, which "
				"sleeps for a time there\n", d->cfg.path ? d->cfg.path :
				"<default config>", i, what);
			return 2;
		}
		if (w->timed)
			NCD_LOG(NOTICE, "worker %u: idle adaptive: %s has no rx wake-up, so its sleeps "
				"are timed (%u-%u us)", i, what, NCD_IDLE_NAP_MIN_US,
				NCD_IDLE_MAX_SLEEP_US);
	}
	return 0;
}

void
ncd_idle_start(struct ncd_worker *w)
{
	if (w->idle == NCD_IDLE_POLL)
		return;
	/* Its sleeps end when asked, not up to 50 us later (the default timer slack). */
	prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
	w->last_work = rte_get_tsc_cycles();
	w->nap_us = NCD_IDLE_NAP_MIN_US;
}

/* Its counters of work: what came in from its ports and its TAPs, and what clients sent. */
static uint64_t
activity(const struct ncd *d, const struct ncd_worker *w)
{
	uint64_t n = 0;

	for (unsigned int p = 0; p < d->cfg.nports; p++)
		n += w->pstats[p].rx + w->pstats[p].kernel_rx + w->pstats[p].client_tx +
		     w->pstats[p].client_tx_drop;
	return n;
}

void
ncd_idle_loop(struct ncd *d, struct ncd_worker *w)
{
	uint64_t now = rte_get_tsc_cycles(), us = rte_get_tsc_hz() / 1000000, a, t0;
	uint64_t spin = w->idle == NCD_IDLE_ADAPTIVE ? NCD_IDLE_SPIN_US : NCD_IDLE_INT_SPIN_US;
	struct epoll_event ev[8];
	int n = 0;

	a = activity(d, w);
	if (a != w->activity) {
		w->activity = a;
		w->last_work = now;
		w->nap_us = NCD_IDLE_NAP_MIN_US;
		return;
	}
	if (now - w->last_work < spin * us) {
		/* Backing off: the second half of the spin pauses between polls. */
		if (now - w->last_work > spin * us / 2)
			for (int i = 0; i < 64; i++)
				rte_pause();
		return;
	}
	if (w->epfd >= 0 && remakes(d) != w->wake_gen)
		wake_setup(d, w, NULL, 0);
	rte_rcu_qsbr_thread_offline(d->qsbr, w->index);
	t0 = rte_get_tsc_cycles();
	/*
	 * Short sleeps first, doubling to the longest: a packet wakes it at once
	 * either way, but a client's answer to what it was just given (its
	 * transmit ring) wakes nothing, and is served at the next wake-up.
	 */
	if (!w->timed) {
		struct timespec ts = { 0, (long)w->nap_us * 1000 };

		n = epoll_pwait2(w->epfd, ev, RTE_DIM(ev), &ts, NULL);
	} else {
		struct timespec ts = { 0, (long)w->nap_us * 1000 };

		nanosleep(&ts, NULL);
	}
	w->nap_us = RTE_MIN(w->nap_us * 2, (uint32_t)NCD_IDLE_MAX_SLEEP_US);
	now = rte_get_tsc_cycles();
	rte_rcu_qsbr_thread_online(d->qsbr, w->index);
	__atomic_store_n(&w->sleeps, w->sleeps + 1, __ATOMIC_RELAXED);
	if (n > 0)
		__atomic_store_n(&w->wakeups, w->wakeups + 1, __ATOMIC_RELAXED);
	__atomic_store_n(&w->slept_ns, w->slept_ns + (now - t0) * 1000 / us, __ATOMIC_RELAXED);
}
