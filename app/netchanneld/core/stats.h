/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The daemon's counters: per port and per channel, kept by each worker on
 * its own cache lines and by the control thread, summed when read.
 */
#ifndef NCD_CORE_STATS_H
#define NCD_CORE_STATS_H

#include <stdint.h>
#include <stdio.h>

#include <rte_common.h>

#include "packet/parse.h"

struct ncd;

/* Per port, per worker: every packet lands in exactly one of the outcome counters. */
struct ncd_port_stats {
	uint64_t rx;                   /* received from the port */
	uint64_t delivered;            /* enqueued on a channel */
	uint64_t dropped_by_rule;      /* matched a drop channel */
	uint64_t to_kernel;            /* sent to the exception device */
	uint64_t drop_ring_full;       /* channel ring full */
	uint64_t drop_queue_bytes;     /* channel over its byte budget */
	uint64_t drop_no_buf;          /* isolated client: every buffer held, or the frame too long */
	uint64_t drop_exc_full;        /* exception device did not take it */
	uint64_t drop_exc_down;        /* exception device gone, being made again */
	uint64_t drop_no_exception;    /* exception device "none" */
	uint64_t drop_too_big;         /* larger than the exception device takes */
	uint64_t nat;                  /* translated by a NAT channel (either way) and sent */
	uint64_t drop_nat_invalid;     /* NAT: not translatable (a fragment's ports, headers too long) */
	uint64_t drop_nat_no_route;    /* NAT: no route to the new destination out of its port */
	uint64_t drop_nat_no_neigh;    /* NAT: next hop not resolved */
	uint64_t drop_nat_table_full;  /* NAT: no room for the flow's reverse mapping */
	uint64_t drop_nat_conflict;    /* NAT: another flow holds the same reverse mapping */
	uint64_t drop_nat_tx;          /* NAT: the out port did not take it */
	uint64_t frag_in;              /* a fragment, taken by IP reassembly */
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
	/*
	 * Reassembly (frag.c): datagrams it made, which are classified as packets
	 * of their own (rx + frag_datagrams = the outcomes); the fragments it gave
	 * up, by reason; the frames it split datagrams into, for the kernel or NAT.
	 */
	uint64_t frag_datagrams;
	uint64_t frag_drop_table_full, frag_drop_timeout, frag_drop_overlap, frag_drop_too_big;
	uint64_t frag_drop_unsupported;
	uint64_t frag_out;
} __rte_cache_aligned;

struct ncd_chan_stats {
	/*
	 * What every delivered packet writes, on the first cache line: with many
	 * channels each line a packet touches is a store that misses, and the
	 * region's lock (a full fence) waits for those.
	 */
	uint64_t hits;
	uint64_t hits_mark, hits_trie;     /* how hits were found: the NIC's mark, or the trie */
	uint64_t delivered, bytes, drop_ring_full, dropped;
	uint64_t drop_no_buf;              /* isolated client: it holds every buffer of its region */
	uint64_t drop_queue_bytes;
	uint64_t wakeups, wakeup_errors;   /* eventfd signals to a sleeping consumer */
	/* Transmit: every packet dequeued from the tx ring lands in exactly one. */
	uint64_t tx, tx_bytes;
	uint64_t tx_dropped;               /* the port did not take it */
	uint64_t tx_spoofed;               /* not its own to send: the sum of the reasons below */
	uint64_t tx_spoofed_mac;           /* a frame whose source MAC is not the port's */
	uint64_t tx_spoofed_vlan;          /* a frame with a VLAN tag */
	uint64_t tx_spoofed_addr;          /* from an address not the host's */
	uint64_t tx_spoofed_flow;          /* not the reverse of the channel's flows (proto, dst, ports) */
	uint64_t tx_spoofed_not_ip;        /* ARP and the like: the kernel's to send */
	uint64_t tx_malformed;             /* not a well-formed IP packet */
	uint64_t tx_too_big;               /* its IP packet is longer than the port's MTU */
	uint64_t tx_source_route;          /* IPv4 LSRR or SSRR option, IPv6 routing header 0 */
	uint64_t tx_no_route;              /* IP packet: no route out of this port */
	uint64_t tx_no_neigh;              /* IP packet: next hop unresolved */
	uint64_t tx_ring_full;             /* IP packet: resolved, but its tx ring was full */
	uint64_t tx_resolving;             /* IP packet: handed to the control thread (not an outcome) */
	/* NAT: every hit lands in nat or one nat_drop_*; replies translated back in nat_reverse. */
	uint64_t nat, nat_bytes;
	uint64_t nat_drop_invalid, nat_drop_no_route, nat_drop_no_neigh, nat_drop_table_full;
	uint64_t nat_drop_channel_full;    /* new flow: the channel holds nat.flows_per_channel */
	uint64_t nat_drop_conflict, nat_drop_tx;
	uint64_t nat_reverse, nat_reverse_bytes, nat_reverse_drop_tx;
	uint64_t nat_flows;                /* reverse mappings it created */
} __rte_cache_aligned;

/* The counters by name, in the order they are shown (stats.c, views.c). */
#define PORT_FIELDS(X) \
	X(rx) X(delivered) X(dropped_by_rule) X(to_kernel) X(drop_ring_full) \
	X(drop_queue_bytes) X(drop_no_buf) X(drop_exc_full) X(drop_exc_down) X(drop_no_exception) \
	X(drop_too_big) X(nat) \
	X(drop_nat_invalid) X(drop_nat_no_route) X(drop_nat_no_neigh) X(drop_nat_table_full) \
	X(drop_nat_conflict) X(drop_nat_tx) X(frag_in) X(miss) \
	X(kernel_rx) X(kernel_tx) X(kernel_tx_drop) X(client_tx) X(client_tx_drop) X(mark_hits) \
	X(mark_ignored) X(nat_reverse) X(frag_datagrams) X(frag_drop_table_full) \
	X(frag_drop_timeout) X(frag_drop_overlap) X(frag_drop_too_big) X(frag_drop_unsupported) \
	X(frag_out)
#define CHAN_FIELDS(X) X(hits) X(hits_mark) X(hits_trie) X(delivered) X(bytes) X(drop_ring_full) X(drop_queue_bytes) \
	X(drop_no_buf) X(dropped) X(wakeups) X(wakeup_errors) X(tx) X(tx_bytes) X(tx_dropped) X(tx_spoofed) \
	X(tx_spoofed_mac) X(tx_spoofed_vlan) X(tx_spoofed_addr) X(tx_spoofed_flow) X(tx_spoofed_not_ip) \
	X(tx_malformed) X(tx_too_big) X(tx_source_route) X(tx_no_route) X(tx_no_neigh) X(tx_ring_full) X(tx_resolving) \
	X(nat) X(nat_bytes) X(nat_drop_invalid) X(nat_drop_no_route) X(nat_drop_no_neigh) \
	X(nat_drop_table_full) X(nat_drop_channel_full) X(nat_drop_conflict) X(nat_drop_tx) \
	X(nat_reverse) \
	X(nat_reverse_bytes) X(nat_reverse_drop_tx) X(nat_flows)

/** What a channel dropped of what it matched: ring full, over budget, no buffer, by rule. */
static inline uint64_t
ncd_chan_drops(const struct ncd_chan_stats *s)
{
	return s->drop_ring_full + s->drop_queue_bytes + s->drop_no_buf + s->dropped;
}

#endif
