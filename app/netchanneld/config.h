/* SPDX-License-Identifier: BSD-3-Clause */
/* netchanneld's JSON config, loaded and checked before anything starts. */
#ifndef NETCHANNELD_CONFIG_H
#define NETCHANNELD_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nat.h"
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

enum ncd_offload { NCD_OFFLOAD_AUTO, NCD_OFFLOAD_OFF, NCD_OFFLOAD_REQUIRED };
enum ncd_action { NCD_ACTION_DELIVER, NCD_ACTION_DROP, NCD_ACTION_NAT };

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
};

struct ncd_rxq_conf {
	uint16_t port;               /* index in ports[] */
	uint16_t queue;
};

struct ncd_worker_conf {
	unsigned int lcore;
	struct ncd_rxq_conf rx[NCD_MAX_PORTS * NCD_MAX_QUEUES];
	unsigned int nrx;
};

struct ncd_channel_conf {
	char name[NCD_NAME_MAX];
	struct nc_trie_rule rule;
	enum ncd_action action;
	uint32_t ring_size;
	uint64_t queue_bytes;
	bool tx;                     /* it has a transmit ring */
	uint16_t port;               /* the port it transmits on (index in ports[]) */
	bool steer;                  /* offload: steer its flow to rx queue `queue` */
	uint16_t queue;
	struct ncd_nat_conf nat;     /* action NCD_ACTION_NAT */
};

struct ncd_allow_conf {
	int64_t uid;                 /* -1: any */
	int64_t gid;                 /* -1: any */
	uint16_t port_lo, port_hi;   /* which dports the user may claim */
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
	uint32_t nat_idle_ms;        /* nat.idle_timeout_ms */
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

/** As ncd_config_load(), from a JSON text; name stands for the file in messages. */
int ncd_config_load_text(const char *name, const char *text, struct ncd_config *cfg);

/** Release what ncd_config_load() allocated. */
void ncd_config_free(struct ncd_config *cfg);

/**
 * Parse an address or prefix ("192.0.2.1", "2001:db8::/32", "any").
 * @return 0, or -1 with a message in err.
 */
int ncd_parse_prefix(const char *s, union nc_trie_addr *a, uint8_t *len, uint8_t *family,
		     char *err, size_t errlen);

/**
 * Parse a port match: "53", "1024-65535", "0x1000/0xf000", "any".
 * @return 0, or -1 with a message in err.
 */
int ncd_parse_port(const char *s, struct nc_trie_port *p, char *err, size_t errlen);

/**
 * Parse a protocol: tcp, udp, udplite, sctp, icmp, icmpv6, a number 0..255, or any.
 * @return 0 (mask set to 0 for any, 0xff otherwise), or -1 with a message in err.
 */
int ncd_parse_proto(const char *s, uint8_t *proto, uint8_t *mask, char *err, size_t errlen);

/**
 * Check a NAT channel's translation against its rule, and complete it (the
 * family of its addresses).
 * @return 0, or -1 with a message in err.
 */
int ncd_nat_conf_check(const struct nc_trie_rule *rule, struct ncd_nat_conf *nc, char *err,
		       size_t errlen);

/** Parse a MAC "02:00:00:00:00:01". @return 0 or -1. */
int ncd_parse_mac(const char *s, uint8_t mac[6]);

/**
 * Whether s is a name netchanneld accepts: 1..max-1 letters, digits, '_' or
 * '-' (and '.' if dots), NUL terminated within max bytes.
 */
bool ncd_valid_name(const char *s, size_t max, bool dots);

/**
 * Parse an lcore list as EAL's -l takes it ("0-1,3") into a bitmap.
 * @return 0 or -1.
 */
int ncd_parse_lcores(const char *s, uint64_t *bits);

#endif
