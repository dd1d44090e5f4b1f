/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * netchanneld's control protocol: the messages of its control socket.
 *
 * Control: a Unix SOCK_SEQPACKET socket (the config's control.socket). One
 * message is one request or one reply; every request carries an id that its
 * reply repeats, with a status (0 or -errno). The first request must be
 * HELLO, which agrees on a version; an isolated client's reply carries its region
 * (nc_region.h, SCM_RIGHTS). A message that is truncated, oversized, of an
 * unknown type, of the wrong length, or out of order gets a reply with
 * -EBADMSG, -EMSGSIZE, -EOPNOTSUPP, -EINVAL or -EPROTO; a connection that sends
 * NC_CTL_MAX_ERRORS bad messages is closed. Neither affects other clients.
 * Unasked messages have for_id 0: a refusal as the daemon accepts the
 * connection (every slot taken), and, from version 5, the notice that the
 * daemon is stopping (status -ESHUTDOWN, type 0, the reason as its body),
 * sent to every client before it takes anything down.
 * Channels a connection created live as long as it does. The reply to
 * CHANNEL_EVENTFD carries the channel's eventfd (SCM_RIGHTS), which the
 * daemon makes on the first such request: a client that only polls never
 * costs the daemon (or itself) a file descriptor, so a daemon can have more
 * channels than its open-file limit.
 */
#ifndef NC_CTL_H
#define NC_CTL_H

#include <stdint.h>

#include "nc_common.h"
#include "nc_shm.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NC_CTL_MAGIC 0x6e63u          /* "nc" */
/**
 * The control protocol's version: the messages of this header and their
 * meaning. The newest this build speaks; it speaks every one down to
 * NC_CONTROL_PROTOCOL_MIN, and HELLO agrees on the highest both sides speak.
 * - 4: one HELLO version; an isolated client's region in one part (layout 1).
 * - 5: HELLO carries each side's range and build; the region in two parts,
 *   the daemon's read-only (layout 2).
 * - 6: meters: CHANNEL_METER, and CHANNEL_CREATE's NC_CREATE_F_METER.
 * - 7: shared channels of one user's connections: CHANNEL_CREATE's NC_CREATE_F_SHARED.
 */
#define NC_CONTROL_PROTOCOL_VERSION 7
/** The oldest control protocol this build speaks. */
#define NC_CONTROL_PROTOCOL_MIN 4
#define NC_CTL_MAX_MSG 65536          /**< largest message either side sends */
#define NC_CTL_MAX_ERRORS 16          /**< bad messages before the daemon hangs up */
/** The longest reason a refusal's body carries (version 4's libraries keep 159 bytes). */
#define NC_CTL_REASON_MAX 512

/** Request types. */
enum nc_ctl_type {
	NC_CTL_HELLO = 1,          /**< struct nc_ctl_hello -> struct nc_ctl_hello_reply */
	NC_CTL_CHANNEL_CREATE = 2, /**< struct nc_ctl_create [+ nc_ctl_nat] [+ nc_ctl_meter] -> struct nc_ctl_channel */
	NC_CTL_CHANNEL_ATTACH = 3, /**< struct nc_ctl_name -> struct nc_ctl_channel */
	NC_CTL_CHANNEL_DESTROY = 4,/**< struct nc_ctl_id -> nothing */
	NC_CTL_CHANNEL_LIST = 5,   /**< nothing -> JSON text: every channel */
	NC_CTL_STATS = 6,          /**< nothing -> JSON text: every counter */
	NC_CTL_CLI = 7,            /**< struct nc_ctl_cli -> the command's output (text or JSON) */
	NC_CTL_CHANNEL_STATS = 8,  /**< struct nc_ctl_id -> struct nc_channel_stats */
	NC_CTL_CHANNEL_EVENTFD = 9,/**< struct nc_ctl_id -> nothing + the channel's eventfd */
	NC_CTL_CLIENT_EVENTFD = 10,/**< nothing -> nothing + the eventfd of a NC_HELLO_F_ONE_RING region's ring */
	NC_CTL_CHANNEL_METER = 11, /**< struct nc_ctl_meter -> nothing (from version 6) */
	NC_CTL_TYPE_MAX
};

/** Every request starts with this. */
struct nc_ctl_req {
	uint16_t magic;            /**< NC_CTL_MAGIC */
	uint16_t type;             /**< enum nc_ctl_type */
	uint32_t id;               /**< chosen by the client, repeated in the reply */
	uint32_t len;              /**< bytes of body that follow */
	uint32_t reserved;         /**< 0 */
};

/** Every reply starts with this. */
struct nc_ctl_rep {
	uint16_t magic;            /**< NC_CTL_MAGIC */
	uint16_t type;             /**< the request's type */
	uint32_t for_id;           /**< the request's id */
	int32_t status;            /**< 0, or -errno */
	uint32_t len;              /**< bytes of body that follow */
};

/**
 * HELLO. Version 4's body is its first 16 bytes (min_version 0: version
 * only), which is what a version 4 daemon takes and all it takes: a longer
 * HELLO gets -EINVAL from it, and the client falls back.
 */
struct nc_ctl_hello {
	uint32_t version;          /**< the newest control protocol the client speaks */
	uint32_t pid;              /**< informational; the daemon trusts SO_PEERCRED */
	uint32_t flags;            /**< NC_HELLO_F_*; 0: an isolated client */
	uint32_t min_version;      /**< the oldest it speaks; 0: version only (version 4's reserved) */
	/** From version 5: the client's build, NUL terminated. Zero-copy needs the daemon's own. */
	char build[NC_BUILD_SIZE];
};

/** The bytes of a version 4 HELLO. */
#define NC_CTL_HELLO_V4_SIZE 16

/*
 * nc_ctl_hello flags. Without either, the connection is an isolated client:
 * the reply carries its region (nc_region.h) as an fd.
 */
#define NC_HELLO_F_ZEROCOPY 0x1    /**< a DPDK secondary process (nc_shm.h); control.allow's zero_copy */
#define NC_HELLO_F_CONTROL 0x2     /**< requests only: no region, and no deliver channels (-EINVAL) */
/**
 * An isolated client whose region has one rx ring, shared by all its
 * channels (nc_region_hdr.nrx 1), rather than a ring per channel: it may
 * have as many channels as its control.limits allow, not one per ring, and
 * sleeps on one eventfd (CLIENT_EVENTFD).
 */
#define NC_HELLO_F_ONE_RING 0x4

/**
 * HELLO's reply. Version 4's is its first 120 bytes, exactly; from version 5
 * the daemon's range and build follow.
 */
struct nc_ctl_hello_reply {
	uint32_t version;          /**< the version agreed on: the highest both sides speak */
	uint32_t lcore_id;         /**< the lcore id a client's EAL must use (--lcores ID@cpu) */
	char file_prefix[64];      /**< the daemon's --file-prefix */
	char mbuf_pool[NC_NAME_SIZE]; /**< the pool to allocate transmit mbufs from */
	uint32_t slot;             /**< this connection's entry in the client table */
	uint32_t flags;            /**< the request's NC_HELLO_F_* */
	uint64_t region_size;      /**< bytes of the region passed with the reply, or 0 */
	/* From version 5. */
	uint32_t min_version;      /**< the oldest control protocol the daemon speaks */
	uint32_t max_version;      /**< the newest */
	uint32_t region_layout;    /**< the region's layout (nc_region_hdr.version), or 0 */
	uint32_t reserved;         /**< 0 */
	char build[NC_BUILD_SIZE]; /**< the daemon's build, NUL terminated */
};

/** The bytes of a version 4 HELLO reply. */
#define NC_CTL_HELLO_REPLY_V4_SIZE 120

/** A rule on the wire: addresses in network order, ports in host order. */
struct nc_ctl_rule {
	uint8_t family;            /**< 0 any, 4 IPv4, 6 IPv6 */
	uint8_t proto;
	uint8_t proto_mask;        /**< 0 any, 0xff exact */
	uint8_t dst_len, src_len;
	uint8_t dport_kind, sport_kind; /**< 0 any, 1 range lo..hi, 2 value lo / mask hi */
	uint8_t reserved;
	uint8_t dst[16], src[16];
	uint16_t dport_lo, dport_hi, sport_lo, sport_hi;
	uint32_t priority;
};

struct nc_ctl_create {
	char name[NC_NAME_SIZE];   /**< unique channel name */
	struct nc_ctl_rule rule;
	uint32_t action;           /**< enum nc_dir_action */
	uint32_t ring_size;        /**< packets; 0: 1024 */
	uint32_t memory_limit_order; /**< the seed's: 12..31, or 0 */
	uint64_t queue_bytes;      /**< byte budget; 0: 2^memory_limit_order, or 1 MiB */
	uint32_t flags;            /**< NC_CREATE_F_* */
	uint16_t port;             /**< the port it transmits on (index in the config) */
	uint16_t reserved;         /**< 0 */
};

/** nc_ctl_create flags. */
#define NC_CREATE_F_TX 0x1         /**< give the channel a transmit ring */
/** A struct nc_ctl_meter (id 0) ends the body: the channel's meter (from version 6). */
#define NC_CREATE_F_METER 0x2
/**
 * A deliver channel of an isolated client that its user's other connections
 * may share, as sockets of one user share a port with SO_REUSEPORT (from
 * version 7): one that asks for the same rule and priority with this flag
 * joins it (the reply is the channel's), and each gets its share of the
 * flows, by a hash of the flow. It lives while any of them holds it.
 */
#define NC_CREATE_F_SHARED 0x4

/**
 * A channel's meter: CHANNEL_METER's body (for channel id), and the tail of
 * a CHANNEL_CREATE with NC_CREATE_F_METER (id 0). The units are the config's
 * (docs/config.md, channels[].meter): packets, or with NC_METER_F_BITS bits a
 * second and bytes. A peak rate makes it RFC 2698's trTCM; NC_METER_F_RFC4115
 * makes peak_rate RFC 4115's excess rate. CHANNEL_METER with every field 0
 * takes the meter off.
 */
struct nc_ctl_meter {
	uint32_t id;               /**< CHANNEL_METER: the channel; in CHANNEL_CREATE: 0 */
	uint32_t flags;            /**< NC_METER_F_* */
	uint64_t rate;             /**< committed rate (CIR) */
	uint64_t burst;            /**< committed burst (CBS) */
	uint64_t excess_burst;     /**< srTCM's or RFC 4115's excess burst (EBS); 0: none */
	uint64_t peak_rate;        /**< trTCM's peak rate (PIR), or RFC 4115's excess rate (EIR) */
	uint64_t peak_burst;       /**< trTCM's peak burst (PBS) */
};

/** nc_ctl_meter flags. */
#define NC_METER_F_BITS 0x1        /**< rates in bits a second, bursts in bytes */
#define NC_METER_F_EXCEED_KERNEL 0x2 /**< a red packet goes to the kernel, not dropped */
#define NC_METER_F_RFC4115 0x4     /**< RFC 4115's trTCM: peak_rate is the EIR */

/**
 * What a NAT channel writes. It follows struct nc_ctl_create in the same
 * CHANNEL_CREATE body when the action is NC_ACTION_NAT (and only then).
 * Creating a NAT channel takes uid 0 or the daemon's uid, besides
 * control.allow: it sends traffic on to any address.
 */
struct nc_ctl_nat {
	uint32_t flags;            /**< NC_NAT_F_*: which fields are given */
	uint8_t family;            /**< of dst and src: 4 or 6; 0 if neither is given */
	uint8_t via[6];            /**< the next hop's MAC, with NC_NAT_F_VIA */
	uint8_t reserved;          /**< 0 */
	uint16_t dport, sport;     /**< host order */
	uint16_t port;             /**< send out of this port (index in the config), with NC_NAT_F_PORT */
	uint16_t reserved2;        /**< 0 */
	uint8_t dst[16], src[16];  /**< network order; IPv4 in the first 4 bytes, the rest 0 */
};

/** nc_ctl_nat flags. */
#define NC_NAT_F_DST 0x1           /**< rewrite the destination address */
#define NC_NAT_F_DPORT 0x2         /**< rewrite the destination port */
#define NC_NAT_F_SRC 0x4           /**< rewrite the source address */
#define NC_NAT_F_SPORT 0x8         /**< rewrite the source port */
#define NC_NAT_F_PORT 0x10         /**< out of port `port`, not the one the packet came in on */
#define NC_NAT_F_VIA 0x20          /**< to MAC `via`, not the kernel's next hop */
#define NC_NAT_F_REVERSE 0x40      /**< map each flow, and translate its replies back */

/**
 * A CLI command line (the commands of netchanneld -i). The reply's body is
 * the output; on error the status is -errno and the body says what was
 * wrong. Commands that change the daemon need uid 0 or the daemon's uid.
 */
struct nc_ctl_cli {
	uint32_t flags;            /**< NC_CLI_F_* */
	char line[];               /**< the command, not NUL terminated, at most 1023 bytes */
};

#define NC_CLI_F_JSON 0x1          /**< answer in JSON */
#define NC_CLI_MAX_LINE 1024       /**< a command line's bytes, with a NUL: 1023 on the wire */

struct nc_ctl_name {
	char name[NC_NAME_SIZE];
};

struct nc_ctl_id {
	uint32_t id;
};

/** A channel, as CREATE and ATTACH return it. */
struct nc_ctl_channel {
	uint32_t id;               /**< index in the directory */
	uint32_t action;
	uint64_t generation;       /**< the directory entry's */
	char name[NC_NAME_SIZE];
	char rx_ring[NC_NAME_SIZE];
	char tx_ring[NC_NAME_SIZE];    /**< "" without NC_CREATE_F_TX */
	uint32_t region_ring;          /**< an isolated client's deliver channel: its rx ring there */
	uint32_t flags;                /**< NC_CHANNEL_F_* */
	/** With NC_CHANNEL_F_TX: its port's MAC, the only source MAC its frames may have. */
	uint8_t tx_mac[6];
	/** With NC_CHANNEL_F_TX: its port's MTU, the longest IP packet it may send (0: unsaid). */
	uint16_t tx_mtu;
};

/** nc_ctl_channel flags. */
#define NC_CHANNEL_F_REGION 0x1    /**< delivered into the client's region (region_ring) */
#define NC_CHANNEL_F_TX 0x2        /**< it may transmit */

/** A channel's counters, the reply to CHANNEL_STATS (nc_channel_stats() copies them): NC_CHANNEL_STATS. */
struct nc_ctl_channel_stats {
	NC_CHANNEL_STATS(NC_STATS_U64, NC_STATS_U32)
};

_Static_assert(sizeof(struct nc_ctl_channel_stats) == 128,
	       "nc_ctl_channel_stats layout is part of the protocol");
_Static_assert(sizeof(struct nc_ctl_hello) == NC_CTL_HELLO_V4_SIZE + NC_BUILD_SIZE,
	       "nc_ctl_hello layout is part of the protocol");
_Static_assert(__builtin_offsetof(struct nc_ctl_hello, build) == NC_CTL_HELLO_V4_SIZE,
	       "version 4's HELLO is the head of version 5's");
_Static_assert(sizeof(struct nc_ctl_hello_reply) == NC_CTL_HELLO_REPLY_V4_SIZE + 16 + NC_BUILD_SIZE,
	       "nc_ctl_hello_reply layout is part of the protocol");
_Static_assert(__builtin_offsetof(struct nc_ctl_hello_reply, min_version) ==
	       NC_CTL_HELLO_REPLY_V4_SIZE, "version 4's reply is the head of version 5's");
_Static_assert(sizeof(struct nc_ctl_req) == 16, "nc_ctl_req layout is part of the protocol");
_Static_assert(sizeof(struct nc_ctl_rep) == 16, "nc_ctl_rep layout is part of the protocol");
_Static_assert(sizeof(struct nc_ctl_rule) == 52, "nc_ctl_rule layout is part of the protocol");
_Static_assert(sizeof(struct nc_ctl_create) == 112, "nc_ctl_create layout is part of the protocol");
_Static_assert(sizeof(struct nc_ctl_nat) == 52, "nc_ctl_nat layout is part of the protocol");
_Static_assert(sizeof(struct nc_ctl_channel) == 128, "nc_ctl_channel layout is part of the protocol");
_Static_assert(sizeof(struct nc_ctl_meter) == 48, "nc_ctl_meter layout is part of the protocol");

#ifdef __cplusplus
}
#endif

#endif /* NC_CTL_H */
