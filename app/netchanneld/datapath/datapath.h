/* SPDX-License-Identifier: BSD-3-Clause */
/* The workers: what each polls, and its loop. */
#ifndef NCD_DATAPATH_H
#define NCD_DATAPATH_H

#include <stdint.h>

#include <rte_common.h>

#include "core/config.h"
#include "core/stats.h"

struct ncd;
struct ncd_channel_hooks;
struct ncd_channel;
struct rte_ring;

struct ncd_rxq {
	uint16_t port;                 /* index in ncd.ports[] */
	uint16_t queue;
};


struct ncd_worker {
	unsigned int index;
	unsigned int lcore;
	struct ncd_rxq rx[NCD_MAX_PORTS * NCD_MAX_QUEUES];
	unsigned int nrx;
	/* Its copies of the ports' maps (ncd_port.txq, .exc_txq), taken as it starts. */
	uint16_t exc_txq[NCD_MAX_PORTS]; /* this worker's tx queue on each exception device */
	uint16_t txq[NCD_MAX_PORTS];     /* its tx queue on each port, or NCD_NO_TXQ */
	struct ncd_port_stats pstats[NCD_MAX_PORTS];
	struct ncd_chan_stats *cstats;   /* [cfg.max_channels] */
	/*
	 * Channels whose tx ring this worker empties. The control thread edits
	 * the list while the worker reads it: entries are published before ntx
	 * grows, and a removed channel is freed only after a grace period.
	 */
	struct ncd_channel **txch;       /* [cfg.max_channels] */
	uint32_t ntx;
	struct rte_ring *nh_done;        /* control thread -> worker: IP packets, next hop resolved (ncd_nh_done()) */
	uint32_t stats_gen;              /* the last ncd.stats_gen this worker acted on */
	/*
	 * Odd while it counts a received burst, even between: a reader that sees
	 * the same even value before and after its copy has counters that add up
	 * (rx against the outcomes), not a burst half counted (stats.c).
	 */
	uint32_t burst_seq;
	uint64_t slots;             /* the client slots whose free and alloc rings it serves */
	/* Its IP reassembly (frag.c): the table, what it gave up, whether it ever held one. */
	struct rte_ip_frag_tbl *frag_tbl;
	struct rte_ip_frag_death_row *frag_dr;
	bool frag_used;
	uint32_t frag_seq;               /* fragments it took: their order, for the kernel (frag.c) */
	/*
	 * Its load, as VPP's vectors per call: loops, and loops whose rx bursts
	 * brought packets, and those packets. Only it writes them; relaxed.
	 */
	uint64_t loops, busy_loops, packets;
	/*
	 * workers[].idle (idle.c): how it sleeps, what it waits on, and what it
	 * did. Only it writes the counters; relaxed.
	 */
	enum ncd_idle idle;
	int epfd;                        /* its queues' wake fds (ncd_rxq_wake_fd()), or -1 */
	bool timed;                      /* some queue has no wake fd: adaptive sleeps are timed */
	uint64_t wake_gen;               /* the exception devices' remakes its epoll set knows */
	uint64_t last_work;              /* TSC of the last loop that did something */
	uint64_t activity;               /* its counters of work, summed, at the last loop */
	uint32_t nap_us;                 /* a timed sleep's length now: doubles up to the most */
	uint64_t sleeps, wakeups, slept_ns;
} __rte_cache_aligned;

/**
 * Allocate the workers as the config has them, with their per-channel
 * counters and transmit lists, and the channel table they read.
 * @return 0, or -1 (out of memory; ncd_workers_free() undoes what was done)
 */
int ncd_workers_init(struct ncd *d);

/** Free what ncd_workers_init() allocated. */
void ncd_workers_free(struct ncd *d);

/**
 * Before the workers start, on the control thread: each sleeping worker's
 * (workers[].idle adaptive or interrupt) epoll set of its queues' wake
 * fds. An interrupt worker with a queue that has none refuses the start.
 * @return 0, or 2 (the config asks what the PMDs cannot do; logged), or 1
 */
int ncd_workers_idle_init(struct ncd *d);

/** The name of an idle mode, as the config writes it. */
const char *ncd_idle_name(enum ncd_idle idle);

/** A worker lcore's main loop (rte_eal_remote_launch). */
int ncd_worker_main(void *arg);

/* The counters summed over the workers (datapath/stats.c). */

/** Sum every worker's counters of one port, and the control thread's. */
void ncd_port_stats_sum(const struct ncd *d, unsigned int port, struct ncd_port_stats *out);

/** Sum every worker's counters of one channel, and the control thread's. */
void ncd_chan_stats_sum(const struct ncd *d, uint32_t id, struct ncd_chan_stats *out);

/** Zero a port's counters: every worker's (each zeroes its own, between bursts) and the NIC's. */
void ncd_port_stats_clear(struct ncd *d, unsigned int port);

/** Print the counters for a person: one line per port, one per channel. */
void ncd_stats_print(const struct ncd *d, FILE *f);

/* The workers' part in channels' lives: their counters and tx lists (ncd_channel_hooks_add()). */
extern const struct ncd_channel_hooks ncd_dp_channel_hooks;

#endif
