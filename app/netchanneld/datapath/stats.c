/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The counters: each worker keeps its own, and the control thread its
 * own; a reader sums them. Clearing asks every worker to zero its own
 * between bursts.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_pause.h>

#include "channel/channel.h"
#include "core/stats.h"
#include "datapath/datapath.h"
#include "ncd.h"
#include "port/port.h"

/*
 * Tries at a copy taken between two bursts (ncd_worker.burst_seq) before
 * taking one that may be a burst apart: a worker under a flood is rarely
 * between bursts, but a reader must not wait on it for long.
 */
#define SNAPSHOT_TRIES 4096

/*
 * Add up one block of 64-bit counters over the workers: the block that
 * block() returns for each worker, size bytes.
 * Each worker's copy is taken between its bursts, so that what it received
 * equals what it did with it (a seqcount read); relaxed loads, since 64-bit
 * loads do not tear.
 */
static void
sum_counters(const struct ncd *d, uint64_t *out, size_t size,
	     const uint64_t *(*block)(const struct ncd_worker *, uint32_t), uint32_t id)
{
	size_t nf = size / sizeof(uint64_t);
	uint64_t copy[nf];

	memset(out, 0, size);
	for (unsigned int w = 0; w < d->cfg.nworkers; w++) {
		const struct ncd_worker *wk = &d->workers[w];
		const uint64_t *src = block(wk, id);

		for (unsigned int t = 0; t < SNAPSHOT_TRIES; t++) {
			uint32_t s0 = __atomic_load_n(&wk->burst_seq, __ATOMIC_ACQUIRE);

			for (size_t f = 0; f < nf; f++)
				copy[f] = __atomic_load_n(&src[f], __ATOMIC_RELAXED);
			__atomic_thread_fence(__ATOMIC_ACQUIRE);
			if ((s0 & 1) == 0 && __atomic_load_n(&wk->burst_seq, __ATOMIC_RELAXED) == s0)
				break;
			rte_pause();
		}
		for (size_t f = 0; f < nf; f++)
			out[f] += copy[f];
	}
}

static const uint64_t *
port_block(const struct ncd_worker *w, uint32_t port)
{
	return (const uint64_t *)&w->pstats[port];
}

static const uint64_t *
chan_block(const struct ncd_worker *w, uint32_t id)
{
	return (const uint64_t *)&w->cstats[id];
}

void
ncd_port_stats_clear(struct ncd *d, unsigned int port)
{
	uint64_t deadline = rte_get_tsc_cycles() + rte_get_tsc_hz();
	uint32_t gen;

	d->clear_mask = 1u << port;
	gen = __atomic_add_fetch(&d->stats_gen, 1, __ATOMIC_RELEASE);
	/* Each worker zeroes its own counters and waits; wait for all (a second at most). */
	for (unsigned int w = 0; w < d->cfg.nworkers; w++)
		while (__atomic_load_n(&d->workers[w].stats_gen, __ATOMIC_ACQUIRE) != gen &&
		       rte_get_tsc_cycles() < deadline)
			rte_pause();
	/* No worker is in the rx path now: the NIC's counters can be reset without a race. */
	rte_eth_stats_reset(d->ports[port].port_id);
	if (d->ports[port].has_exc)
		rte_eth_stats_reset(d->ports[port].exc_id);
	memset(&d->ports[port].nh_stats, 0, sizeof(d->ports[port].nh_stats));
	memset(&d->ctl_pstats[port], 0, sizeof(d->ctl_pstats[port]));
	__atomic_store_n(&d->stats_release, gen, __ATOMIC_RELEASE);
}

void
ncd_port_stats_sum(const struct ncd *d, unsigned int port, struct ncd_port_stats *out)
{
	const uint64_t *ctl = (const uint64_t *)&d->ctl_pstats[port];

	sum_counters(d, (uint64_t *)out, sizeof(*out), port_block, port);
	/* And what the control thread counted (NAT packets whose next hop it resolved). */
	for (size_t f = 0; f < sizeof(*out) / sizeof(uint64_t); f++)
		((uint64_t *)out)[f] += ctl[f];
}

void
ncd_chan_stats_sum(const struct ncd *d, uint32_t id, struct ncd_chan_stats *out)
{
	const uint64_t *ctl = (const uint64_t *)&d->ctl_cstats[id];

	sum_counters(d, (uint64_t *)out, sizeof(*out), chan_block, id);
	/* And what the control thread counted (next-hop resolution outcomes). */
	for (size_t f = 0; f < sizeof(*out) / sizeof(uint64_t); f++)
		((uint64_t *)out)[f] += ctl[f];
}

void
ncd_stats_print(const struct ncd *d, FILE *f)
{
	for (unsigned int i = 0; i < d->cfg.nports; i++) {
		struct ncd_port_stats s;

		ncd_port_stats_sum(d, i, &s);
		fprintf(f, "port %s:", d->cfg.ports[i].name);
#define X(n) if (s.n) fprintf(f, " " #n "=%" PRIu64, s.n);
		PORT_FIELDS(X)
#undef X
		for (unsigned int v = 1; v < NCD_PKT_NVERDICTS; v++)
			if (s.verdict[v])
				fprintf(f, " %s=%" PRIu64, ncd_verdict_names[v], s.verdict[v]);
		fputc('\n', f);
	}
	for (unsigned int i = 0; i < d->cfg.max_channels; i++) {
		struct ncd_chan_stats s;

		if (d->channels[i] == NULL)
			continue;
		ncd_chan_stats_sum(d, i, &s);
		fprintf(f, "channel %s:", d->channels[i]->name);
#define X(n) fprintf(f, " " #n "=%" PRIu64, s.n);
		CHAN_FIELDS(X)
#undef X
		fputc('\n', f);
	}
}
