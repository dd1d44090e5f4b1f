/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * libnetchannel: a process's channels to netchanneld.
 *
 * In the netchannels patch a process created a channel for a 5-tuple and
 * read() its packets. Here it connects to the daemon's control socket,
 * creates a channel (or attaches to a static one from the config), and
 * receives the channel's packets. Closing the connection, or the process
 * dying, removes its channels.
 *
 * Two models:
 * - Isolated (the default). The daemon gives the connection a region of its
 *   own (nc_region.h) and copies each of its packets into a buffer there; the
 *   client reads it in place (nc_rx_bufs()) or copied (nc_recv()), and sends
 *   from its region (nc_tx_bufs_get() and nc_tx_bufs_send(), or nc_send()).
 *   The client maps nothing else of the daemon's, needs no privilege and never
 *   initialises DPDK; the daemon checks everything it reads from the region.
 * - Zero-copy (NC_CONNECT_ZEROCOPY, for trusted clients: control.allow's
 *   zero_copy, root by default), in libnetchannel_zc (pkg-config
 *   libnetchannel-zc), which links DPDK; libnetchannel itself does not. The
 *   process becomes a DPDK secondary process of the daemon and receives
 *   rte_mbufs (nc_rx_burst()): nc_connect()
 *   initialises EAL with the daemon's file prefix and the lcore id it assigns,
 *   unless NC_CONNECT_NO_EAL says the application did so itself. Such a
 *   process shares the daemon's memory: it can read every packet and corrupt
 *   the daemon (docs/hardening.md).
 *
 * Calls on one client and its channels are not thread-safe; use one client
 * per thread, or lock.
 *
 * Mbufs: what nc_rx_burst() and nc_mbuf_alloc() return belongs to the client
 * until it gives it back with nc_mbuf_free() or nc_tx_burst(). The daemon
 * bounds how many a client may hold (control.mbuf_quota: nc_rx_burst()
 * returns fewer at the quota), and takes back what a client held when it
 * dies. Do not free them with rte_pktmbuf_free(): the client would still be
 * charged for them, and could reach its quota.
 *
 * If the daemon goes away, every call fails instead of hanging: with
 * ESHUTDOWN when it stopped cleanly (SIGTERM, systemctl stop or restart: it
 * says so to every client before it takes anything down), with EPIPE when it
 * died. Either way an isolated client comes back with nc_reconnect(), which
 * waits for a new daemon and makes its channels again under the same handles;
 * a zero-copy one cannot initialise EAL twice, so it starts again (for
 * example by exec()ing itself, as nc-echo --reconnect does). ESTALE is for a
 * channel an operator destroyed while the daemon runs on.
 *
 * Errors, one convention: a call that makes an object (nc_connect(),
 * nc_channel_create(), nc_channel_attach(), nc_mbuf_alloc()) returns NULL and
 * sets errno; a burst call (nc_rx_burst(), nc_tx_burst(), nc_tx_burst_ip())
 * returns how many packets it handled, and sets errno when that is 0 for a
 * reason other than an empty ring; every other call returns a negative errno
 * on failure. nc_strerror() describes any of them.
 *
 * Structs that grow. Every struct a caller passes in or gets back that may
 * gain fields starts with its size, uint32_t size: set it to the struct's
 * sizeof as the caller's header has it (NC_SIZED() does), and the library
 * reads and writes only what that size covers. A library newer than the
 * caller's header treats the fields the caller lacks as 0; an older one
 * refuses (EOPNOTSUPP, with nc_last_reason()) a struct whose fields past its
 * own knowledge are not 0, and fills only what it knows of a struct it gives
 * back, saying how much in size (NC_HAS()). struct nc_buf, which comes in
 * arrays, does not grow.
 *
 * This header, and nc_common.h which it includes, are the whole API: the
 * wire format and the classifier's structures are the library's business
 * and are not installed (docs/protocol.md, "What is public").
 */
#ifndef NETCHANNEL_H
#define NETCHANNEL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "nc_common.h"

#ifdef __cplusplus
extern "C" {
#endif

struct rte_mbuf;

/** A connection to netchanneld. */
struct nc_client;

/** A channel of a connection. */
struct nc_channel;

/** A channel name's bytes, with its NUL: names are 1-31 letters, digits, '_', '-' or '.'. */
#define NC_CHANNEL_NAME_SIZE NC_NAME_SIZE

/**
 * A struct that carries its size, initialised for this header:
 * `struct nc_channel_opts o = NC_SIZED(nc_channel_opts, .tx = 1);`
 */
#define NC_SIZED(type, ...) ((struct type){ .size = sizeof(struct type), __VA_ARGS__ })

/**
 * Whether field f of *s, a struct that carries its size, is covered by its
 * size: in a struct the library gave back, whether the library filled it.
 */
#define NC_HAS(s, f) \
	(__builtin_offsetof(__typeof__(*(s)), f) + sizeof((s)->f) <= (s)->size)

/**
 * An experimental call: it may change, or go, in a later release without a
 * new soname (its symbols are in NETCHANNEL_EXPERIMENTAL). Calling one warns
 * unless NC_ALLOW_EXPERIMENTAL is defined before this header.
 */
#ifdef NC_ALLOW_EXPERIMENTAL
#define NC_EXPERIMENTAL
#else
#define NC_EXPERIMENTAL \
	__attribute__((deprecated("an experimental call of libnetchannel: " \
				  "define NC_ALLOW_EXPERIMENTAL to use it")))
#endif

/** nc_rule.family. */
#define NC_AF_ANY 0                 /**< either family: both prefix lengths must be 0 */
#define NC_AF_INET 4                /**< IPv4 */
#define NC_AF_INET6 6               /**< IPv6 */

/** nc_port.kind. */
#define NC_PORT_ANY 0               /**< any port */
#define NC_PORT_RANGE 1             /**< lo..hi, inclusive */
#define NC_PORT_MASK 2              /**< value lo under mask hi (a contiguous prefix) */

/** The highest nc_rule.priority. */
#define NC_PRIORITY_MAX 0xffffffu

/** A port constraint of a rule. */
struct nc_port {
	uint16_t lo;                /**< NC_PORT_RANGE: the first port; NC_PORT_MASK: the value */
	uint16_t hi;                /**< NC_PORT_RANGE: the last port; NC_PORT_MASK: the mask */
	uint8_t kind;               /**< NC_PORT_* */
	uint8_t reserved;           /**< 0 */
};

/**
 * The flows a channel claims: a 5-tuple with prefixes, port ranges or
 * masks, and a priority (the higher wins where rules overlap). All zero
 * but size: every packet of both families. nc_rule_flow() fills one for
 * the flows to a local port.
 */
struct nc_rule {
	uint32_t size;              /**< sizeof(struct nc_rule): see "Structs that grow" */
	uint8_t family;             /**< NC_AF_* */
	uint8_t proto;              /**< the IP protocol */
	uint8_t proto_mask;         /**< 0: any protocol; 0xff: exactly proto */
	uint8_t dst_len;            /**< destination prefix length; 0: any */
	uint8_t src_len;            /**< source prefix length; 0: any */
	uint8_t reserved[3];        /**< 0 */
	uint8_t dst[16];            /**< destination prefix, network order; IPv4 in the first 4 bytes */
	uint8_t src[16];            /**< source prefix, likewise */
	struct nc_port dport;       /**< destination port */
	struct nc_port sport;       /**< source port */
	uint32_t priority;          /**< 0..NC_PRIORITY_MAX */
};

/** The daemon's default control socket. */
#define NC_DEFAULT_SOCKET "/run/netchanneld/netchanneld.sock"

/** nc_connect() flags. */
#define NC_CONNECT_NO_EAL 0x1   /**< zero-copy, and the application initialised EAL as the daemon's secondary */
#define NC_CONNECT_CONTROL 0x2  /**< the control protocol only: no region, no EAL, no channels (nc_cli()) */
#define NC_CONNECT_ZEROCOPY 0x4 /**< a zero-copy client (rte_mbufs, DPDK secondary process) */
/**
 * An isolated client whose channels all deliver on one receive ring of its
 * region, not a ring each: as many channels as control.limits allow (a ring
 * each stops at 64), one eventfd to sleep on, and one place to poll
 * (nc_client_rx_bufs(), nc_client_recv()); nc_rx_bufs() and nc_recv() of one
 * channel are not for it (EOPNOTSUPP). A channel's ring_size does not apply:
 * the ring has control.region.rx_buffers entries (a power of 2 at least).
 */
#define NC_CONNECT_ONE_RING 0x8

/** A packet buffer in an isolated client's region (nc_rx_bufs(), nc_tx_bufs_get()). */
struct nc_buf {
	void *data;                 /**< the frame, in the region: read-only when received (the
					 daemon's part of the region is mapped read-only) */
	uint32_t len;               /**< its length (nc_tx_bufs_get(): the most it may be) */
	uint32_t channel;           /**< received: the channel's id */
	uint32_t offset;            /**< where it is in the region: the daemon's name for it */
	uint32_t flags;             /**< received: NC_BUF_F_* */
};

/**
 * nc_buf.flags: the frame goes on in the next buffer. A frame longer than
 * a buffer (a datagram the daemon reassembled from fragments) comes in
 * several buffers, in order; the last has no NC_BUF_F_MORE. nc_recv()
 * joins them.
 */
#define NC_BUF_F_MORE 0x2

/** nc_nat_opts flags: which of its fields are given. */
#define NC_NAT_OPT_DST 0x1      /**< rewrite the destination address to dst */
#define NC_NAT_OPT_DPORT 0x2    /**< rewrite the destination port to dport */
#define NC_NAT_OPT_SRC 0x4      /**< rewrite the source address to src */
#define NC_NAT_OPT_SPORT 0x8    /**< rewrite the source port to sport */
#define NC_NAT_OPT_PORT 0x10    /**< send out of the daemon's port `port`, not the one it came in on */
#define NC_NAT_OPT_VIA 0x20     /**< send to the MAC `via`, not the kernel's next hop */
#define NC_NAT_OPT_REVERSE 0x40 /**< map each flow, and translate its replies back */

/** What a NAT channel writes (nc_channel_opts.nat). */
struct nc_nat_opts {
	uint32_t size;              /**< sizeof(struct nc_nat_opts): see "Structs that grow" */
	uint32_t flags;             /**< NC_NAT_OPT_* */
	uint8_t family;             /**< of dst and src: NC_AF_INET or NC_AF_INET6; 0 if neither */
	uint8_t dst[16], src[16];   /**< network order; IPv4 in the first 4 bytes */
	uint16_t dport, sport;      /**< host order */
	uint16_t port;              /**< the daemon's port (index in its config) */
	uint8_t via[6];             /**< the next hop's MAC */
};

/** nc_meter_opts.flags. */
#define NC_METER_OPT_BITS 0x1          /**< rates in bits a second, bursts in bytes (else packets) */
#define NC_METER_OPT_EXCEED_KERNEL 0x2 /**< a red packet goes to the kernel (else it is dropped) */
#define NC_METER_OPT_RFC4115 0x4       /**< RFC 4115's trTCM: peak_rate is its excess rate (EIR) */

/**
 * A channel's meter (nc_channel_opts.meter, nc_channel_set_meter()), as the
 * config's channels[].meter (docs/config.md): srTCM (RFC 2697) by default;
 * with a peak rate, RFC 2698's trTCM; with NC_METER_OPT_RFC4115, RFC 4115's.
 * Colour-blind. Green and yellow packets are delivered; red ones are dropped
 * (the channel's drop_meter) or go to the kernel. A bit rate counts the
 * frame's bytes as received, Ethernet header included, no FCS.
 */
struct nc_meter_opts {
	uint32_t size;              /**< sizeof(struct nc_meter_opts): see "Structs that grow" */
	uint32_t flags;             /**< NC_METER_OPT_* */
	uint64_t rate;              /**< committed rate: packets, or bits, a second */
	uint64_t burst;             /**< committed burst: packets, or bytes */
	uint64_t excess_burst;      /**< srTCM's or RFC 4115's excess burst; 0: none */
	uint64_t peak_rate;         /**< trTCM's peak rate, or RFC 4115's excess rate; 0: none */
	uint64_t peak_burst;        /**< trTCM's peak burst */
};

/**
 * A channel's counters (nc_channel_stats()): after its size, the fields
 * NC_CHANNEL_STATS lists (nc_common.h), with what each counts, in that
 * order. hits, delivered, bytes, drop_ring_full, drop_queue_bytes, dropped,
 * tx, tx_bytes, tx_dropped, tx_spoofed, tx_malformed, tx_no_route,
 * tx_no_neigh and tx_ring_full are uint64_t counters; rx_count and tx_count
 * the uint32_t packets in the rings now; drop_no_buf a uint64_t counter.
 * Counters are added at the end.
 */
struct nc_channel_stats {
	/**
	 * In: sizeof(struct nc_channel_stats) as the caller has it. Out: how
	 * much of it the library filled (NC_HAS() says whether a field is in).
	 */
	uint32_t size;
	uint32_t reserved;          /**< 0 */
	NC_CHANNEL_STATS(NC_STATS_U64, NC_STATS_U32)
};

/** Channel options (nc_channel_create()); pass NULL for the defaults. */
struct nc_channel_opts {
	uint32_t size;              /**< sizeof(struct nc_channel_opts): see "Structs that grow" */
	int drop;                   /**< non-zero: a drop channel (matches are counted and freed) */
	uint32_t ring_size;         /**< packets; 0: 1024 */
	uint32_t memory_limit_order;/**< the seed's: budget 2^order, 12..31; 0: unused */
	uint64_t queue_bytes;       /**< byte budget; 0: memory_limit_order, or 1 MiB */
	int tx;                     /**< non-zero: the channel may transmit (nc_tx_burst()) */
	uint16_t port;              /**< the daemon's port to transmit on (index in its config) */
	uint16_t reserved;          /**< 0 */
	/**
	 * Non-NULL: a NAT channel. The daemon rewrites the flow's packets as this
	 * says and sends them on; the channel has no rings. Takes uid 0 or the
	 * daemon's uid.
	 */
	const struct nc_nat_opts *nat;
	/**
	 * Non-NULL: the channel's meter (a daemon of control protocol 6 or
	 * later; an older one: EOPNOTSUPP). nc_channel_set_meter() changes it.
	 */
	const struct nc_meter_opts *meter;
	/**
	 * Non-zero: a channel this user's other clients may share, as sockets
	 * share a port with SO_REUSEPORT (an isolated client's deliver channel;
	 * a daemon of control protocol 7 or later, an older one: EOPNOTSUPP).
	 * A create with the same rule and priority, shared too, by another
	 * connection of the same user joins it: nc_channel_id() is then the
	 * channel's. Each consumer gets its share of the flows, by a hash of the
	 * flow's addresses and ports; a flow stays with one consumer while the
	 * consumers stay the same. The channel lives while any of them holds it.
	 */
	int shared;
};

/**
 * Connect to netchanneld and say HELLO: an isolated client maps the region
 * the daemon passes; a zero-copy one (NC_CONNECT_ZEROCOPY) initialises EAL as
 * its secondary process, unless NC_CONNECT_NO_EAL.
 *
 * @param socket_path
 *   The control socket, or NULL for NC_DEFAULT_SOCKET.
 * @param flags
 *   NC_CONNECT_*.
 * HELLO agrees on the newest control protocol both sides speak (this
 * library: versions 4 to 6, docs/protocol.md); with a
 * daemon that refuses this library's HELLO as a version 4 daemon does, it
 * says HELLO again as version 4. nc_client_info() says what was agreed.
 *
 * @return
 *   The client, or NULL with errno set: ENOENT/ECONNREFUSED (no daemon),
 *   EPROTO (no control protocol in common; a zero-copy client not of the
 *   daemon's exact build; or a region that does not hold up: nc_last_reason()
 *   says which),
 *   EPERM (zero-copy not allowed for this user), ENOSYS (zero-copy asked for, and
 *   libnetchannel_zc not linked), ENOMEM (the daemon could not
 *   make a region), or the error of socket, connect, mmap or rte_eal_init.
 */
struct nc_client *nc_connect(const char *socket_path, unsigned int flags);

/**
 * Close the connection: the daemon removes its channels. Mbufs the
 * application still holds must be freed before (nc_mbuf_free()); the
 * mbufs in this process's mempool cache are given back. If nc_connect() initialised
 * EAL, EAL is cleaned up too (rte_eal_cleanup()), and cannot be initialised
 * again in this process: an application that wants to reconnect initialises
 * EAL itself and passes NC_CONNECT_NO_EAL. rte_eal_cleanup() waits for
 * DPDK's memory hotplug lock, which another client killed inside its own
 * rte_eal_init() leaves held for ever (docs/hardening.md).
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
 *   The rule: 5-tuple with masks or ranges, and priority; its size set.
 * @param opts
 *   Options (their size set), or NULL.
 * @return
 *   The channel, or NULL with errno set: EINVAL (bad name, rule or options,
 *   or a size too small to hold the size itself), EOPNOTSUPP (fields this
 *   library does not know are set: nc_last_reason() names the struct),
 *   EPERM (control.allow does not let this user claim these ports), EEXIST
 *   (the name is taken), EBUSY (another channel has the same rule and
 *   priority, and is not a shared one of this user that opts.shared joins),
 *   ENOSPC (too many channels), EPIPE (the daemon is gone).
 */
struct nc_channel *nc_channel_create(struct nc_client *c, const char *name,
				     const struct nc_rule *rule,
				     const struct nc_channel_opts *opts);

/**
 * Put a meter on a channel this client created, change it, or take it off,
 * while its traffic flows: the daemon swaps the meter in place (the new one
 * starts with full buckets), and the channel keeps its packets, rings and
 * counters. A static channel's meter is the operator's (channel meter, the
 * config). nc_reconnect() creates the channel again with the last meter set.
 *
 * @param ch
 *   A channel of nc_channel_create().
 * @param meter
 *   The meter (its size set), or NULL to take it off.
 * @return
 *   0, or -errno: EINVAL (a meter the config would refuse: nc_last_reason()
 *   says why), EPERM (not this client's channel), EOPNOTSUPP (a daemon older
 *   than control protocol 6, or fields this library does not know), EPIPE.
 */
int nc_channel_set_meter(struct nc_channel *ch, const struct nc_meter_opts *meter);

/**
 * Attach to a static channel of the daemon's config (or one an operator
 * created). A deliver channel has one consumer at a time, until
 * nc_channel_destroy() or the client's end; an isolated client's attach has
 * the daemon deliver the channel into its region. If the operator destroys
 * the channel meanwhile, the next receive fails with ESTALE, and no packet of
 * a channel made later (whatever its id) reaches this handle.
 *
 * @return
 *   The channel, or NULL with errno set: ENOENT (no such channel), EPERM,
 *   EBUSY (another client is attached to it), EINVAL, EPIPE.
 */
struct nc_channel *nc_channel_attach(struct nc_client *c, const char *name);

/**
 * Destroy a channel this client created (the daemon removes it and drains
 * its ring), or detach from a static one (an isolated client's packets of it
 * then go to the channel's own ring again). The handle is freed either way.
 *
 * @return
 *   0, or a negative errno from the daemon (the handle is still freed).
 */
int nc_channel_destroy(struct nc_channel *ch);

/**
 * Isolated clients: receive up to n buffers in place, in the region. Each
 * buffer is the client's until it gives it back with nc_bufs_release(); a
 * client that keeps them all makes the daemon drop (drop_no_buf) what comes
 * for it, and nothing else. A buffer holds a whole frame unless its flags
 * have NC_BUF_F_MORE: then the frame goes on in the next one.
 *
 * @return
 *   The number of buffers: 0 when none is waiting, or when the daemon is
 *   gone (errno ESHUTDOWN: it stopped; EPIPE: it died), or the channel is
 *   (errno ESTALE: an operator destroyed the static channel), or for a
 *   zero-copy client or a NC_CONNECT_ONE_RING one (errno EOPNOTSUPP:
 *   nc_client_rx_bufs()).
 */
uint16_t nc_rx_bufs(struct nc_channel *ch, struct nc_buf *bufs, uint16_t n);

/**
 * NC_CONNECT_ONE_RING clients: receive up to n buffers of any of the
 * client's channels, in place, as nc_rx_bufs() does (each buffer's channel
 * says whose). Packets of a channel the client no longer has (destroyed, or
 * detached, while they waited on the ring) are given back to the daemon here
 * and not returned, even when a new channel has the same id.
 *
 * @return
 *   The number of buffers: 0 when none is waiting, or when the daemon is
 *   gone (errno EPIPE), or not such a client (errno EOPNOTSUPP).
 */
uint16_t nc_client_rx_bufs(struct nc_client *c, struct nc_buf *bufs, uint16_t n);

/**
 * NC_CONNECT_ONE_RING clients: the next frame of any of the client's
 * channels, copied out, as nc_recv() does for one channel.
 *
 * @param c
 *   The client.
 * @param buf
 *   Where the frame goes; len is its size (a longer frame is cut).
 * @param len
 *   buf's size.
 * @param channel
 *   Set to the frame's channel id (nc_channel_id()); may be NULL.
 * @param timeout_ms
 *   0: do not wait; -1: wait for ever; otherwise at most this long.
 * @return
 *   The frame's length, or -EAGAIN (nothing in time), -EPIPE (the daemon is
 *   gone), -EOPNOTSUPP (not such a client), or the error of nc_client_fd()
 *   or poll().
 */
ssize_t nc_client_recv(struct nc_client *c, void *buf, size_t len, uint32_t *channel,
		       int timeout_ms);

/**
 * NC_CONNECT_ONE_RING clients: the eventfd the daemon signals when the ring
 * goes from empty to non-empty after nc_client_arm(), for any channel. Asked
 * for on the first call, and owned by the client (do not close it).
 * nc_channel_fd() of its channels returns it too.
 *
 * @return
 *   The fd, or a negative errno: -EOPNOTSUPP (not such a client), -EMFILE, or
 *   another error of the request.
 */
int nc_client_fd(struct nc_client *c);

/**
 * NC_CONNECT_ONE_RING clients: ask to be woken through nc_client_fd().
 *
 * @return
 *   0: armed, the ring is empty, sleep; 1: packets are waiting already;
 *   -errno: not such a client, or nc_client_fd() failed.
 */
int nc_client_arm(struct nc_client *c);

/**
 * Give received buffers back to the daemon.
 *
 * @return
 *   How many were given back (all of them, unless the client gives back
 *   more than it holds), or -EOPNOTSUPP (not an isolated client).
 */
int nc_bufs_release(struct nc_client *c, const struct nc_buf *bufs, uint16_t n);

/**
 * Isolated clients: up to n free transmit buffers to fill (len says how
 * much each takes). Send them with nc_tx_bufs_send(), in the order given.
 *
 * @return
 *   How many: 0 with errno EAGAIN (every buffer is waiting for the daemon),
 *   EPIPE or EOPNOTSUPP.
 */
uint16_t nc_tx_bufs_get(struct nc_client *c, struct nc_buf *bufs, uint16_t n);

/**
 * Send filled buffers from nc_tx_bufs_get() on a channel that may transmit,
 * oldest first, with len set to each frame's length. The daemon copies each
 * and checks it as nc_tx_burst() says; ip non-zero: IP packets, to which it
 * adds the Ethernet header (as nc_tx_burst_ip()).
 *
 * @return
 *   How many were sent; fewer than n with errno EMSGSIZE when a frame is
 *   longer than the port's MTU allows, or EINVAL when a buffer is not the
 *   next one nc_tx_bufs_get() gave, or is longer than a buffer, or the
 *   channel cannot transmit.
 */
uint16_t nc_tx_bufs_send(struct nc_channel *ch, const struct nc_buf *bufs, uint16_t n, int ip);

/**
 * Zero-copy clients: receive up to n packets as mbufs. Give each back with
 * nc_mbuf_free() or nc_tx_burst().
 *
 * @return
 *   The number of packets: 0 when none is waiting, or when the client holds
 *   its quota of mbufs (errno ENOBUFS), or when the daemon is gone (errno
 *   EPIPE), or the channel is (errno ESTALE), or for an isolated client
 *   (errno EOPNOTSUPP).
 */
uint16_t nc_rx_burst(struct nc_channel *ch, struct rte_mbuf **pkts, uint16_t n);

/**
 * Transmit up to n Ethernet frames out of the channel's port, zero-copy.
 * Each frame must come from one of the channel's flows: its source address,
 * port and protocol must be in the channel's destination (a received packet
 * with its addresses and ports swapped is); others are dropped and counted
 * as tx_spoofed. The channel must have been created with opts.tx.
 *
 * @return
 *   How many were taken, at most 256 (the caller still owns the rest); 0 with errno
 *   EINVAL (no transmit ring) or EPIPE (the daemon is gone).
 */
uint16_t nc_tx_burst(struct nc_channel *ch, struct rte_mbuf **pkts, uint16_t n);

/**
 * Transmit up to n IP packets (no Ethernet header): the daemon adds one,
 * addressed to the next hop that the kernel's routing and neighbour tables
 * give for the port's exception interface. A packet whose next hop is not
 * resolved is dropped and counted (tx_no_neigh), and the kernel is asked to
 * resolve it. Otherwise as nc_tx_burst().
 */
uint16_t nc_tx_burst_ip(struct nc_channel *ch, struct rte_mbuf **pkts, uint16_t n);

/**
 * Copy a frame into an mbuf and transmit it, like the seed's write().
 *
 * @return
 *   len, or a negative errno: -EMSGSIZE (larger than an mbuf or a region's
 *   buffer, or than the port's MTU allows: its MTU plus the 14 bytes of the
 *   Ethernet header; nc_send_ip(): the MTU), -ENOBUFS (no mbuf, or the
 *   quota), -EAGAIN (the transmit ring is full), -EINVAL, -EPIPE.
 */
ssize_t nc_send(struct nc_channel *ch, const void *buf, size_t len);

/** As nc_send(), for an IP packet (see nc_tx_burst_ip()). */
ssize_t nc_send_ip(struct nc_channel *ch, const void *buf, size_t len);

/**
 * An mbuf from the daemon's pool, to fill and nc_tx_burst(). It counts
 * against the client's quota until given back. It comes off the client's
 * alloc ring, which a worker keeps filled once the client first allocates
 * (the first call waits for it), so the client never takes from the pool
 * itself and a kill at any moment loses none.
 *
 * @return
 *   The mbuf, or NULL with errno ENOBUFS (quota reached, or no mbuf from
 *   the worker within 100 ms: the pool is empty) or EPIPE (daemon gone).
 */
struct rte_mbuf *nc_mbuf_alloc(struct nc_client *c);

/**
 * Give back an mbuf (and its segments) from nc_rx_burst() or nc_mbuf_alloc().
 *
 * @param c
 *   The client it came to.
 * @param m
 *   The mbuf; NULL is a no-op.
 */
void nc_mbuf_free(struct nc_client *c, struct rte_mbuf *m);

/** nc_mbuf_free() for n mbufs. */
void nc_mbuf_free_bulk(struct nc_client *c, struct rte_mbuf **pkts, unsigned int n);

/** The client a channel belongs to. */
struct nc_client *nc_channel_client(const struct nc_channel *ch);

/**
 * The channel's counters, as the daemon has them now.
 *
 * @param ch
 *   The channel.
 * @param st
 *   Where they go: its size set (NC_SIZED(nc_channel_stats)); the library
 *   writes no further, and sets size to what it filled.
 * @return
 *   0, or a negative errno (-EPIPE: the daemon is gone; -EINVAL: st's size
 *   does not hold the size itself).
 */
int nc_channel_stats(const struct nc_channel *ch, struct nc_channel_stats *st);

/**
 * How many mbufs the client holds, and its quota.
 *
 * @return
 *   The number held.
 */
uint64_t nc_mbufs_held(const struct nc_client *c, uint64_t *quota);

/**
 * When the daemon received a packet: the TSC (rte_rdtsc() on this host) a
 * worker read right after the rx burst that brought it, so that
 * rte_rdtsc() - nc_mbuf_rx_tsc() is the time from the NIC's queue to this
 * client. Only with the daemon's config setting "rx_timestamps".
 *
 * @param c
 *   The client the mbuf came to.
 * @param m
 *   An mbuf from nc_rx_burst() (of any other, the value means nothing).
 * @return
 *   The TSC, or 0 when the daemon does not stamp packets.
 */
uint64_t nc_mbuf_rx_tsc(const struct nc_client *c, const struct rte_mbuf *m);

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
 *   The frame's length, or a negative errno: -EAGAIN (nothing in time),
 *   -ESHUTDOWN (the daemon stopped) or -EPIPE (it died): nc_reconnect();
 *   -ESTALE (the channel is gone: an operator destroyed it),
 *   -EOPNOTSUPP (a NC_CONNECT_ONE_RING client's: nc_client_recv()), or that
 *   of nc_channel_fd() or poll() (it could not sleep).
 */
ssize_t nc_recv(struct nc_channel *ch, void *buf, size_t len, int timeout_ms);

/**
 * The channel's eventfd, to poll() with other descriptors: the daemon signals
 * it when the ring goes from empty to non-empty after nc_channel_arm(). Read
 * it (8 bytes) to reset it; drain the channel with nc_rx_burst(), then arm
 * again before sleeping. A busy client that never arms costs no syscall.
 * The first call asks the daemon for it (one request): a client that only
 * polls holds no fd for the channel, and neither does the daemon.
 *
 * @return
 *   The fd (owned by the channel: do not close it), or a negative errno:
 *   -EINVAL (a channel without a receive ring), -EMFILE (no fd left, here or
 *   in the daemon) or another error of the request.
 */
int nc_channel_fd(struct nc_channel *ch);

/**
 * Ask to be woken through nc_channel_fd() when a packet arrives.
 *
 * @return
 *   0: armed, the ring is empty, sleep; 1: packets are waiting already, do not
 *   sleep; -EINVAL: a channel with no ring; -errno: nc_channel_fd() failed.
 */
int nc_channel_arm(struct nc_channel *ch);

/**
 * Ask to be woken through nc_channel_fd() when the transmit ring has room
 * again (nc_send() or nc_send_ip() returned -EAGAIN: the daemon holds the
 * client's packets to a transmit meter, channels[].tx_meter or its user's
 * limit, or the port is slower than the client). The daemon signals the fd
 * once it has taken packets off the ring and half of it is free (a client
 * that refills it wakes once for half a ring); the fd also signals received
 * packets after nc_channel_arm(), so after a wake-up try both. An isolated
 * client's; a daemon of control protocol 6 or later. A zero-copy client's
 * nc_tx_burst() takes fewer instead: it retries.
 *
 * @return
 *   0: armed, the ring is full, sleep; 1: there is room already, do not
 *   sleep; -EINVAL: a channel that does not transmit; -EOPNOTSUPP: a
 *   zero-copy client's channel; -errno: nc_channel_fd() failed.
 */
int nc_channel_arm_tx(struct nc_channel *ch);

/** The channel's id in the daemon. */
uint32_t nc_channel_id(const struct nc_channel *ch);

/**
 * The MAC of the port a channel transmits on: the source MAC its frames
 * must carry (others are dropped, tx_spoofed_mac). IP packets
 * (nc_send_ip(), NC_DESC_F_IP) get it from the daemon.
 *
 * @return
 *   0 with mac set, or -EINVAL for a channel that cannot transmit.
 */
int nc_channel_tx_mac(const struct nc_channel *ch, uint8_t mac[6]);

/**
 * After the daemon has gone (ESHUTDOWN or EPIPE): connect again to a daemon
 * on the same socket, waiting for one to answer, and make this client's
 * channels again under the same handles: each one it created, from the same
 * name, rule and options; each static one, attached again. Buffers held from
 * the old daemon's region are gone with it (do not give them back).
 *
 * @param c
 *   The client (isolated or control; a zero-copy one: -EOPNOTSUPP).
 * @param timeout_ms
 *   How long to wait for a daemon to answer; -1: for ever.
 * @return
 *   0; or a negative errno: -ETIMEDOUT (no daemon answered in time: the
 *   client stays gone, EPIPE; call again), a refusal of HELLO (-EPERM,
 *   -EPROTO, ...), or that of the first channel the new daemon refused (that
 *   handle's calls then fail with it; the others work).
 */
NC_EXPERIMENTAL
int nc_reconnect(struct nc_client *c, int timeout_ms);

/** What a connection agreed with the daemon (nc_client_info()). */
struct nc_client_info {
	/**
	 * In: sizeof(struct nc_client_info) as the caller has it. Out: how
	 * much of it the library filled.
	 */
	uint32_t size;
	uint32_t control_protocol;  /**< the control protocol's version HELLO agreed on */
	/** The daemon's oldest and newest; a daemon of version 4 does not say (both are 4). */
	uint32_t daemon_min_protocol, daemon_max_protocol;
	uint32_t region_layout;     /**< an isolated client's region's layout (1 or 2), or 0 */
	uint32_t reserved;          /**< 0 */
	char daemon_build[NC_BUILD_SIZE]; /**< the daemon's build; "" from a daemon of version 4 */
};

/**
 * What the connection agreed with the daemon at HELLO: the control
 * protocol's version, the daemon's range, and the daemon's build.
 *
 * @param c
 *   The client.
 * @param info
 *   Where it goes: its size set (NC_SIZED(nc_client_info)).
 * @return
 *   0, or -EINVAL (no client, or info's size does not hold the size itself).
 */
NC_EXPERIMENTAL
int nc_client_info(const struct nc_client *c, struct nc_client_info *info);

/**
 * Run a CLI command in the daemon, as `netchanneld -i` or `ncctl -c` would.
 *
 * @param c
 *   The client (NC_CONNECT_CONTROL is enough).
 * @param line
 *   The command, e.g. "show port stats all".
 * @param json
 *   Non-zero: the output is one line of JSON.
 * @param out
 *   The output, or on error the daemon's message saying what was wrong;
 *   NUL terminated, to free().
 * @return
 *   0, or a negative errno: -EINVAL (a bad command), -EPERM (a command that
 *   changes the daemon, from a user other than root or the daemon's), -ENOENT,
 *   -EPIPE, ...
 */
int nc_cli(struct nc_client *c, const char *line, int json, char **out);

/**
 * As nc_cli(), and take the file descriptor that a command hands its caller
 * with the reply: "capture" gives the read end of a pipe that carries the
 * capture as pcapng until EOF.
 *
 * @param fd
 *   The descriptor (close-on-exec, the caller's to close), or -1 if the
 *   reply carried none; NULL: one that comes is closed.
 * @return
 *   As nc_cli().
 */
int nc_cli_fd(struct nc_client *c, const char *line, int json, char **out, int *fd);

/**
 * Fill in a rule for the flows to one local port, as the examples take it
 * on their command lines: protocol, destination port, and optionally a
 * destination address or prefix.
 *
 * @param r
 *   The rule, its size set (NC_SIZED(nc_rule)): the library clears what the
 *   size covers, then fills it in (priority 0).
 * @param proto
 *   "tcp", "udp", "udplite", "sctp", or a number 0..255.
 * @param dst
 *   "192.0.2.1", "2001:db8::/64", or NULL for any address of either family.
 * @param dport
 *   The destination port, 0..65535.
 * @return
 *   0, or -EINVAL (a bad argument, or r's size too small for the fields it
 *   needs: size, family, proto, proto_mask, dst_len, dst and dport).
 */
int nc_rule_flow(struct nc_rule *r, const char *proto, const char *dst, long dport);

/**
 * The library's version: the release and the git describe of its build, as
 * "0.7.0 (v0.7.0-12-g1234abc)". Every tool's --version prints it.
 */
const char *nc_version(void);

/**
 * A description of an error this library or the daemon returned (positive or
 * negative errno). Thread-safe.
 */
const char *nc_strerror(int err);

/**
 * The daemon's own reason for the last refusal on this thread, when it gave
 * one: the limit it names ("control.limits.channels: uid 1000 would hold 65,
 * over its 64"), or how busy it is ("the daemon is busy: 64 clients").
 * Print it beside nc_strerror() of the error.
 *
 * @return
 *   The reason, or "" when the last refusal came without one. Valid until the
 *   thread's next call into the library.
 */
const char *nc_last_reason(void);

/** printf() arguments for "%s%s": ": " and the daemon's reason r, or nothing. */
#define NC_REASON(r) ((r)[0] ? ": " : ""), (r)

#ifdef __cplusplus
}
#endif

#endif /* NETCHANNEL_H */
