/* SPDX-License-Identifier: BSD-3-Clause */
/* Flow rule offload (rte_flow MARK, and QUEUE), and the mock that stands in for MARK in tests. */
#ifndef NCD_OFFLOAD_H
#define NCD_OFFLOAD_H

#include <stdbool.h>
#include <stdint.h>

#include "channel/channel.h"
#include "nc_trie.h"

struct ncd;

/*
 * rte_flow offload (offload.c). A flow rule marks a channel's packets with
 * its id and a generation of that id, so a mark set for an earlier channel of
 * the same id is recognised as stale.
 */
#define NCD_MARK_ID_BITS 17            /* 24-bit marks: what most NICs can set */
#define NCD_MARK_ID_MASK ((1u << NCD_MARK_ID_BITS) - 1)
#define NCD_MARK_GENS 127              /* generations 1..127 in bits 17-23 */

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

/** Offload's part in channels' lives: their flow rules (ncd_channel_hooks_add()). */
extern const struct ncd_channel_hooks ncd_offload_channel_hooks;

#endif
