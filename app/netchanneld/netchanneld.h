/* SPDX-License-Identifier: BSD-3-Clause */
/* The daemon's state, shared by its modules. */
#ifndef NETCHANNELD_H
#define NETCHANNELD_H

#include <stdbool.h>
#include <stdint.h>

#include <rte_common.h>
#include <rte_errno.h>
#include <rte_ether.h>
#include <rte_log.h>

#include "config.h"
#include "nc_proto.h"
#include "nc_trie.h"
#include "parse.h"

extern int ncd_logtype;
#define NCD_LOG(level, fmt, ...) \
	rte_log(RTE_LOG_##level, ncd_logtype, "netchanneld: " fmt "\n", ##__VA_ARGS__)

#define NCD_BURST 32

/* Per port, per worker: every packet lands in exactly one of the outcome counters. */
struct ncd_port_stats {
	uint64_t rx;                   /* received from the port */
	uint64_t delivered;            /* enqueued on a channel */
	uint64_t dropped_by_rule;      /* matched a drop channel */
	uint64_t to_kernel;            /* sent to the exception device */
	uint64_t drop_ring_full;       /* channel ring full */
	uint64_t drop_queue_bytes;     /* channel over its byte budget */
	uint64_t drop_exc_full;        /* exception device did not take it */
	uint64_t drop_no_exception;    /* exception device "none" */
	uint64_t drop_too_big;         /* larger than the exception device takes */
	/* Why packets went to the kernel (not outcomes: they also count above). */
	uint64_t miss;                 /* parsed, matched no channel */
	uint64_t verdict[NCD_PKT_NVERDICTS];
	/* The other direction: what the kernel sent, out of the port. */
	uint64_t kernel_rx, kernel_tx, kernel_tx_drop;
} __rte_cache_aligned;

struct ncd_chan_stats {
	uint64_t hits, delivered, bytes, drop_ring_full, drop_queue_bytes, dropped;
	uint64_t wakeups, wakeup_errors;   /* eventfd signals to a sleeping consumer */
} __rte_cache_aligned;

struct ncd_channel {
	uint32_t id;
	char name[NC_NAME_SIZE];
	enum ncd_action action;
	struct rte_ring *rx;
	struct nc_dir_entry *dir;
	uint64_t queue_bytes;
	struct nc_trie_rule rule;
	int owner;                     /* NCD_OWNER_CONFIG, or the client's slot */
	int efd;                       /* eventfd that wakes a sleeping consumer, or -1 */
};

#define NCD_OWNER_CONFIG (-1)

struct ncd_port {
	uint16_t port_id;
	uint16_t exc_id;               /* exception device's port id */
	bool has_exc;                  /* exception device set up (not "none") */
	bool configured;               /* the port itself is set up: close it at exit */
	bool started, exc_started;
	struct rte_ether_addr mac;
	uint32_t exc_max_frame;        /* largest frame the exception device takes */
	unsigned int exc_owner;        /* worker that moves the kernel's frames to the wire */
};

struct ncd_rxq {
	uint16_t port;                 /* index in ncd.ports[] */
	uint16_t queue;
};

struct ncd_worker {
	unsigned int index;
	unsigned int lcore;
	struct ncd_rxq rx[NCD_MAX_PORTS * NCD_MAX_QUEUES];
	unsigned int nrx;
	uint16_t exc_txq[NCD_MAX_PORTS]; /* this worker's tx queue on each exception device */
	struct ncd_port_stats pstats[NCD_MAX_PORTS];
	struct ncd_chan_stats *cstats;   /* [NCD_MAX_CHANNELS] */
} __rte_cache_aligned;

struct ncd {
	struct ncd_config cfg;
	struct ncd_port ports[NCD_MAX_PORTS];
	struct ncd_worker *workers;
	struct rte_mempool *pool;
	struct nc_trie *trie;
	struct rte_rcu_qsbr *qsbr;
	struct nc_dir *dir;
	const struct rte_memzone *dir_mz;
	struct ncd_channel *channels[NCD_MAX_CHANNELS]; /* by trie rule id */
	char file_prefix[64];          /* EAL's, for clients */
	volatile bool stop;
};

extern struct ncd ncd;

/** Create the channel directory, the classifier and the config's channels. @return 0 or -1. */
int ncd_channels_init(struct ncd *d);

/**
 * Add a channel while the workers run.
 * @return its id, or -EEXIST (the name is taken), -EBUSY (another channel has
 *   the same rule and priority), -ENOSPC, -ENOMEM, or the ring's error.
 */
int ncd_channel_add(struct ncd *d, const struct ncd_channel_conf *cc, int owner);

/** Remove a channel while the workers run: out of the classifier, a grace period, then freed. */
void ncd_channel_del(struct ncd *d, uint32_t id);

/** Drain every channel's ring, free them, the directory and the classifier. */
void ncd_channels_free(struct ncd *d);

/** Probe, configure and set up the ports and their exception devices. @return 0, or 2 (config), or 1. */
int ncd_ports_init(struct ncd *d);

/** Start every port and exception device. @return 0 or -1. */
int ncd_ports_start(struct ncd *d);

/** Stop and close every port and exception device. */
void ncd_ports_close(struct ncd *d);

/** A worker lcore's main loop (rte_eal_remote_launch). */
int ncd_worker_main(void *arg);

/** Sum every worker's counters of one port. */
void ncd_port_stats_sum(const struct ncd *d, unsigned int port, struct ncd_port_stats *out);

/** Sum every worker's counters of one channel. */
void ncd_chan_stats_sum(const struct ncd *d, uint32_t id, struct ncd_chan_stats *out);

/** Write the counters as JSON to path. @return 0 or -1. */
int ncd_stats_write_json(const struct ncd *d, const char *path);

/** Write the counters as one JSON object to f. */
void ncd_stats_json(const struct ncd *d, FILE *f);

/** Write the channels (name, id, action, owner, rule, ring occupancy) as a JSON array to f. */
void ncd_channels_json(const struct ncd *d, FILE *f);

/** Set up the control socket. @return 0 or -1 (printed). */
int ncd_control_init(struct ncd *d);

/** Serve the control socket until d->stop. */
void ncd_control_run(struct ncd *d);

/** Close every client (their channels go) and the socket. */
void ncd_control_close(struct ncd *d);

/** Print the counters for a person. */
void ncd_stats_print(const struct ncd *d, FILE *f);

#endif
