/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * What libnetchannel's API (netchannel.h) and the daemon's protocol
 * (nc_ctl.h, nc_shm.h) share, defined once: the size of a channel's name and
 * of a build's description, and the list of a channel's counters.
 */
#ifndef NC_COMMON_H
#define NC_COMMON_H

/** A channel name's bytes, with its NUL: names are 1-31 letters, digits, '_', '-' or '.'. */
#define NC_NAME_SIZE 32

/** A build's description (HELLO's, struct nc_client_info's), with its NUL. */
#define NC_BUILD_SIZE 128

/**
 * A channel's counters as a client gets them, in the order of their layout:
 * the reply to CHANNEL_STATS (struct nc_ctl_channel_stats), the API's
 * struct nc_channel_stats, and each copy between the daemon's counters, the
 * reply and the API's struct are all made from this list.
 *
 * NC_CHANNEL_STATS(C, G): C(name, what) is a uint64_t counter, which the
 * daemon keeps under the same name (struct ncd_chan_stats); G(name, what) a
 * uint32_t read when asked. Counters only grow; a field is added at the end,
 * and the size (128 bytes) is part of the protocol.
 */
#define NC_CHANNEL_STATS(C, G) \
	C(hits, "packets that matched its rule") \
	C(delivered, "enqueued on its receive ring") \
	C(bytes, "bytes of those") \
	C(drop_ring_full, "dropped: receive ring full") \
	C(drop_queue_bytes, "dropped: over its byte budget (queue_bytes)") \
	C(dropped, "matched a drop channel") \
	C(tx, "sent out of the port") \
	C(tx_bytes, "bytes of those") \
	C(tx_dropped, "the port did not take them") \
	C(tx_spoofed, "dropped: not its own to send (source, flow, MAC, VLAN tag, not IP)") \
	C(tx_malformed, "dropped: not a well-formed IP packet or frame") \
	C(tx_no_route, "dropped: no route out of the channel's port") \
	C(tx_no_neigh, "dropped: next hop not resolved (yet)") \
	C(tx_ring_full, "dropped: resolved, but the transmit ring was full") \
	G(rx_count, "packets in the receive ring now") \
	G(tx_count, "packets in the transmit ring now") \
	C(drop_no_buf, "dropped: too few of an isolated client's buffers were free for it")

/** A member of a struct made from NC_CHANNEL_STATS: a counter. */
#define NC_STATS_U64(name, what) uint64_t name;
/** A member of a struct made from NC_CHANNEL_STATS: a value read when asked. */
#define NC_STATS_U32(name, what) uint32_t name;

#endif
