/* SPDX-License-Identifier: BSD-3-Clause */
/* The daemon's state, shared by its modules. */
#ifndef NETCHANNELD_H
#define NETCHANNELD_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <jansson.h>

#include <rte_common.h>
#include <rte_errno.h>
#include <rte_ether.h>
#include <rte_log.h>
#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>

#include "config.h"
#include "nat.h"
#include "nc_proto.h"
#include "nc_trie.h"
#include "parse.h"

/* Log types netchanneld.main, .control, .worker, .nexthop; a file picks its NCD_LOGTYPE. */
extern int ncd_logtype, ncd_logtype_control, ncd_logtype_worker, ncd_logtype_nexthop;
#ifndef NCD_LOGTYPE
#define NCD_LOGTYPE ncd_logtype
#endif
#define NCD_LOG(level, fmt, ...) \
	rte_log(RTE_LOG_##level, NCD_LOGTYPE, "netchanneld: " fmt "\n", ##__VA_ARGS__)

#define NCD_BURST 32
#define NCD_MEMPOOL_OPS "lf_stack"     /* the mbuf pool's handler: see main.c */

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
	uint64_t nat;                  /* translated by a NAT channel (either way) and sent */
	uint64_t drop_nat_invalid;     /* NAT: not translatable (a fragment's ports, headers too long) */
	uint64_t drop_nat_no_route;    /* NAT: no route to the new destination out of its port */
	uint64_t drop_nat_no_neigh;    /* NAT: next hop not resolved */
	uint64_t drop_nat_table_full;  /* NAT: no room for the flow's reverse mapping */
	uint64_t drop_nat_conflict;    /* NAT: another flow holds the same reverse mapping */
	uint64_t drop_nat_tx;          /* NAT: the out port did not take it */
	/* Why packets went to the kernel (not outcomes: they also count above). */
	uint64_t miss;                 /* parsed, matched no channel */
	uint64_t verdict[NCD_PKT_NVERDICTS];
	/* The other direction: what the kernel sent, out of the port. */
	uint64_t kernel_rx, kernel_tx, kernel_tx_drop;
	/* What clients sent, out of the port (details per channel). */
	uint64_t client_tx, client_tx_drop;
	/* Offload (not outcomes): packets whose NIC mark named their channel, and marks ignored. */
	uint64_t mark_hits, mark_ignored;
	uint64_t nat_reverse;          /* of nat: replies translated back (not an outcome) */
} __rte_cache_aligned;

struct ncd_chan_stats {
	uint64_t hits, delivered, bytes, drop_ring_full, drop_queue_bytes, dropped;
	uint64_t hits_mark, hits_trie;     /* how hits were found: the NIC's mark, or the trie */
	uint64_t wakeups, wakeup_errors;   /* eventfd signals to a sleeping consumer */
	/* Transmit: every packet dequeued from the tx ring lands in exactly one. */
	uint64_t tx, tx_bytes;
	uint64_t tx_dropped;               /* the port did not take it */
	uint64_t tx_spoofed;               /* its source is not the channel's destination */
	uint64_t tx_malformed;             /* not a well-formed IP packet */
	uint64_t tx_no_route;              /* IP packet: no route out of this port */
	uint64_t tx_no_neigh;              /* IP packet: next hop unresolved */
	uint64_t tx_ring_full;             /* IP packet: resolved, but its tx ring was full */
	uint64_t tx_resolving;             /* IP packet: handed to the control thread (not an outcome) */
	/* NAT: every hit lands in nat or one nat_drop_*; replies translated back in nat_reverse. */
	uint64_t nat, nat_bytes;
	uint64_t nat_drop_invalid, nat_drop_no_route, nat_drop_no_neigh, nat_drop_table_full;
	uint64_t nat_drop_conflict, nat_drop_tx;
	uint64_t nat_reverse, nat_reverse_bytes, nat_reverse_drop_tx;
	uint64_t nat_flows;                /* reverse mappings it created */
} __rte_cache_aligned;

/* The counters by name, in the order they are shown (stats.c, cli.c). */
#define PORT_FIELDS(X) \
	X(rx) X(delivered) X(dropped_by_rule) X(to_kernel) X(drop_ring_full) \
	X(drop_queue_bytes) X(drop_exc_full) X(drop_no_exception) X(drop_too_big) X(nat) \
	X(drop_nat_invalid) X(drop_nat_no_route) X(drop_nat_no_neigh) X(drop_nat_table_full) \
	X(drop_nat_conflict) X(drop_nat_tx) X(miss) \
	X(kernel_rx) X(kernel_tx) X(kernel_tx_drop) X(client_tx) X(client_tx_drop) X(mark_hits) \
	X(mark_ignored) X(nat_reverse)
#define CHAN_FIELDS(X) X(hits) X(hits_mark) X(hits_trie) X(delivered) X(bytes) X(drop_ring_full) X(drop_queue_bytes) \
	X(dropped) X(wakeups) X(wakeup_errors) X(tx) X(tx_bytes) X(tx_dropped) X(tx_spoofed) \
	X(tx_malformed) X(tx_no_route) X(tx_no_neigh) X(tx_ring_full) X(tx_resolving) \
	X(nat) X(nat_bytes) X(nat_drop_invalid) X(nat_drop_no_route) X(nat_drop_no_neigh) \
	X(nat_drop_table_full) X(nat_drop_conflict) X(nat_drop_tx) X(nat_reverse) \
	X(nat_reverse_bytes) X(nat_reverse_drop_tx) X(nat_flows)

/* Next-hop cache of a port (nexthop.c): direct-mapped, seqlocked slots. */
#define NCD_NH_SLOTS 1024
#define NCD_NH_TTL_MS 5000             /* a resolved next hop is asked again after this */
#define NCD_NH_NEG_TTL_MS 100          /* an unresolved one, after this */

struct ncd_nh_slot {
	uint32_t seq;                  /* odd while the control thread writes the slot */
	uint8_t family;
	int8_t status;                 /* 1: mac is good; -ENETUNREACH, -EHOSTUNREACH */
	uint8_t mac[6];
	uint8_t addr[16];
	uint64_t expires;              /* TSC */
};

struct ncd_nh_cache {
	struct ncd_nh_slot slot[NCD_NH_SLOTS];
};

/*
 * rte_flow offload (offload.c). A flow rule marks a channel's packets with
 * its id and a generation of that id, so a mark set for an earlier channel of
 * the same id is recognised as stale.
 */
#define NCD_MARK_ID_BITS 17            /* 24-bit marks: what most NICs can set */
#define NCD_MARK_ID_MASK ((1u << NCD_MARK_ID_BITS) - 1)
#define NCD_MARK_GENS 127              /* generations 1..127 in bits 17-23 */

enum ncd_off_state {
	NCD_OFF_OFF,                   /* the port does not offload */
	NCD_OFF_SOFTWARE,              /* tried, or not possible: the trie alone */
	NCD_OFF_MARK,                  /* a MARK rule */
	NCD_OFF_MARK_QUEUE,            /* a MARK and QUEUE rule */
};

/* A channel's offload on one port. */
struct ncd_chan_offload {
	struct rte_flow *flow[2];      /* one per family (two for a rule without addresses) */
	uint8_t state;                 /* enum ncd_off_state */
	bool beaten;                   /* in software: a channel that wins over it overlaps it */
	char why[80];                  /* in software: the reason */
};

struct ncd_channel {
	/* What a worker reads of every packet it delivers, on the first cache line. */
	uint32_t id;
	enum ncd_action action;
	struct rte_ring *rx;
	struct nc_dir_entry *dir;
	uint64_t queue_bytes;
	uint64_t out_seen;             /* dir->bytes_out as a worker last read it (never above it) */
	char name[NC_NAME_SIZE];
	struct nc_trie_rule rule;
	int owner;                     /* NCD_OWNER_CONFIG, or the client's slot */
	int efd;                       /* eventfd that wakes a sleeping consumer, or -1 (none asked yet) */
	struct rte_ring *tx;           /* the client's transmit ring, or NULL */
	uint16_t port;                 /* the port it transmits on */
	unsigned int tx_worker;        /* the worker that empties tx */
	struct nc_trie_rule tx_rule;   /* what a sent packet's reversed key must match */
	uint64_t seq;                  /* creation order: among equal priorities the older wins */
	int32_t queue;                 /* offload: the rx queue to steer to, or -1 */
	bool consumer_gone;            /* its client died: its rings are drained from their tail */
	struct ncd_nat_conf nat;       /* a NAT channel's translation (action NCD_ACTION_NAT) */
	/* Per port: the mark its flow rule sets, 0 for none. Workers trust only this one. */
	uint32_t mark[NCD_MAX_PORTS];
	struct ncd_chan_offload off[NCD_MAX_PORTS];
};

#define NCD_OWNER_CONFIG (-1)
#define NCD_OWNER_OPERATOR (-2)        /* created with the CLI; attachable, like the config's */

struct ncd_port {
	uint16_t port_id;
	uint16_t exc_id;               /* exception device's port id */
	bool has_exc;                  /* exception device set up (not "none") */
	bool configured;               /* the port itself is set up: close it at exit */
	bool started, exc_started;
	struct rte_ether_addr mac;
	uint32_t exc_max_frame;        /* largest frame the exception device takes */
	unsigned int exc_owner;        /* worker that moves the kernel's frames to the wire */
	struct ncd_nh_cache *nh;       /* next hops of clients' IP packets */
	int nh_ifindex;                /* the kernel interface whose tables give them, or 0 */
	struct { uint64_t resolved, no_route, no_neigh; } nh_stats; /* control thread's */
	uint16_t ntxq;                 /* its tx queues: one per worker that polls it, or per worker */
	bool ip_csum_offload;          /* it computes IPv4 header checksums (NAT's packets) */
	bool marks;                    /* workers read marks: the port offloads (or the mock does) */
	bool flow_api;                 /* the PMD has rte_flow (or the mock stands in) */
	int mark_negotiated;           /* rte_eth_rx_metadata_negotiate: 1 yes, 0 refused, -1 n/a */
	struct ncd_mock *mock;         /* the offload mock, when --mark-mock is given */
	uint32_t flows;                /* flow rules in place */
	uint64_t flow_errors;          /* flow rules the PMD refused */
};

/*
 * NAT's reverse mappings (nat.c): one table for every worker, keyed by the
 * 5-tuple a reply has. Workers add and read without locks (rte_hash,
 * lock-free readers); the control thread expires idle mappings and those
 * of gone channels, and frees their slots after a grace period.
 */
struct ncd_nat_key {
	uint8_t family, proto;
	uint16_t sport, dport;         /* host order */
	uint8_t pad[2];
	uint8_t src[16], dst[16];
};

enum ncd_nat_flow_state { NCD_NATF_FREE, NCD_NATF_FILLING, NCD_NATF_LIVE, NCD_NATF_DEAD };

struct ncd_nat_flow {
	uint32_t state;                /* enum ncd_nat_flow_state */
	uint32_t chan;                 /* the channel that made it */
	uint64_t gen;                  /* and its generation */
	uint64_t last;                 /* TSC of its last packet, either way */
	struct ncd_nat_xlate rev;      /* what its replies get */
	uint16_t port;                 /* replies leave by the port the flow came in on */
	uint8_t mac[6];                /* to the flow's source MAC (its last hop) */
	struct ncd_nat_key key;
} __rte_cache_aligned;

struct ncd_nat_table {
	struct rte_hash *h;
	struct ncd_nat_flow *flows;    /* by the hash's key position */
	uint32_t nslots;               /* entries of flows[] */
	uint32_t capacity;             /* the config's nat.flows */
	uint64_t idle_cycles;          /* TSC cycles without a packet before a mapping goes */
	uint64_t next_scan;            /* TSC of the control thread's next expiry scan */
	uint32_t used;                 /* mappings now: workers add, the control thread subtracts */
	uint64_t expired, gone;        /* removed: idle, or their channel went */
};

/** Whether a mapping is whole and its channel still the one that made it (any thread). */
static inline bool
ncd_nat_flow_alive(struct ncd_channel *const *channels, const struct ncd_nat_flow *f)
{
	const struct ncd_channel *ch;

	if (__atomic_load_n(&f->state, __ATOMIC_ACQUIRE) != NCD_NATF_LIVE)
		return false;
	ch = __atomic_load_n(&channels[f->chan], __ATOMIC_ACQUIRE);
	return ch != NULL && ch->action == NCD_ACTION_NAT && ch->dir->generation == f->gen;
}

struct ncd_rxq {
	uint16_t port;                 /* index in ncd.ports[] */
	uint16_t queue;
};

#define NCD_NO_TXQ UINT16_MAX
/* hash.usr of a packet handed over for next-hop resolution: the channel, and whether NAT's. */
#define NCD_NH_NAT (1u << 31)

struct ncd_worker {
	unsigned int index;
	unsigned int lcore;
	struct ncd_rxq rx[NCD_MAX_PORTS * NCD_MAX_QUEUES];
	unsigned int nrx;
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
	struct rte_ring *nh_done;        /* control thread -> worker: IP packets, next hop resolved */
	uint32_t stats_gen;              /* the last ncd.stats_gen this worker acted on */
	uint64_t slots;             /* the client slots whose free and alloc rings it serves */
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
	struct ncd_channel **channels; /* [cfg.max_channels], by trie rule id */
	struct rte_hash *names;        /* channel name (NC_NAME_SIZE bytes, zero padded) -> id */
	struct ncd_chan_stats *ctl_cstats; /* [cfg.max_channels]: what the control thread counts */
	struct ncd_port_stats ctl_pstats[NCD_MAX_PORTS]; /* and per port (NAT's unresolved next hops) */
	struct ncd_nat_table nat;      /* NAT's reverse mappings */
	uint32_t nat_reverse;          /* NAT channels with reverse mappings: workers look replies up */
	struct rte_ring *nh_req;       /* workers -> control thread: IP packets to resolve */
	int nh_efd;                    /* signals the control thread that nh_req has work */
	struct nc_client_entry *clients; /* the client table (memzone NC_CLIENTS_MZ) */
	const struct rte_memzone *clients_mz;
	int owner_off;                 /* offset of the mbuf owner dynfield */
	int rx_tsc_off;                /* offset of the rx TSC dynfield, or -1: no stamps */
	/* Clients' free rings (NC_FREE_RING_FMT), by slot; workers drain the active ones. */
	struct rte_ring *free_rings[NC_MAX_CLIENTS];
	/* Their alloc rings (NC_ALLOC_RING_FMT); the same workers fill those that want_alloc. */
	struct rte_ring *alloc_rings[NC_MAX_CLIENTS];
	uint64_t slot_active;          /* bit per slot: workers serve its free and alloc rings */
	uint64_t mbufs_reclaimed;      /* freed for dead clients */
	uint64_t cache_flushed;        /* taken back from dead clients' mempool caches */
	char file_prefix[64];          /* EAL's, for clients */
	/* "clear port stats": workers zero their own counters of the ports in clear_mask. */
	uint32_t stats_gen;
	uint32_t clear_mask;
	uint32_t stats_release;        /* = stats_gen once the NIC's counters are reset too */
	/* Held by the control thread while it changes channels, and by telemetry readers. */
	pthread_mutex_t lock;
	volatile bool stop;
	uint64_t channel_seq;          /* the next channel's seq */
	const char *mark_mock;         /* --mark-mock's options, or NULL */
};

extern struct ncd ncd;

/** Clear a chain's owner marks: the daemon holds it again. */
static inline void
ncd_unmark(const struct ncd *d, struct rte_mbuf *m)
{
	for (; m != NULL; m = m->next)
		*RTE_MBUF_DYNFIELD(m, d->owner_off, uint32_t *) = 0;
}

/**
 * Drain a ring of mbufs back into the pool, unmarked. from_tail: its
 * consumer died, maybe in the middle of a dequeue: start from the tail.
 * @return how many
 */
unsigned int ncd_ring_drain(const struct ncd *d, struct rte_ring *r, bool from_tail);

/** One burst of ncd_ring_drain(): up to NCD_BURST mbufs unmarked, into the pool. @return them */
unsigned int ncd_ring_free_burst(const struct ncd *d, struct rte_ring *r);

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

/**
 * A deliver channel's eventfd, made on the first call (control thread): what
 * wakes its sleeping consumers. @return the fd, or -errno of eventfd().
 */
int ncd_channel_eventfd(struct ncd_channel *ch);

/** The id of the channel named name (control thread). @return it, or -1 for none. */
int32_t ncd_channel_find(const struct ncd *d, const char *name);

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

/** Set up the next-hop caches, the request ring and the netlink socket. @return 0 or -1. */
int ncd_nh_init(struct ncd *d);

/**
 * Look up dst's next-hop MAC in a port's cache (workers; no lock, no syscall).
 * @return 1 with mac set; -ENETUNREACH or -EHOSTUNREACH (recently failed);
 *   0 (not cached, expired, or being updated: ask the control thread).
 */
int ncd_nh_get(const struct ncd_nh_cache *c, uint8_t family, const uint8_t *addr, uint64_t now,
		uint8_t mac[6]);

/** Control thread: resolve the packets workers handed over and put them back on their channels. */
void ncd_nh_run(struct ncd *d);

/** Free what ncd_nh_init() set up, with any packet still waiting. */
void ncd_nh_close(struct ncd *d);

/** Zero a port's counters: every worker's (each zeroes its own, between bursts) and the NIC's. */
void ncd_port_stats_clear(struct ncd *d, unsigned int port);

/** Malformed, truncated, oversized or out-of-order control messages, over every connection. */
uint64_t ncd_control_bad_messages(void);

/** A connected client's pid and uid, by slot. */
void ncd_client_cred(int slot, pid_t *pid, uid_t *uid);

/*
 * Views of the daemon's state as JSON values (the caller owns them): the CLI
 * prints them, as JSON or as text, and telemetry converts them.
 */
json_t *ncd_view_port_info(const struct ncd *d, unsigned int port);
json_t *ncd_view_port_stats(const struct ncd *d, unsigned int port);
json_t *ncd_view_port_xstats(const struct ncd *d, unsigned int port);
json_t *ncd_view_channel(const struct ncd *d, uint32_t id);
json_t *ncd_view_channels(const struct ncd *d);
json_t *ncd_view_clients(const struct ncd *d);
json_t *ncd_view_classifier(const struct ncd *d);
json_t *ncd_view_mempool(const struct ncd *d);

/**
 * Run one CLI command line (cli_table.c has the commands).
 *
 * @param json  print JSON (one line) instead of text
 * @param priv  the caller may change things (root, or the daemon's user)
 * @param out   where the output, or the error message, goes
 * @return 0; 1 for quit; or -errno, after writing what was wrong to out
 */
int ncd_cli_exec(struct ncd *d, const char *line, bool json, bool priv, FILE *out);

/** Register the /netchannel/... telemetry endpoints. @return 0 or -1. */
int ncd_telemetry_init(struct ncd *d);

/** Make the telemetry endpoints answer with an error from now on (shutdown). */
void ncd_telemetry_close(struct ncd *d);

/** Serve the control socket once: wait at most timeout_ms for something to do. */
void ncd_control_poll(struct ncd *d, int timeout_ms);

/** Negotiate marks, and isolate a bifurcated port: before it is configured. @return 0 or -1. */
int ncd_offload_port_init(struct ncd *d, unsigned int port);

/** Install the flow rules of every channel, once the ports run. @return 0 or -1 (required). */
int ncd_offload_start(struct ncd *d);

/**
 * Before a rule goes into the classifier: take the flow rules away from
 * channels it will win over (their marks would claim its packets), and
 * check what required ports demand.
 * @return 0, or -ENOTSUP (logged) when a required port cannot offload it
 */
int ncd_offload_prepare(struct ncd *d, const struct nc_trie_rule *rule, const char *name);

/** Install a new channel's flow rules. @return 0, or -ENOTSUP when a required port refused. */
int ncd_offload_add(struct ncd *d, struct ncd_channel *ch);

/** Destroy a channel's flow rules (before it leaves the classifier). */
void ncd_offload_remove(struct ncd *d, struct ncd_channel *ch);

/** After a rule is gone: offload the channels it was winning over, where now possible. */
void ncd_offload_refresh(struct ncd *d, const struct nc_trie_rule *gone);

/** Destroy every flow rule and the mock (shutdown). */
void ncd_offload_close(struct ncd *d);

/** Create NAT's reverse-mapping table. @return 0 or -1. */
int ncd_nat_init(struct ncd *d);

/** Free it. */
void ncd_nat_close(struct ncd *d);

/** Control thread: remove idle mappings and those of gone channels (at most every 100 ms). */
void ncd_nat_expire(struct ncd *d, bool now);

/** NAT's table as a JSON value: capacity, live, expired... */
json_t *ncd_view_nat(const struct ncd *d);

/** Print the counters for a person. */
void ncd_stats_print(const struct ncd *d, FILE *f);

#endif
