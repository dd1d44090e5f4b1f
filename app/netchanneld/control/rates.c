/* SPDX-License-Identifier: BSD-3-Clause */
/* Rates from the last two samples of the counters (see rates.h). */
#include <stdlib.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_ethdev.h>

#include "channel/channel.h"
#include "control/rates.h"
#include "core/stats.h"
#include "datapath/datapath.h"
#include "ncd.h"
#include "port/port.h"

#define SAMPLE_MS 1000

/* What a port's rates come from. */
struct port_sample {
	uint64_t rx, delivered, to_kernel, drops, ipackets, opackets, ibytes, obytes;
};

/* A worker's loops, busy loops and packets. */
struct worker_sample {
	uint64_t loops, busy_loops, packets, slept_ns;
};

/* A channel's, and which channel it was (an id is reused). */
struct chan_sample {
	uint64_t gen;                  /* its directory entry's generation + 1; 0: none */
	uint64_t hits, delivered, bytes, drops, tx, tx_bytes, meter_red, tx_held;
};

static struct {
	uint64_t tsc[2];               /* when each sample was taken; [1] is the newer */
	struct port_sample port[2][NCD_MAX_PORTS];
	struct worker_sample worker[2][NCD_MAX_WORKERS];
	struct chan_sample *chan[2];   /* [max_channels] each */
	uint32_t nchan;
} rt;

int
ncd_rates_init(struct ncd *d)
{
	rt.nchan = d->cfg.max_channels;
	rt.chan[0] = calloc(rt.nchan, sizeof(*rt.chan[0]));
	rt.chan[1] = calloc(rt.nchan, sizeof(*rt.chan[1]));
	return rt.chan[0] != NULL && rt.chan[1] != NULL ? 0 : -1;
}

void
ncd_rates_free(void)
{
	free(rt.chan[0]);
	free(rt.chan[1]);
	memset(&rt, 0, sizeof(rt));
}

/* Every way a port drops a packet (the outcomes that are not delivered, nat or to_kernel). */
static uint64_t
port_drops(const struct ncd_port_stats *s)
{
	/* A fragment's outcome is reassembly's, and its datagram has one more: neither drops. */
	uint64_t in = s->rx + s->frag_datagrams, out = s->delivered + s->nat + s->to_kernel + s->frag_in;

	/* Workers count rx first and the outcome after: a sum may catch one between. */
	return in > out ? in - out : 0;
}

void
ncd_rates_tick(struct ncd *d)
{
	uint64_t now = rte_get_tsc_cycles();
	struct chan_sample *t;

	if (rt.chan[0] == NULL || (rt.tsc[1] != 0 &&
				   now - rt.tsc[1] < rte_get_tsc_hz() / 1000 * SAMPLE_MS))
		return;
	rt.tsc[0] = rt.tsc[1];
	rt.tsc[1] = now;
	memcpy(rt.port[0], rt.port[1], sizeof(rt.port[0]));
	memcpy(rt.worker[0], rt.worker[1], sizeof(rt.worker[0]));
	for (unsigned int i = 0; i < d->cfg.nworkers; i++) {
		const struct ncd_worker *w = &d->workers[i];

		rt.worker[1][i] = (struct worker_sample){
			.loops = __atomic_load_n(&w->loops, __ATOMIC_RELAXED),
			.slept_ns = __atomic_load_n(&w->slept_ns, __ATOMIC_RELAXED),
			.busy_loops = __atomic_load_n(&w->busy_loops, __ATOMIC_RELAXED),
			.packets = __atomic_load_n(&w->packets, __ATOMIC_RELAXED),
		};
	}
	t = rt.chan[0];
	rt.chan[0] = rt.chan[1];
	rt.chan[1] = t;
	for (unsigned int pi = 0; pi < d->cfg.nports; pi++) {
		struct port_sample *p = &rt.port[1][pi];
		struct ncd_port_stats s;
		struct rte_eth_stats e;

		ncd_port_stats_sum(d, pi, &s);
		memset(&e, 0, sizeof(e));
		rte_eth_stats_get(d->ports[pi].port_id, &e);
		*p = (struct port_sample){
			.rx = s.rx, .delivered = s.delivered, .to_kernel = s.to_kernel,
			.drops = port_drops(&s), .ipackets = e.ipackets, .opackets = e.opackets,
			.ibytes = e.ibytes, .obytes = e.obytes,
		};
	}
	for (uint32_t id = 0; id < rt.nchan; id++) {
		const struct ncd_channel *ch = d->channels[id];
		struct ncd_chan_stats s;

		if (ch == NULL) {
			rt.chan[1][id].gen = 0;
			continue;
		}
		ncd_chan_stats_sum(d, id, &s);
		rt.chan[1][id] = (struct chan_sample){
			.gen = ch->dir->generation + 1, .hits = s.hits, .delivered = s.delivered,
			.bytes = s.bytes,
			.drops = ncd_chan_drops(&s),
			.tx = s.tx, .tx_bytes = s.tx_bytes, .meter_red = s.meter_red,
			.tx_held = s.tx_held,
		};
	}
}

/* A counter's rate a second over the interval; 0 if it went back (cleared meanwhile). */
static json_t *
per_s(uint64_t old, uint64_t cur, double seconds, double scale)
{
	return json_integer((json_int_t)(cur >= old ? (double)(cur - old) * scale / seconds : 0));
}

static double
interval_s(void)
{
	return (double)(rt.tsc[1] - rt.tsc[0]) / (double)rte_get_tsc_hz();
}

json_t *
ncd_rates_port(unsigned int pi)
{
	const struct port_sample *a = &rt.port[0][pi], *b = &rt.port[1][pi];
	double t;

	if (rt.tsc[0] == 0)
		return json_null();
	t = interval_s();
	return json_pack("{s:f, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "interval_s", t,
			 "rx_pps", per_s(a->rx, b->rx, t, 1), "delivered_pps",
			 per_s(a->delivered, b->delivered, t, 1), "to_kernel_pps",
			 per_s(a->to_kernel, b->to_kernel, t, 1), "drop_pps",
			 per_s(a->drops, b->drops, t, 1), "nic_rx_pps",
			 per_s(a->ipackets, b->ipackets, t, 1), "nic_rx_bps",
			 per_s(a->ibytes, b->ibytes, t, 8), "nic_tx_pps",
			 per_s(a->opackets, b->opackets, t, 1), "nic_tx_bps",
			 per_s(a->obytes, b->obytes, t, 8));
}

json_t *
ncd_rates_worker(unsigned int i)
{
	const struct worker_sample *a = &rt.worker[0][i], *b = &rt.worker[1][i];
	uint64_t loops = b->loops - a->loops, busy = b->busy_loops - a->busy_loops;
	double t;

	if (rt.tsc[0] == 0)
		return json_null();
	t = interval_s();
	return json_pack("{s:f, s:o, s:o, s:f, s:f, s:f}", "interval_s", t,
			 "loops_per_s", per_s(a->loops, b->loops, t, 1), "pps",
			 per_s(a->packets, b->packets, t, 1),
			 "busy_share", loops ? (double)busy / (double)loops : 0.0,
			 "packets_per_busy_loop",
			 busy ? (double)(b->packets - a->packets) / (double)busy : 0.0,
			 "asleep_share", t > 0 ? RTE_MIN(1.0, (double)(b->slept_ns - a->slept_ns) /
							   (t * 1e9)) : 0.0);
}

json_t *
ncd_rates_channel(const struct ncd *d, uint32_t id)
{
	const struct chan_sample *a, *b;
	double t;

	if (rt.tsc[0] == 0 || id >= rt.nchan || d->channels[id] == NULL)
		return json_null();
	a = &rt.chan[0][id];
	b = &rt.chan[1][id];
	/* Both samples of this very channel: not of one its id had before. */
	if (a->gen == 0 || a->gen != b->gen || b->gen != d->channels[id]->dir->generation + 1)
		return json_null();
	t = interval_s();
	return json_pack("{s:f, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "interval_s", t,
			 "hits_pps", per_s(a->hits, b->hits, t, 1), "delivered_pps",
			 per_s(a->delivered, b->delivered, t, 1), "delivered_bps",
			 per_s(a->bytes, b->bytes, t, 8), "drop_pps", per_s(a->drops, b->drops, t, 1),
			 "tx_pps", per_s(a->tx, b->tx, t, 1), "tx_bps",
			 per_s(a->tx_bytes, b->tx_bytes, t, 8), "meter_red_pps",
			 per_s(a->meter_red, b->meter_red, t, 1), "tx_held_per_s",
			 per_s(a->tx_held, b->tx_held, t, 1));
}
