/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The daemon's counters: per port and per channel, kept by each worker on
 * its own cache lines and by the control thread, summed when read.
 */
#ifndef NCD_CORE_STATS_H
#define NCD_CORE_STATS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <rte_common.h>

struct ncd;

/*
 * What the packet parser (packet/parse.h) decided, counted per port
 * (verdict[]): every value but OK goes to the exception path.
 */
enum ncd_verdict {
	NCD_PKT_OK = 0,          /* classify it */
	NCD_PKT_NOT_IP,          /* ARP, LLDP, a third VLAN tag...: the kernel's business */
	NCD_PKT_OTHERHOST,       /* unicast to another MAC (the seed's PACKET_OTHERHOST) */
	NCD_PKT_TOO_DEEP,        /* headers end beyond the bytes the parser was given */
	/* Malformed, counted by reason; never delivered. */
	NCD_PKT_TRUNC_L2,        /* shorter than its Ethernet/VLAN headers */
	NCD_PKT_TRUNC_L3,        /* shorter than its IP header */
	NCD_PKT_BAD_VERSION,     /* IP version does not match the ethertype */
	NCD_PKT_BAD_IHL,         /* IPv4 ihl < 5 */
	NCD_PKT_BAD_CSUM,        /* IPv4 header checksum */
	NCD_PKT_BAD_LEN,         /* IP total/payload length beyond the frame or below the header */
	NCD_PKT_BAD_EXT,         /* IPv6 extension header chain truncated or too long */
	NCD_PKT_TRUNC_L4,        /* TCP/UDP/UDP-Lite/SCTP without its ports */
	NCD_PKT_NVERDICTS
};

/** First verdict that counts as malformed. */
#define NCD_PKT_MALFORMED NCD_PKT_TRUNC_L2

/** Names of the verdicts, for counters ("not_ip", "bad_csum", ...). */
extern const char *const ncd_verdict_names[NCD_PKT_NVERDICTS];

/*
 * The counters, each defined once, in these lists: the structs below, the
 * sums (datapath/stats.c), the views (control/views.c) and what a client gets
 * (NC_CHANNEL_STATS, nc_common.h) are made from them, in their order.
 */

/* Per port, per worker: every packet lands in exactly one of the outcome counters. */
#define PORT_FIELDS(X) \
	X(rx)                    /* received from the port */ \
	X(delivered)             /* enqueued on a channel */ \
	X(dropped_by_rule)       /* matched a drop channel */ \
	X(to_kernel)             /* sent to the exception device */ \
	X(drop_ring_full)        /* channel ring full */ \
	X(drop_queue_bytes)      /* channel over its byte budget */ \
	X(drop_no_buf)           /* isolated client: too few of its buffers free for it */ \
	X(drop_exc_full)         /* exception device did not take it */ \
	X(drop_exc_down)         /* exception device gone (being made again) or set down */ \
	X(drop_no_exception)     /* exception device "none" */ \
	X(drop_too_big)          /* larger than the exception device takes */ \
	X(nat)                   /* translated by a NAT channel (either way) and sent */ \
	X(drop_nat_invalid)      /* NAT: not translatable (a fragment's ports, headers too long) */ \
	X(drop_nat_no_route)     /* NAT: no route to the new destination out of its port */ \
	X(drop_nat_no_neigh)     /* NAT: next hop not resolved */ \
	X(drop_nat_table_full)   /* NAT: no room for the flow's reverse mapping */ \
	X(drop_nat_conflict)     /* NAT: another flow holds the same reverse mapping */ \
	X(drop_nat_tx)           /* NAT: the out port did not take it */ \
	X(frag_in)               /* a fragment, taken by IP reassembly */ \
	X(drop_meter)            /* over its channel's meter (red), and the channel drops those */ \
	X(drop_exc_police)       /* over its exception.police bucket, on the way to the kernel */ \
	/* Why packets went to the kernel (not outcomes: they also count above); verdict[] too. */ \
	X(miss)                  /* parsed, matched no channel */ \
	/* The other direction: what the kernel sent, out of the port. */ \
	X(kernel_rx) X(kernel_tx) X(kernel_tx_drop) \
	/* What clients sent, out of the port (details per channel). */ \
	X(client_tx) X(client_tx_drop) \
	/* Offload (not outcomes): packets whose NIC mark named their channel, and marks ignored. */ \
	X(mark_hits) X(mark_ignored) \
	X(nat_reverse)           /* of nat: replies translated back (not an outcome) */ \
	/* \
	 * Reassembly (frag.c): datagrams it made, which are classified as packets \
	 * of their own (rx + frag_datagrams = the outcomes); the fragments it gave \
	 * up, by reason; the frames datagrams left in (the kernel's, kept as they \
	 * came or re-cut, and NAT's). \
	 */ \
	X(frag_datagrams) \
	X(frag_drop_table_full) X(frag_drop_timeout) X(frag_drop_overlap) X(frag_drop_too_big) \
	X(frag_drop_unsupported) \
	X(frag_out) X(frag_kept) X(frag_recut)

/*
 * Per channel, per worker. What every delivered packet writes comes first,
 * on the first cache line: with many channels each line a packet touches is
 * a store that misses, and the region's lock (a full fence) waits for those.
 * The names a client gets (NC_CHANNEL_STATS) are these.
 */
#define CHAN_FIELDS(X) \
	X(hits) \
	X(hits_mark) X(hits_trie)  /* how hits were found: the NIC's mark, or the trie */ \
	X(delivered) X(bytes) X(drop_ring_full) \
	X(drop_queue_bytes)        /* zero-copy: over its byte budget */ \
	X(drop_no_buf)             /* isolated client: too few of its buffers free for it */ \
	X(dropped)                 /* matched, and it is a drop channel */ \
	X(wakeups) X(wakeup_errors) /* eventfd signals to a sleeping consumer */ \
	/* Transmit: every packet dequeued from the tx ring lands in exactly one. */ \
	X(tx) X(tx_bytes) \
	X(tx_dropped)              /* the port did not take it */ \
	X(tx_spoofed)              /* not its own to send: the sum of the reasons below */ \
	X(tx_spoofed_mac)          /* a frame whose source MAC is not the port's */ \
	X(tx_spoofed_vlan)         /* a frame with a VLAN tag */ \
	X(tx_spoofed_addr)         /* from an address not the host's */ \
	X(tx_spoofed_flow)         /* not the reverse of the channel's flows (proto, dst, ports) */ \
	X(tx_spoofed_not_ip)       /* ARP and the like: the kernel's to send */ \
	X(tx_malformed)            /* not a well-formed IP packet */ \
	X(tx_too_big)              /* its IP packet is longer than the port's MTU */ \
	X(tx_source_route)         /* IPv4 LSRR or SSRR option, IPv6 routing header 0 */ \
	X(tx_no_route)             /* IP packet: no route out of this port */ \
	X(tx_no_neigh)             /* IP packet: next hop unresolved */ \
	X(tx_ring_full)            /* IP packet: resolved, but its tx ring was full */ \
	X(tx_resolving)            /* IP packet: handed to the control thread (not an outcome) */ \
	/* NAT: every hit lands in nat or one nat_drop_*; replies translated back in nat_reverse. */ \
	X(nat) X(nat_bytes) \
	X(nat_drop_invalid) X(nat_drop_no_route) X(nat_drop_no_neigh) X(nat_drop_table_full) \
	X(nat_drop_channel_full)   /* new flow: the channel holds nat.flows_per_channel */ \
	X(nat_drop_conflict) X(nat_drop_tx) \
	X(nat_reverse) X(nat_reverse_bytes) X(nat_reverse_drop_tx) \
	X(nat_flows)               /* reverse mappings it created */ \
	/* Its meter: each hit gets one colour; red ones are dropped, or go to the kernel. */ \
	X(meter_green) X(meter_yellow) X(meter_red) X(drop_meter) \
	/* Its clients' transmit meters (its own, its user's): each packet sent is green or \
	 * yellow; a red one is held on its ring, and each time one is, tx_held counts. */ \
	X(tx_meter_green) X(tx_meter_yellow) X(tx_held)

#define NCD_STATS_FIELD(name) uint64_t name;

/* The exception path's policer's buckets (exception.police), which its counters are by. */
enum ncd_police_bucket {
	NCD_POLICE_ARP,
	NCD_POLICE_ND,
	NCD_POLICE_ICMP,
	NCD_POLICE_OTHER,
	NCD_POLICE_PROTECT,          /* the first protect entry's; the others follow */
};
#define NCD_POLICE_PROTECT_MAX 8
#define NCD_POLICE_MAX (NCD_POLICE_PROTECT + NCD_POLICE_PROTECT_MAX)

struct ncd_port_stats {
	PORT_FIELDS(NCD_STATS_FIELD)
	uint64_t verdict[NCD_PKT_NVERDICTS]; /* why each packet that went to the kernel went */
	/* The policer's, by bucket (not outcomes: to_kernel and drop_exc_police count them). */
	uint64_t police_pass[NCD_POLICE_MAX];
	uint64_t police_drop[NCD_POLICE_MAX];
} __rte_cache_aligned;

struct ncd_chan_stats {
	CHAN_FIELDS(NCD_STATS_FIELD)
} __rte_cache_aligned;

_Static_assert(offsetof(struct ncd_chan_stats, drop_no_buf) < 64,
	       "what a delivered packet writes is on the first cache line");

/** What a channel dropped of what it matched: ring full, over budget, no buffer, by rule. */
static inline uint64_t
ncd_chan_drops(const struct ncd_chan_stats *s)
{
	return s->drop_ring_full + s->drop_queue_bytes + s->drop_no_buf + s->dropped;
}

#endif
