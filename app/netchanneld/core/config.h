/* SPDX-License-Identifier: BSD-3-Clause */
/* netchanneld's JSON config, loaded and checked before anything starts. */
#ifndef NETCHANNELD_CONFIG_H
#define NETCHANNELD_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "core/stats.h"
#include "nc_proto.h"
#include "nc_trie.h"

#define NCD_NAME_MAX 32          /* channel names, with the NUL */
#define NCD_PORT_NAME_MAX 16     /* port names: also the TAP's interface name (IFNAMSIZ) */
#define NCD_MAX_PORTS 16
#define NCD_MAX_QUEUES 64
#define NCD_MAX_WORKERS 64
/* max_channels: the default, and the most (channel ids are 17 bits in mbuf marks, see offload.c) */
#define NCD_DEFAULT_CHANNELS 4096
#define NCD_MAX_CHANNELS 131072
#define NCD_DEFAULT_HEAP_RESERVE_MB 64
#define NCD_MAX_HEAP_RESERVE_MB 65536
#define NCD_MAX_EAL_ARGS 64
#define NCD_SOCKET_PATH_MAX 108     /* sizeof(struct sockaddr_un.sun_path), with the NUL */
/* Fragments a datagram may have: rte_ip_frag's RTE_LIBRTE_IP_FRAG_MAX_FRAG (frag.c checks). */
#define NCD_FRAG_MAX_PIECES 8
#define NCD_BURST 32             /* packets a worker takes from a queue or ring at once */

enum ncd_offload { NCD_OFFLOAD_AUTO, NCD_OFFLOAD_OFF, NCD_OFFLOAD_REQUIRED };

/* Which fields a translation writes (ncd_nat_xlate.flags). */
#define NCD_NAT_DST   0x1
#define NCD_NAT_DPORT 0x2
#define NCD_NAT_SRC   0x4
#define NCD_NAT_SPORT 0x8
#define NCD_NAT_PORTS (NCD_NAT_DPORT | NCD_NAT_SPORT)
#define NCD_NAT_ADDRS (NCD_NAT_DST | NCD_NAT_SRC)

/** A translation: the fields whose flag is set are written. */
struct ncd_nat_xlate {
	uint32_t flags;          /* NCD_NAT_* */
	uint16_t sport, dport;   /* host order */
	uint8_t src[16], dst[16];/* IPv4 in the first 4 bytes */
};

/* A NAT channel's translation, and where its packets go. */
struct ncd_nat_conf {
	struct ncd_nat_xlate x;      /* what is rewritten */
	uint8_t family;              /* of x's addresses (0: only ports are rewritten) */
	bool has_port;               /* out of port `port`; otherwise the port it came in on */
	uint16_t port;
	bool has_via;                /* to this MAC; otherwise to the kernel's next hop */
	uint8_t via[6];
	bool reverse;                /* keep a mapping per flow, and translate the replies back */
};

/* exception.host: what the host's kernel has on the exception TAP, applied as it is made. */
#define NCD_HOST_MAX 16
struct ncd_host_addr {
	uint8_t family;              /* NC_TRIE_AF_INET or _INET6 */
	uint8_t len;                 /* prefix length */
	union nc_trie_addr a;
};

struct ncd_host_route {
	struct ncd_host_addr dst;    /* len 0: the default route */
	union nc_trie_addr gw;
	bool has_gw;
	uint32_t metric;
};

struct ncd_host_conf {
	struct ncd_host_addr addr[NCD_HOST_MAX];
	unsigned int naddr;
	struct ncd_host_route route[NCD_HOST_MAX];
	unsigned int nroute;
	uint16_t mtu;                /* 0: the kernel's */
};

/*
 * exception.police (docs/config.md): what goes to the exception device is
 * metered in buckets by kind, each a single-rate token bucket (srTCM without
 * an excess burst): ARP, ND, ICMP, each protect entry, and the rest.
 */
#define NCD_POLICE_NAME_MAX 24   /* a bucket's name (enum ncd_police_bucket: core/stats.h) */

struct ncd_police_rate {
	bool bytes;                  /* rate in bytes a second and burst in bytes; else packets */
	uint64_t rate, burst;
};

struct ncd_police_conf {
	bool on;                     /* exception.police given */
	unsigned int nprotect;
	struct ncd_police_rate b[NCD_POLICE_MAX];
	char name[NCD_POLICE_MAX][NCD_POLICE_NAME_MAX]; /* "arp", ..., each protect entry's */
	struct nc_trie_rule protect[NCD_POLICE_PROTECT_MAX];
};

struct ncd_port_conf {
	char name[NCD_PORT_NAME_MAX];
	char *device;
	uint16_t rx_queues;
	uint16_t mtu;
	enum ncd_offload flow_offload;
	char *exc_device;            /* NULL: "none" (misses are dropped and counted) */
	bool exc_mac_port;           /* give the exception device the port's MAC */
	uint8_t exc_mac[6];          /* otherwise this one */
	bool exc_mac_set;
	bool bifurcated;             /* exception mode bifurcated: isolated flow rules, no TAP */
	bool xdp;                    /* exception mode xdp: fail-open XDP program, addresses on the port */
	char *xdp_prog;              /* its object file (exception.program, or the one installed) */
	enum ncd_xdp_attach { NCD_XDP_AUTO, NCD_XDP_NATIVE, NCD_XDP_GENERIC } xdp_attach;
	bool has_host;               /* exception.host given */
	bool host_manager;           /* exception.host "manager": the TAP's host config is not kept */
	struct ncd_host_conf host;
	struct ncd_police_conf police;
};

struct ncd_rxq_conf {
	uint16_t port;               /* index in ports[] */
	uint16_t queue;
};

/* workers[].idle: what a worker does when a loop finds nothing to do (docs/config.md). */
enum ncd_idle {
	NCD_IDLE_POLL,               /* spin: the lowest latency, a core all the time */
	NCD_IDLE_ADAPTIVE,           /* spin a while, then sleep (on rx wake-ups, or timed) */
	NCD_IDLE_INTERRUPT,          /* sleep at once on rx wake-ups: every queue must have one */
};

struct ncd_worker_conf {
	unsigned int lcore;
	enum ncd_idle idle;
	struct ncd_rxq_conf rx[NCD_MAX_PORTS * NCD_MAX_QUEUES];
	unsigned int nrx;
};

/* A static channel's "attach": who may attach to it besides root (each -1: any). */
#define NCD_ATTACH_MAX 8
struct ncd_attach_conf {
	int64_t uid;
	int64_t gid;
};

/*
 * channels[].meter (docs/config.md): rte_meter's srTCM (RFC 2697), trTCM
 * (RFC 2698) or RFC 4115 trTCM, colour-blind, in packets or in bytes.
 */
enum ncd_meter_kind { NCD_METER_NONE, NCD_METER_SRTCM, NCD_METER_TRTCM, NCD_METER_RFC4115 };

struct ncd_meter_conf {
	enum ncd_meter_kind kind;
	bool bytes;                  /* rates in bytes a second and buckets in bytes; else packets */
	bool exceed_kernel;          /* a red packet goes to the kernel; otherwise it is dropped */
	uint64_t rate, burst;        /* committed: CIR, CBS */
	uint64_t excess_burst;       /* srTCM's EBS, RFC 4115's EBS */
	uint64_t peak_rate, peak_burst; /* trTCM's PIR, PBS; RFC 4115's EIR in peak_rate */
};

struct ncd_channel_conf {
	char name[NCD_NAME_MAX];
	struct nc_trie_rule rule;
	enum nc_dir_action action;
	uint32_t ring_size;
	uint64_t queue_bytes;
	bool tx;                     /* it has a transmit ring */
	bool shared;                 /* "consumers": "shared": isolated clients share its flows */
	uint8_t nattach;             /* "attach": users who may attach to it besides root */
	struct ncd_attach_conf attach[NCD_ATTACH_MAX];
	uint16_t port;               /* the port it transmits on (index in ports[]) */
	bool steer;                  /* offload: steer its flow to rx queue `queue` */
	uint16_t queue;
	struct ncd_nat_conf nat;     /* action NC_ACTION_NAT */
	struct ncd_meter_conf meter; /* kind NCD_METER_NONE: no meter */
	struct ncd_meter_conf tx_meter; /* what its clients send, held to it; NONE: not held */
};

/* Connections at once, with or without HELLO; 64 of them (NC_MAX_CLIENTS) may be clients. */
#define NCD_MAX_CONNECTIONS 128

/* control.limits: what one user (uid) may hold at once, over all of its connections. */
struct ncd_limits {
	uint32_t connections;        /* connections, with or without HELLO */
	uint32_t channels;           /* channels its clients created */
	uint64_t memory;             /* bytes: its regions and its channels' rings */
	uint32_t eventfds;           /* eventfds the daemon made for its channels */
	uint32_t mbufs;              /* mbufs its zero-copy clients may make the daemon hold */
	uint64_t tx_pps, tx_bps;     /* what its clients may send a second, together; 0: no limit */
};

struct ncd_allow_conf {
	int64_t uid;                 /* -1: any */
	int64_t gid;                 /* -1: any */
	uint16_t port_lo, port_hi;   /* which dports the user may claim */
	bool zero_copy;              /* it may connect as a zero-copy (secondary process) client */
	bool view_all;               /* "view": "all": it sees every client and channel */
	bool preempt;                /* its channels may take flows of others' channels */
	bool has_limits;             /* limits replaces control.limits for the users it names */
	struct ncd_limits limits;
};

/* control.region: an isolated client's region (channel/region.c). */
struct ncd_region_conf {
	uint32_t rx_ring_size;       /* entries of each channel's rx ring */
	uint32_t rx_buffers;         /* buffers the daemon copies packets into */
	uint32_t tx_ring_size;       /* entries of the tx ring, and tx buffers */
};

struct ncd_config {
	const char *path;
	char *eal[NCD_MAX_EAL_ARGS];
	unsigned int neal;
	uint32_t mbufs;
	uint32_t mbuf_cache;
	struct ncd_port_conf ports[NCD_MAX_PORTS];
	unsigned int nports;
	struct ncd_worker_conf *workers;
	unsigned int nworkers;
	char *control_socket;
	char *state_dir;             /* state_dir: what the daemon keeps across restarts (host_keep.c) */
	int64_t socket_uid, socket_gid; /* control.owner, .group: -1 for the daemon's */
	uint32_t socket_mode;        /* control.mode */
	uint32_t hello_timeout_ms;   /* control.hello_timeout_ms: a connection's time to say HELLO */
	struct ncd_region_conf region;
	struct ncd_limits limits;    /* control.limits: every user's but root's, unless allow says */
	uint32_t mbuf_quota;         /* most mbufs one client may hold */
	struct ncd_allow_conf *allow;
	unsigned int nallow;
	struct ncd_channel_conf *channels;
	unsigned int nchannels;
	uint32_t max_channels;       /* channels of every kind at once: config, clients, CLI */
	bool telemetry;
	bool rx_timestamps;           /* workers stamp received mbufs with the TSC */
	uint32_t heap_reserve_mb;     /* DPDK heap added and pinned at start (main.c) */
	uint32_t nat_flows;          /* nat.flows: reverse mappings the table holds */
	uint32_t nat_flows_per_channel; /* nat.flows_per_channel: most one channel may hold */
	uint32_t nat_idle_ms;        /* nat.idle_timeout_ms */
	uint32_t frag_datagrams;     /* fragments.datagrams: each worker's reassembly table */
	uint32_t frag_timeout_ms;    /* fragments.timeout_ms */
	/* The document without what a reload may change (ncd_config_reloadable()). */
	json_t *fixed;
	/* The whole document, as loaded: show config. */
	json_t *doc;
};

/**
 * Load and check a config file. Every error is printed to stderr as
 * "FILE:LINE:COLUMN: message" (syntax) or "FILE: json.path: message".
 *
 * @param path
 *   The file.
 * @param cfg
 *   Filled in; release with ncd_config_free() whatever the result.
 * @return
 *   0, or -1 after printing the first error.
 */
int ncd_config_load(const char *path, struct ncd_config *cfg);

/**
 * Whether a reload from cfg to next changes only what a running daemon can
 * change: channels, control.allow, control.limits, control.hello_timeout_ms,
 * nat.idle_timeout_ms and nat.flows_per_channel.
 *
 * @param key
 *   Set to the first key that differs otherwise ("ports", "control.socket").
 * @return
 *   true if only those change.
 */
bool ncd_config_reloadable(const struct ncd_config *cfg, const struct ncd_config *next,
			   char *key, size_t len);

/** As ncd_config_load(), from a JSON text; name stands for the file in messages. */
int ncd_config_load_text(const char *name, const char *text, struct ncd_config *cfg);

/**
 * Whether a path can be the control socket's: absolute, and short enough for
 * a Unix socket. @return 0, or -1 with the reason in err
 */
int ncd_socket_path_check(const char *path, char *err, size_t len);

/** Release what ncd_config_load() allocated. */
void ncd_config_free(struct ncd_config *cfg);

/**
 * Load an object of exception.host's schema (addresses, routes, mtu) into
 * hc, as the config does; errors go to stderr as "PATH: host.key: message".
 * @return 0 or -1
 */
int ncd_host_conf_load(const char *path, const json_t *h, struct ncd_host_conf *hc);

/**
 * A channel's meter from the CLI's one word: the config's keys as
 * KEY=VALUE, comma-separated ("pps=1000,burst=100,exceed=kernel"), checked
 * as channels[].meter is.
 * @return 0, or -1 with the reason in err ("meter.burst: ...")
 */
int ncd_meter_from_words(const char *spec, struct ncd_meter_conf *mc, char *err, size_t len);

/**
 * A channel's meter from an object of channels[].meter's schema, checked as
 * the config's is (the control protocol's CHANNEL_METER comes this way).
 * @return 0, or -1 with the reason in err ("meter.burst: ...")
 */
int ncd_meter_from_json(const json_t *o, struct ncd_meter_conf *mc, char *err, size_t len);

#endif
