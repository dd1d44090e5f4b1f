/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * NAT channels: the table of reverse mappings. What a worker does with a
 * burst's NAT packets is the datapath's (datapath/nat.h); the rewrite
 * itself, a pure function of the packet's bytes, is nat_rewrite.h.
 */
#ifndef NCD_NAT_H
#define NCD_NAT_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>
#include <rte_common.h>

#include "channel/channel.h"
#include "nat/nat_rewrite.h"

struct ncd;
struct rte_hash;
struct rte_mbuf;

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
	uint32_t *live;                /* [max_channels]: each channel's mappings now, as used */
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
	return ch != NULL && ch->action == NC_ACTION_NAT && ch->dir->generation == f->gen;
}

/* NAT's reverse mappings: ncd.nat points at them (main()). */
extern struct ncd_nat_table ncd_nat_table;

/** Create NAT's reverse-mapping table. @return 0 or -1. */
int ncd_nat_init(struct ncd *d);

/** nat.idle_timeout_ms: a mapping without a packet for ms goes (at start, and on reload). */
void ncd_nat_set_idle(struct ncd *d, uint32_t ms);

/** Free it. */
void ncd_nat_close(struct ncd *d);

/** Control thread: remove idle mappings and those of gone channels (at most every 100 ms). */
void ncd_nat_expire(struct ncd *d, bool now);

/** NAT's table as a JSON value: capacity, live, expired... */
json_t *ncd_view_nat(const struct ncd *d);

/** NAT's part in channels' lives: their mappings (ncd_channel_hooks_add()). */
extern const struct ncd_channel_hooks ncd_nat_channel_hooks;

#endif
