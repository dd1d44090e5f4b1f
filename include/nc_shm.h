/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The memory netchanneld shares with its clients: the channel directory, the client
 * table, the rings and the mbufs' dynamic fields. Offsets and sizes are fixed
 * (_Static_assert), so that every process maps the same bytes.
 *
 * Data: clients are DPDK secondary processes of the daemon (its
 * --file-prefix, --proc-type=secondary, --no-pci). They find channels in the
 * channel directory, a memzone named NC_DIR_MZ, and the objects it names:
 *
 * | object                    | name                               |
 * |---------------------------|------------------------------------|
 * | channel directory         | NC_DIR_MZ ("netchannel_dir")       |
 * | a channel's receive ring  | "nc_rx_<id>" (NC_RX_RING_FMT)*     |
 * | a channel's transmit ring | "nc_tx_<id>" (NC_TX_RING_FMT)*     |
 * | mbuf pool of NUMA socket s| "nc_mbuf_<s>" (NC_MBUF_POOL_FMT)   |
 * | client table              | NC_CLIENTS_MZ ("netchannel_clients") |
 * | mbuf owner field (dynfield)| NC_MBUF_OWNER_FIELD                |
 * | rx time (dynfield)        | NC_MBUF_RX_TSC_FIELD, with the config's rx_timestamps |
 *
 * (*) Channel rings are not memzones (DPDK has a few thousand at most, and a
 * daemon may have 131072 channels): they live in DPDK's shared heap, and
 * the directory entry gives their addresses (rx_ring_addr, tx_ring_addr),
 * which are the same in every process of the daemon's file prefix. A
 * client checks that an address is in DPDK memory and that the ring there
 * has the name the entry gives before it uses it. rte_ring_lookup() does
 * not find them.
 *
 * The directory has a fixed layout: a magic, a version, and an array of
 * entries, each on its own cache lines, so that every process maps the same
 * bytes. An entry is live when its state is NC_DIR_LIVE (stored with
 * release after the rest of the entry).
 *
 * Byte budget: the daemon adds the pkt_len of what it enqueues on a
 * channel's ring to the entry's bytes_in (before the enqueue), a consumer
 * adds what it dequeues to bytes_out (each the only writer of its counter,
 * so that neither needs an atomic read-modify-write); the bytes queued are
 * the difference (nc_dir_bytes_queued()), and the daemon drops packets
 * (counting them) while they are over queue_bytes. bytes_out has a cache
 * line of its own, which a busy consumer writes and the daemon reads only
 * when its last look at it says the budget is spent (bytes_out only grows,
 * so an old value overstates what is queued); the daemon's line (bytes_in,
 * want_wakeup) is one a busy consumer never writes.
 *
 * Transmit: a channel created with NC_CREATE_F_TX has a transmit ring, which
 * its client enqueues on (multi-producer) and one worker empties. An mbuf
 * whose packet_type has L2 bits (RTE_PTYPE_L2_MASK) is a whole frame; one
 * without is an IP packet, to which the worker adds the Ethernet header of
 * the next hop. Either way its source (address, port, protocol) must be in
 * the channel's destination, or it is dropped as spoofed.
 *
 * Mbuf ownership: a client holds at most its quota of mbufs (the client
 * table's quota): held counts what it dequeued or allocated, minus what it
 * freed or transmitted, and what waits on its free ring counts against the
 * quota too. While a client holds an mbuf, the mbuf's owner field (the
 * dynamic field NC_MBUF_OWNER_FIELD, a uint32_t) is the client's slot + 1,
 * and 0 otherwise. A client marks received mbufs while its ring still holds
 * them (zero-copy dequeue), gives mbufs back on its slot's free ring
 * (NC_FREE_RING_FMT, single producer: the client; a worker drains it and
 * unmarks them) and transmits them marked (the worker unmarks what it
 * dequeues). It allocates from its slot's alloc ring (NC_ALLOC_RING_FMT,
 * single consumer: the client, marking them before they leave the ring as
 * it does on receive), which a worker keeps filled from the pool once the
 * client's entry has want_alloc set. So a client killed at any point leaves
 * each of its mbufs on a ring or marked, and never a half-updated pool: it
 * never takes from the pool or puts into it itself. When a client dies the
 * daemon drains its rings, free ring and alloc ring, frees the mbufs still
 * marked as its own and flushes its lcore's mempool cache (for an
 * application that used the pool itself).
 */
#ifndef NC_SHM_H
#define NC_SHM_H

#include <stdint.h>

#include "nc_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The layout of what zero-copy clients map of the daemon's memory (nc_dir.version). */
#define NC_SHM_LAYOUT_VERSION 5
#define NC_DIR_MZ "netchannel_dir"
#define NC_DIR_MAGIC 0x6e636469u    /* "ncdi" */
#define NC_RX_RING_FMT "nc_rx_%u"
#define NC_TX_RING_FMT "nc_tx_%u"
#define NC_FREE_RING_FMT "nc_free_%u"  /**< a client slot's free ring (see "Mbuf ownership") */
#define NC_ALLOC_RING_FMT "nc_alloc_%u" /**< a client slot's alloc ring (see "Mbuf ownership") */
#define NC_ALLOC_RING_SIZE 32u         /**< entries of an alloc ring: what it parks, at most */
#define NC_MBUF_POOL_FMT "nc_mbuf_%d"
#define NC_CLIENTS_MZ "netchannel_clients"
#define NC_MBUF_OWNER_FIELD "netchannel_owner"
/**
 * Dynamic mbuf field (uint64_t) registered only when the config sets
 * rx_timestamps: the TSC (rte_rdtsc()) a worker read right after the rx burst
 * that received the mbuf. Daemon and clients share the host's TSC.
 */
#define NC_MBUF_RX_TSC_FIELD "netchannel_rx_tsc"
#define NC_MAX_CLIENTS 64              /**< connections the daemon serves at once */

enum nc_dir_state {
	NC_DIR_FREE = 0,
	NC_DIR_LIVE = 1,
};

enum nc_dir_action {
	NC_ACTION_DELIVER = 0,
	NC_ACTION_DROP = 1,
	NC_ACTION_NAT = 2,         /**< translated and sent on by the daemon: no ring */
};

/** One channel, as clients see it. */
struct nc_dir_entry {
	char name[NC_NAME_SIZE];       /**< channel name, NUL terminated */
	char rx_ring[NC_NAME_SIZE];    /**< its receive ring's name */
	char tx_ring[NC_NAME_SIZE];    /**< its transmit ring's name, or "" */
	uint32_t id;                   /**< channel id (also its index in the directory) */
	uint32_t state;                /**< enum nc_dir_state */
	uint32_t action;               /**< enum nc_dir_action */
	uint32_t ring_size;            /**< packets the ring holds */
	uint64_t queue_bytes;          /**< byte budget of the ring */
	uint64_t generation;           /**< changes each time the entry is reused */
	/** Bytes the daemon enqueued, ever (a packet's before its enqueue). */
	uint64_t bytes_in __attribute__((aligned(64)));
	/**
	 * A consumer about to sleep sets it to 1 (then looks at the ring once more);
	 * a worker that enqueued clears it and signals the channel's eventfd. Both
	 * sides put a full fence between their store and their load.
	 */
	uint32_t want_wakeup;
	uint32_t reserved;
	uint64_t rx_ring_addr;         /**< its receive ring (struct rte_ring *), or 0 */
	uint64_t tx_ring_addr;         /**< its transmit ring, or 0 */
	uint8_t pad[32];
	/** Bytes the consumer dequeued, ever; only it writes them. Its own cache line. */
	uint64_t bytes_out __attribute__((aligned(64)));
	uint8_t pad2[56];
} __attribute__((aligned(64)));

/**
 * The bytes in a channel's ring: what the daemon enqueued less what the
 * consumer dequeued. Relaxed loads; never below 0 (bytes_out is loaded
 * first, and never passes bytes_in).
 */
static inline uint64_t
nc_dir_bytes_queued(const struct nc_dir_entry *e)
{
	uint64_t out = __atomic_load_n(&e->bytes_out, __ATOMIC_ACQUIRE);
	uint64_t in = __atomic_load_n(&e->bytes_in, __ATOMIC_RELAXED);

	return in > out ? in - out : 0;
}

/** A connection's shared state (memzone NC_CLIENTS_MZ, indexed by slot). */
struct nc_client_entry {
	uint64_t held;                 /**< mbufs the client holds; the client updates it */
	uint64_t quota;                /**< most mbufs it may hold; set by the daemon */
	uint64_t quota_stalls;         /**< receives cut short by the quota; the client counts */
	uint32_t pid;                  /**< SO_PEERCRED */
	uint32_t live;                 /**< 1 while the connection is open */
	uint8_t pad[32];
	/*
	 * A line of its own: a worker reads it on every loop, and the client
	 * writes it once, where it writes held at every burst.
	 */
	uint32_t want_alloc;           /**< the client allocates: keep its alloc ring filled */
	uint8_t pad2[60];
} __attribute__((aligned(64)));

/** The channel directory (memzone NC_DIR_MZ). */
struct nc_dir {
	uint32_t magic;                /**< NC_DIR_MAGIC */
	uint32_t version;              /**< NC_SHM_LAYOUT_VERSION */
	uint32_t max_channels;         /**< entries in e[] */
	uint32_t reserved;
	char mbuf_pool[NC_NAME_SIZE];  /**< pool the channels' mbufs come from */
	uint8_t pad[16];
	struct nc_dir_entry e[];       /**< indexed by channel id */
} __attribute__((aligned(64)));

_Static_assert(sizeof(struct nc_dir_entry) == 256, "nc_dir_entry layout is part of the ABI");
_Static_assert(sizeof(struct nc_client_entry) == 128, "nc_client_entry layout is part of the ABI");
_Static_assert(sizeof(struct nc_dir) == 64, "nc_dir header layout is part of the ABI");

#ifdef __cplusplus
}
#endif

#endif /* NC_SHM_H */
