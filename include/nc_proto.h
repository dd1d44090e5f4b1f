/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * What netchanneld shares with its clients.
 *
 * Data: clients are DPDK secondary processes of the daemon (its
 * --file-prefix, --proc-type=secondary, --no-pci). They find channels in the
 * channel directory, a memzone named NC_DIR_MZ, and the objects it names:
 *
 * | object                    | name                               |
 * |---------------------------|------------------------------------|
 * | channel directory         | NC_DIR_MZ ("netchannel_dir")       |
 * | a channel's receive ring  | "nc_rx_<id>" (NC_RX_RING_FMT)      |
 * | mbuf pool of NUMA socket s| "nc_mbuf_<s>" (NC_MBUF_POOL_FMT)   |
 *
 * The directory has a fixed layout: a magic, a version, and an array of
 * entries, each on its own cache lines, with no pointers, so that every
 * process maps the same bytes. An entry is live when its state is
 * NC_DIR_LIVE (stored with release after the rest of the entry).
 *
 * A consumer that dequeues packets from a channel's ring subtracts their
 * pkt_len from the entry's bytes_queued: the daemon adds it when it enqueues,
 * and drops packets (counting them) while bytes_queued is over queue_bytes.
 */
#ifndef NC_PROTO_H
#define NC_PROTO_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NC_PROTO_VERSION 1
#define NC_DIR_MZ "netchannel_dir"
#define NC_DIR_MAGIC 0x6e636469u    /* "ncdi" */
#define NC_RX_RING_FMT "nc_rx_%u"
#define NC_MBUF_POOL_FMT "nc_mbuf_%d"
#define NC_NAME_SIZE 32

enum nc_dir_state {
	NC_DIR_FREE = 0,
	NC_DIR_LIVE = 1,
};

enum nc_dir_action {
	NC_ACTION_DELIVER = 0,
	NC_ACTION_DROP = 1,
};

/** One channel, as clients see it. */
struct nc_dir_entry {
	char name[NC_NAME_SIZE];       /**< channel name, NUL terminated */
	char rx_ring[NC_NAME_SIZE];    /**< its receive ring's name */
	uint32_t id;                   /**< channel id (also its index in the directory) */
	uint32_t state;                /**< enum nc_dir_state */
	uint32_t action;               /**< enum nc_dir_action */
	uint32_t ring_size;            /**< packets the ring holds */
	uint64_t queue_bytes;          /**< byte budget of the ring */
	uint64_t generation;           /**< changes each time the entry is reused */
	/** Bytes in the ring: the daemon adds, the consumer subtracts. Own cache line. */
	uint64_t bytes_queued __attribute__((aligned(64)));
	uint8_t pad[56];
} __attribute__((aligned(64)));

/** The channel directory (memzone NC_DIR_MZ). */
struct nc_dir {
	uint32_t magic;                /**< NC_DIR_MAGIC */
	uint32_t version;              /**< NC_PROTO_VERSION */
	uint32_t max_channels;         /**< entries in e[] */
	uint32_t reserved;
	char mbuf_pool[NC_NAME_SIZE];  /**< pool the channels' mbufs come from */
	uint8_t pad[16];
	struct nc_dir_entry e[];       /**< indexed by channel id */
} __attribute__((aligned(64)));

_Static_assert(sizeof(struct nc_dir_entry) == 192, "nc_dir_entry layout is part of the ABI");
_Static_assert(sizeof(struct nc_dir) == 64, "nc_dir header layout is part of the ABI");

#ifdef __cplusplus
}
#endif

#endif /* NC_PROTO_H */
