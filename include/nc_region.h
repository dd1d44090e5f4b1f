/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * An isolated client's region: the memory one connection shares with
 * netchanneld, and nothing else. The daemon makes it at HELLO in two parts,
 * each a memfd sealed against shrinking, growing and further seals, and
 * passes both with the reply (SCM_RIGHTS), the daemon's part first:
 *
 * - **the daemon's part**, which only the daemon writes: the header, the rx
 *   rings and the rx buffers. On hugepages where the host has them to spare;
 *   the client gets it read-only (an O_RDONLY descriptor, and sealed with
 *   F_SEAL_FUTURE_WRITE), so it can neither write nor punch a hole in it.
 * - **the client's part**, which the client writes: each rx ring's
 *   consumer line, the tx and free rings, and the tx buffers. Never on
 *   hugepages: a hole the client punches in it reads back as zeros, where a
 *   hugetlb page freed under the daemon's mapping would fault the daemon.
 *
 * Every reference is an offset from its part's start, never a pointer, so
 * the client may map the parts anywhere.
 *
 * | part         | where, offset / size                       | producer -> consumer |
 * |--------------|--------------------------------------------|----------------------|
 * | header       | daemon's, 0, 4096                          | daemon (read-only)   |
 * | rx ring k    | daemon's, rx_off + k * rx_stride           | daemon -> client     |
 * | rx buffers   | daemon's, buf_off, rx_bufs * buf_size      | daemon fills         |
 * | rx ring k's consumer line | client's, rx_cons_off + k * 64 | client               |
 * | tx ring      | client's, tx_off                           | client -> daemon     |
 * | free ring    | client's, free_off                         | client -> daemon     |
 * | tx buffers   | client's, tx_buf_off, tx_size * buf_size   | client fills         |
 *
 * Receive: a worker copies a packet into one of the rx buffers it has not
 * given out, puts {offset, length, channel} on the channel's rx ring (or on
 * the one ring of a NC_HELLO_F_ONE_RING client: a descriptor names its
 * channel and, in its flags, the channel's generation), and
 * frees its mbuf at once. The buffer is the client's until it puts the same
 * offset on the free ring. Transmit: the client writes a frame into a tx
 * buffer (tx ring slot i uses tx buffer i, so a slot the daemon has consumed
 * is a buffer it is done with), puts its descriptor on the tx ring, and the
 * daemon copies it into an mbuf before it looks at it.
 *
 * Rings are single-producer, single-consumer: head is the producer's count
 * of what it put on the ring, tail the consumer's of what it took off, both
 * free-running 32-bit counters; entry i is desc[i & (size - 1)]. Each side
 * stores its index with release and loads the other's with acquire. An rx
 * ring's tail and want_wakeup are in its consumer line in the client's part
 * (struct nc_region_cons); those of struct nc_region_ring in the daemon's
 * part are unused.
 *
 * The daemon trusts nothing in the client's part: it keeps every ring's
 * geometry and its own indexes privately, and reads only the client's
 * index, which may only move forward and never past what was produced; a
 * descriptor is used only if its offset and length lie in the right area
 * and its channel is one of this connection's. Anything else is counted
 * (bad_index, bad_desc, bad_free, see `show clients`) and ignored.
 *
 * Layout 1, for clients of control protocol 4 (nc_ctl.h), is this in one
 * part: one memfd, passed alone and writable, never on hugepages (a hole the
 * client punches reads back as zeros); every offset is from its start, the
 * header's client_size and rx_cons_off are 0, and each rx ring's consumer
 * line is the one in its struct nc_region_ring. The daemon trusts all of it
 * as little as the client's part.
 */
#ifndef NC_REGION_H
#define NC_REGION_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NC_REGION_MAGIC 0x6e637267u   /* "ncrg" */
/** The layout of an isolated client's region (its header's version): two parts. */
#define NC_REGION_LAYOUT_VERSION 2
/** The layout of control protocol 4's regions: one part. */
#define NC_REGION_LAYOUT_ONE_PART 1
#define NC_REGION_HDR_SIZE 4096u

#define NC_RING_NO_CHANNEL 0xffffffffu /**< nc_region_ring.channel of a ring no channel has */
/** nc_region_ring.channel of the one rx ring of a NC_HELLO_F_ONE_RING region: every channel's */
#define NC_RING_ALL_CHANNELS 0xfffffffeu

/** nc_desc flags. */
#define NC_DESC_F_IP 0x1              /**< tx: an IP packet; the daemon adds the Ethernet header */
/**
 * rx: the frame goes on in the next descriptor's buffer. A frame longer
 * than a buffer (a datagram reassembled from fragments) comes in several,
 * in order, all on the ring at once; the last has no NC_DESC_F_MORE.
 */
#define NC_DESC_F_MORE 0x2
/**
 * rx: the flags' upper 16 bits are the low 16 bits of the channel's
 * generation (struct nc_ctl_channel). A ring shared by all of a client's
 * channels may still hold packets of a channel that is gone when a new one
 * gets its id: the generation tells them apart.
 */
#define NC_DESC_GEN_SHIFT 16

/** One packet: where it is in the region, how long, and whose. */
struct nc_desc {
	uint32_t offset;               /**< from the region's start */
	uint32_t length;               /**< bytes of the frame (rx, tx); unused on the free ring */
	uint32_t channel;              /**< the channel's id (rx: it matched; tx: send on it) */
	uint32_t flags;                /**< NC_DESC_F_* */
};

/**
 * A ring's consumer line: the tx and free rings have it in place (struct
 * nc_region_ring), an rx ring in the client's part (nc_region_hdr.rx_cons_off).
 */
struct nc_region_cons {
	uint32_t tail;                 /**< entries consumed, ever (the consumer writes it) */
	/**
	 * rx rings: the client, about to sleep, sets it (then looks at the ring
	 * once more); a worker that produced clears it and signals the channel's
	 * eventfd. The tx ring: the client, finding it full, writes the id + 1 of
	 * the channel whose eventfd is to signal room (then looks at the tail
	 * once more); the worker that drains it clears it and signals that fd
	 * once half the ring is free (control protocol 6). A full fence on each
	 * side between its store and its load.
	 */
	uint32_t want_wakeup;
	uint8_t pad[56];
};

/** A ring: each index on a cache line of its own, then its descriptors. */
struct nc_region_ring {
	uint32_t head;                 /**< entries produced, ever (the producer writes it) */
	/**
	 * rx rings: the channel that has the ring, its id and the low 32 bits of
	 * its generation (struct nc_ctl_channel), which the daemon writes before
	 * the first packet; NC_RING_NO_CHANNEL once the channel is gone (destroyed
	 * by the operator, or detached), and what the ring held then is the
	 * daemon's again. A consumer that finds another channel here stops
	 * (ESTALE).
	 */
	uint32_t channel;
	uint32_t generation;
	uint8_t pad0[52];
	/** tx and free rings: the consumer's line; rx rings: unused (see nc_region_cons) */
	struct nc_region_cons cons;
	struct nc_desc desc[];         /**< size entries (the header's rx_size, tx_size or free_size) */
};

/** The daemon's part's first page, written before the daemon passes the fds. */
struct nc_region_hdr {
	uint32_t magic;                /**< NC_REGION_MAGIC */
	uint32_t version;              /**< NC_REGION_LAYOUT_VERSION */
	uint64_t size;                 /**< bytes of the daemon's part */
	uint32_t nrx;                  /**< rx rings (a channel has one while it lives); 1 for a
					    NC_HELLO_F_ONE_RING client, whose channels all share it */
	uint32_t rx_size;              /**< entries of each rx ring (a power of 2) */
	uint32_t tx_size;              /**< entries of the tx ring, and tx buffers */
	uint32_t free_size;            /**< entries of the free ring (>= rx_bufs) */
	uint32_t buf_size;             /**< bytes of each buffer */
	uint32_t rx_bufs;              /**< rx buffers */
	uint64_t rx_off;               /**< the first rx ring (daemon's part) */
	uint64_t rx_stride;            /**< bytes from one rx ring to the next */
	uint64_t tx_off;               /**< the tx ring (client's part) */
	uint64_t free_off;             /**< the free ring (client's part) */
	uint64_t buf_off;              /**< the first rx buffer (daemon's part) */
	uint64_t tx_buf_off;           /**< the first tx buffer (client's part) */
	uint64_t client_size;          /**< bytes of the client's part */
	uint64_t rx_cons_off;          /**< rx ring 0's consumer line (client's part); nrx of them */
	uint8_t reserved[24];
};

_Static_assert(sizeof(struct nc_desc) == 16, "nc_desc layout is part of the ABI");
_Static_assert(sizeof(struct nc_region_cons) == 64, "nc_region_cons layout is part of the ABI");
_Static_assert(sizeof(struct nc_region_ring) == 128, "nc_region_ring layout is part of the ABI");
_Static_assert(sizeof(struct nc_region_hdr) == 128, "nc_region_hdr layout is part of the ABI");

#ifdef __cplusplus
}
#endif

#endif /* NC_REGION_H */
