/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Ports: the NICs and their exception devices (the kernel's TAP), with the
 * next-hop caches and host addresses nexthop/ fills from the kernel's tables.
 */
#ifndef NCD_PORT_H
#define NCD_PORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rte_ether.h>

#include "nc_trie.h"

#include "core/config.h"
#include "port/xdp.h"

#define NCD_NO_TXQ UINT16_MAX          /* a worker with no tx queue on a port */

struct ncd;
struct ncd_mock;

/* Next-hop cache of a port (nexthop.c): direct-mapped, seqlocked slots. */
#define NCD_NH_SLOTS 1024
#define NCD_NH_TTL_MS 5000             /* a resolved next hop is asked again after this */
#define NCD_NH_NEG_TTL_MS 100          /* an unresolved one, after this */

struct ncd_nh_slot {
	uint32_t seq;                  /* odd while the control thread writes the slot */
	uint8_t family;
	int8_t status;                 /* 1: mac is good; -ENETUNREACH, -EHOSTUNREACH */
	uint8_t mac[6];
	uint8_t addr[16];
	uint64_t expires;              /* TSC */
};

struct ncd_nh_cache {
	struct ncd_nh_slot slot[NCD_NH_SLOTS];
};

/* Addresses of a port's kernel interface (nexthop.c): the host's own. */
#define NCD_HOST_ADDRS 16
struct ncd_host_addrs {
	uint32_t n;
	struct { uint8_t family; union nc_trie_addr a; } addr[NCD_HOST_ADDRS];
};

struct ncd_port {
	uint16_t port_id;
	uint16_t exc_id;               /* exception device's port id */
	bool has_exc;                  /* exception device set up (not "none") */
	bool configured;               /* the port itself is set up: close it at exit */
	bool started, exc_started;
	struct rte_ether_addr mac;
	uint32_t exc_max_frame;        /* largest frame the exception device takes */
	uint32_t exc_mtu;              /* its MTU: reassembled datagrams go to it in pieces of this */
	unsigned int exc_owner;        /* worker that moves the kernel's frames to the wire */
	/* Each worker's tx queue on the port, or NCD_NO_TXQ; and on its exception device. */
	uint16_t txq[NCD_MAX_WORKERS];
	uint16_t exc_txq[NCD_MAX_WORKERS];
	struct ncd_nh_cache *nh;       /* next hops of clients' IP packets */
	int nh_ifindex;                /* the kernel interface whose tables give them, or 0 */
	int exc_ifindex;               /* the exception device's kernel interface, or 0 */
	/* Exception mode xdp: the port's own interface and the maps of its XDP program. */
	bool xdp;
	int xdp_ifindex;
	struct ncd_xdp_maps xdp_maps;
	bool xdp_took_over;            /* a dead daemon's program was taken off at start */
	bool xdp_generic;              /* the program is attached in generic (SKB) mode */
	/* Control thread's: lookups, and packets that waited for a neighbour, did not, or in vain. */
	struct { uint64_t resolved, no_route, no_neigh, queued, queue_full, failed; } nh_stats;
	/* The exception device is gone and being made again: misses are drop_exc_down. */
	bool exc_down;
	/* An administrator set its interface down: misses drop_exc_down until it is up again. */
	bool exc_admin_down;
	uint64_t exc_admin_downs;      /* how many times */
	uint64_t exc_remade;           /* times the control thread made it again */
	/* The link as the control thread last saw it (ncd_ports_watch()). */
	struct {
		bool known, up, removed;
		uint32_t speed;            /* Mbps */
		uint64_t changes;          /* up or down since the start */
		uint64_t checked_ms;
		volatile int event;        /* an LSC or removal event came: look now */
	} link;
	/* The kernel interface's addresses: the control thread fills the copy workers do not read. */
	struct ncd_host_addrs host[2];
	uint32_t host_cur;
	uint64_t host_read_ms;
	uint16_t ntxq;                 /* its tx queues: one per worker that polls it, or per worker */
	bool ip_csum_offload;          /* it computes IPv4 header checksums (NAT's packets) */
	bool marks;                    /* workers read marks: the port offloads (or the mock does) */
	bool flow_api;                 /* the PMD has rte_flow (or the mock stands in) */
	int mark_negotiated;           /* rte_eth_rx_metadata_negotiate: 1 yes, 0 refused, -1 n/a */
	struct ncd_mock *mock;         /* the offload mock, when --mark-mock is given */
	uint32_t flows;                /* flow rules in place */
	uint64_t flow_errors;          /* flow rules the PMD refused */
};

/* The ports' table: ncd.ports points at it (main()). */
extern struct ncd_port ncd_port_table[NCD_MAX_PORTS];

/*
 * What the modules above the ports do as a port is set up and as its
 * exception device is made again: main() gives them before ncd_ports_init().
 * Either may be NULL.
 */
struct ncd_port_hooks {
	/* A port configured, before its queues are set up (offload: marks, isolation): -1 fails it. */
	int (*configured)(struct ncd *d, unsigned int port);
	/* A port's exception device made again (the host's configuration on it again). */
	int (*exception_remade)(struct ncd *d, unsigned int port);
	/* A port's link went up or down: its exception interface's carrier follows. */
	int (*carrier)(struct ncd *d, unsigned int port, bool up);
};

/** The modules' part in a port's set-up (control thread, before ncd_ports_init()). */
void ncd_ports_hooks_set(const struct ncd_port_hooks *h);

/** Probe, configure and set up the ports and their exception devices. @return 0, or 2 (config), or 1. */
int ncd_ports_init(struct ncd *d);

/**
 * The kernel interface a device string names ("...,iface=NAME,..."): the
 * interface net_af_xdp, net_af_packet and net_tap use.
 *
 * @return true with its name in name (cut to len), false if it names none.
 */
bool ncd_devargs_iface(const char *dev, char *name, size_t len);

/**
 * Claim every port's device and exception device that another process could
 * also take (a kernel interface, "iface=", in this network namespace; a PCI
 * address) with a lock file in /run/lock/netchanneld, before EAL probes
 * them: a second daemon on the same device fails here and leaves the first
 * alone. The locks last as long as the process, or until ncd_ports_unclaim().
 *
 * @param err
 *   The reason when it fails: "port wire0: device ... is in use by netchanneld pid 7 (...)".
 * @return 0 or -1.
 */
int ncd_ports_claim(const struct ncd_config *cfg, char *err, size_t errlen);

/** At a clean exit: the lock files ncd_ports_claim() took removed, and let go. */
void ncd_ports_unclaim(void);

/** Start every port and exception device. @return 0 or -1. */
int ncd_ports_start(struct ncd *d);

/**
 * Control thread: every port's link, read at least once a second and at once
 * after a link-state (LSC) or removal event, where the PMD sends them. An
 * interface-backed port ("iface=") is down while its kernel interface is
 * (no carrier, down, or gone), which its PMD may not say. Each change is
 * logged (NOTICE) and counted.
 */
void ncd_ports_watch(struct ncd *d);

/** ncd_rxq_wake_fd(): a net_af_xdp queue whose socket the kernel would not name. */
#define NCD_WAKE_XSK_UNNAMED (-2)

/**
 * An fd that becomes readable when rx queue queue of ethdev port_id has
 * packets, for a sleeping worker to wait on (epoll, level-triggered): the
 * PMD's rx interrupt fd (net_tap, net_memif, once configured with
 * intr_conf.rxq), or net_af_xdp's AF_XDP socket, as the kernel's sock_diag
 * names it. Owned by the PMD: never close it.
 * @return the fd; -1 if the PMD has none (net_pcap, net_null, net_ring);
 *   NCD_WAKE_XSK_UNNAMED for net_af_xdp without sock_diag for AF_XDP (the
 *   kernel's xsk_diag): ncd_xsk_fds() then lists the process's sockets
 */
int ncd_rxq_wake_fd(uint16_t port_id, uint16_t queue);

/**
 * This process's AF_XDP sockets: net_af_xdp's queues, one each, unnamed.
 * @return how many were written to fds, or -errno (-ENOSPC: more than max)
 */
int ncd_xsk_fds(int *fds, int max);

/** Whether a PMD (its driver name) needs intr_conf.rxq for ncd_rxq_wake_fd(). */
bool ncd_rxq_intr_wanted(const char *driver);

/** Stop and close every port and exception device. */
void ncd_ports_close(struct ncd *d);

#endif
