/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * libnetchannel: a process's channels to netchanneld.
 *
 * In the netchannels patch a process created a channel for a 5-tuple and
 * read() its packets. Here it connects to the daemon's control socket,
 * creates a channel (or attaches to a static one from the config), and
 * receives the channel's packets from shared memory: zero-copy as rte_mbufs,
 * or copied into a buffer. Closing the connection, or the process dying,
 * removes its channels.
 *
 * The process becomes a DPDK secondary process of the daemon: nc_connect()
 * initialises EAL with the daemon's file prefix and the lcore id it assigns,
 * unless NC_CONNECT_NO_EAL says the application did so itself.
 *
 * Calls on one client and its channels are not thread-safe; use one client
 * per thread, or lock.
 */
#ifndef NETCHANNEL_H
#define NETCHANNEL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "nc_trie.h"

#ifdef __cplusplus
extern "C" {
#endif

struct rte_mbuf;

/** A connection to netchanneld. */
struct nc_client;

/** A channel of a connection. */
struct nc_channel;

/** The daemon's default control socket. */
#define NC_DEFAULT_SOCKET "/run/netchanneld/netchanneld.sock"

/** nc_connect() flags. */
#define NC_CONNECT_NO_EAL 0x1   /**< the application has initialised EAL as the daemon's secondary */

/** Channel options (nc_channel_create()); pass NULL for the defaults. */
struct nc_channel_opts {
	int drop;                   /**< non-zero: a drop channel (matches are counted and freed) */
	uint32_t ring_size;         /**< packets; 0: 1024 */
	uint64_t queue_bytes;       /**< byte budget; 0: memory_limit_order, or 1 MiB */
	uint32_t memory_limit_order;/**< the seed's: budget 2^order, 12..31; 0: unused */
};

/**
 * Connect to netchanneld and say HELLO; unless NC_CONNECT_NO_EAL, initialise
 * EAL as its secondary process.
 *
 * @param socket_path
 *   The control socket, or NULL for NC_DEFAULT_SOCKET.
 * @param flags
 *   NC_CONNECT_*.
 * @return
 *   The client, or NULL with errno set: ENOENT/ECONNREFUSED (no daemon),
 *   EPROTO (protocol version mismatch), or the error of socket, connect or
 *   rte_eal_init.
 */
struct nc_client *nc_connect(const char *socket_path, unsigned int flags);

/**
 * Close the connection: the daemon removes its channels. Mbufs the
 * application still holds must be freed before. If nc_connect() initialised
 * EAL, EAL is cleaned up too (rte_eal_cleanup()), and cannot be initialised
 * again in this process: an application that wants to reconnect initialises
 * EAL itself and passes NC_CONNECT_NO_EAL.
 *
 * @param c
 *   The client; NULL is a no-op.
 */
void nc_disconnect(struct nc_client *c);

/**
 * Create a channel for the flows a rule matches.
 *
 * @param c
 *   The client.
 * @param name
 *   A unique name, 1-31 letters, digits, '_', '-' or '.'.
 * @param rule
 *   The rule (nc_trie.h): 5-tuple with masks or ranges, and priority.
 * @param opts
 *   Options, or NULL.
 * @return
 *   The channel, or NULL with errno set: EINVAL (bad name, rule or options),
 *   EPERM (control.allow does not let this user claim these ports), EEXIST
 *   (the name is taken), EBUSY (another channel has the same rule and
 *   priority), ENOSPC (too many channels), EPIPE (the daemon is gone).
 */
struct nc_channel *nc_channel_create(struct nc_client *c, const char *name,
				     const struct nc_trie_rule *rule,
				     const struct nc_channel_opts *opts);

/**
 * Attach to a static channel of the daemon's config.
 *
 * @return
 *   The channel, or NULL with errno set: ENOENT (no such channel), EPERM,
 *   EINVAL, EPIPE.
 */
struct nc_channel *nc_channel_attach(struct nc_client *c, const char *name);

/**
 * Destroy a channel this client created (the daemon removes it and drains
 * its ring), or detach from a static one. The handle is freed either way.
 *
 * @return
 *   0, or a negative errno from the daemon (the handle is still freed).
 */
int nc_channel_destroy(struct nc_channel *ch);

/**
 * Receive up to n packets, zero-copy. Free them with rte_pktmbuf_free().
 *
 * @return
 *   The number of packets (0 when none is waiting).
 */
uint16_t nc_rx_burst(struct nc_channel *ch, struct rte_mbuf **pkts, uint16_t n);

/**
 * Receive one packet by copy, like the seed's read().
 *
 * @param ch
 *   The channel.
 * @param buf
 *   Where the frame goes.
 * @param len
 *   buf's size; a longer frame is cut (its full length is returned).
 * @param timeout_ms
 *   0: do not wait; -1: wait for ever; otherwise at most this long. Waiting
 *   sleeps on the channel's eventfd: an idle client uses no CPU.
 * @return
 *   The frame's length, or -1 with errno EAGAIN (nothing in time) or EPIPE
 *   (the daemon is gone).
 */
ssize_t nc_recv(struct nc_channel *ch, void *buf, size_t len, int timeout_ms);

/**
 * The channel's eventfd, to poll() with other descriptors: the daemon signals
 * it when the ring goes from empty to non-empty after nc_channel_arm(). Read
 * it (8 bytes) to reset it; drain the channel with nc_rx_burst(), then arm
 * again before sleeping. A busy client that never arms costs no syscall.
 *
 * @return
 *   The fd (owned by the channel: do not close it), or -1 for a drop channel.
 */
int nc_channel_fd(const struct nc_channel *ch);

/**
 * Ask to be woken through nc_channel_fd() when a packet arrives.
 *
 * @return
 *   0: armed, the ring is empty, sleep; 1: packets are waiting already, do not
 *   sleep; -EINVAL: a channel with no ring.
 */
int nc_channel_arm(struct nc_channel *ch);

/** The channel's id in the daemon. */
uint32_t nc_channel_id(const struct nc_channel *ch);

/**
 * A description of an error this library or the daemon returned (positive or
 * negative errno). Thread-safe.
 */
const char *nc_strerror(int err);

#ifdef __cplusplus
}
#endif

#endif /* NETCHANNEL_H */
