/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The daemon's state: one struct ncd that every module reaches, and the log
 * macros. Each module's calls are declared in its own header.
 */
#ifndef NCD_H
#define NCD_H

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include <rte_common.h>
#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_log.h>
#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>

#include "core/config.h"
#include "core/log.h"
#include "core/stats.h"
#include "nc_proto.h"

/* Log types netchanneld.main, .control, .worker, .nexthop; a file picks its NCD_LOGTYPE. */
extern int ncd_logtype, ncd_logtype_control, ncd_logtype_worker, ncd_logtype_nexthop;
#ifndef NCD_LOGTYPE
#define NCD_LOGTYPE ncd_logtype
#endif
#define NCD_LOG(level, fmt, ...) \
	rte_log(RTE_LOG_##level, NCD_LOGTYPE, "netchanneld: " fmt "\n", ##__VA_ARGS__)

/*
 * NCD_LOG() for what a user can make the daemon say again and again (a
 * refusal, a connection closed): NCD_LOG_BURST lines of each kind a second
 * for each uid, the rest counted and said by number (ncd_log_allow()).
 */
#define NCD_LOG_USER(level, uid, fmt, ...) do { \
	unsigned int ncd_sup_; \
	if (ncd_log_allow(fmt, (uid), &ncd_sup_)) { \
		if (ncd_sup_ > 0) \
			NCD_LOG(level, fmt " (and %u more like it suppressed)", ##__VA_ARGS__, \
				ncd_sup_); \
		else \
			NCD_LOG(level, fmt, ##__VA_ARGS__); \
	} \
} while (0)

/* The control thread's clock: milliseconds, from the TSC. */
static inline uint64_t
ncd_now_ms(void)
{
	return rte_get_tsc_cycles() / (rte_get_tsc_hz() / 1000);
}

#define NCD_MEMPOOL_OPS "lf_stack"     /* the mbuf pool's handler: see main.c */

struct ncd_worker;
struct ncd_police;
struct ncd_port;
struct ncd_nat_table;
struct ncd_channel;
struct nc_dir;
struct nc_trie;
struct rte_hash;
struct ncd_region;
struct ncd_txm;
struct rte_memzone;
struct rte_rcu_qsbr;
struct rte_ring;

struct ncd {
	struct ncd_config cfg;
	struct ncd_port *ports;         /* [NCD_MAX_PORTS]: the port module's table */
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
	struct ncd_police *police[NCD_MAX_PORTS]; /* each port's exception.police, or NULL */
	struct ncd_nat_table *nat;     /* NAT's reverse mappings: the nat module's table */
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
	/* Isolated clients' regions, by slot (NULL: none); its worker serves it while active. */
	struct ncd_region *regions[NC_MAX_CLIENTS];
	/*
	 * Each slot's user's transmit meter (control.limits' tx_pps, tx_bps), shared
	 * by the user's connections; NULL: none. Set before its rings are served,
	 * released after they no longer are.
	 */
	struct ncd_txm *slot_txm[NC_MAX_CLIENTS];
	uint32_t nmeters;              /* channels with a meter: none, and workers skip a look */
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
	volatile sig_atomic_t reload;  /* SIGHUP: the control thread reloads the config */
	uint64_t channel_seq;          /* the next channel's seq */
	const char *mark_mock;         /* --mark-mock's options, or NULL */
};

/* The one state, and the log types (core/log.c); main() gives it the modules' tables. */
extern struct ncd ncd;

/** Clear a chain's owner marks: the daemon holds it again. */
static inline void
ncd_unmark(const struct ncd *d, struct rte_mbuf *m)
{
	for (; m != NULL; m = m->next)
		*RTE_MBUF_DYNFIELD(m, d->owner_off, uint32_t *) = 0;
}

#endif
