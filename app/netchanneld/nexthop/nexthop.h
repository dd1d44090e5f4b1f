/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Next hops for clients' and NAT's IP packets, from the kernel's tables over
 * netlink: the ports' caches workers read, the host's addresses, packets
 * waiting for a neighbour, and exception.host on the TAP.
 */
#ifndef NCD_NEXTHOP_H
#define NCD_NEXTHOP_H

#include <stdbool.h>
#include <stdint.h>

#include "nc_trie.h"
#include "port/port.h"

struct ncd;
struct ncd_channel_hooks;
struct rte_ring;

/* hash.usr of a packet handed over for next-hop resolution: the channel, and whether NAT's. */
#define NCD_NH_NAT (1u << 31)

/**
 * Set up the next-hop caches, the request ring, each worker's ring of
 * resolved packets and the netlink socket. @return 0 or -1.
 */
int ncd_nh_init(struct ncd *d);

/** A worker's ring of its packets whose next hop was resolved (made by ncd_nh_init()). */
struct rte_ring *ncd_nh_done(unsigned int worker);

/**
 * Look up dst's next-hop MAC in a port's cache (workers; no lock, no syscall).
 * @return 1 with mac set; -ENETUNREACH or -EHOSTUNREACH (recently failed);
 *   0 (not cached, expired, or being updated: ask the control thread).
 */
int ncd_nh_get(const struct ncd_nh_cache *c, uint8_t family, const uint8_t *addr, uint64_t now,
		uint8_t mac[6]);

/** Control thread: resolve the packets workers handed over and put them back on their channels. */
void ncd_nh_run(struct ncd *d);

/**
 * Whether a client's packet (its parsed key) comes from one of the addresses
 * of the port's kernel interface, the host's own: what a channel that names
 * no destination may send from. Workers; refreshed every second by
 * ncd_nh_run(). A port with no kernel interface has no such check: true.
 */
bool ncd_host_addr(const struct ncd_port *p, const struct nc_trie_key *k);

/**
 * How soon the control thread should run ncd_nh_run() again for the packets
 * waiting for a neighbour: milliseconds, or -1 when none waits.
 */
int ncd_nh_wait_ms(void);

/**
 * Packets of a client's channels (owner: its slot) waiting for a next hop;
 * at most 32 at once for one client, 256 for all (control thread).
 */
unsigned int ncd_nh_waiting(int owner);

/**
 * Give a port's exception TAP the host's configuration: exception.host's,
 * or what was kept of it (ncd_host_keep_restore()). Called whenever the
 * daemon makes the TAP, so that a restart does not take the host offline.
 *
 * @return 0, or -1 if anything failed (the rest is still applied).
 */
int ncd_exception_host_apply(struct ncd *d, unsigned int pi);

/**
 * Apply a host configuration to port pi's TAP over netlink: its admin state
 * (up or down) and MTU, its addresses, then its routes. Each failure is
 * logged, naming what (and where) the configuration came from.
 *
 * @return 0, or -1 if anything failed (the rest is still applied).
 */
int ncd_host_apply(struct ncd *d, unsigned int pi, const struct ncd_host_conf *hc, bool up,
		   const char *what, const char *where);

/* What the host put on a TAP, kept across its recreation and restarts (host_keep.c). */

/**
 * Whether port pi's TAP's host configuration is kept: it has a kernel
 * interface, and the config neither gives exception.host nor says a
 * network manager owns it ("manager").
 */
bool ncd_host_keeps(const struct ncd *d, unsigned int pi);

/**
 * The TAP was just made: give it what the state file kept (state_dir/
 * host.PREFIX.PORT.json), and keep what happens to this TAP from now on.
 * @return 0 (restored, or nothing kept), or -1 (logged)
 */
int ncd_host_keep_restore(struct ncd *d, unsigned int pi);

/**
 * Control thread, after netlink events (changed) or none: once the kernel's
 * changes have settled, read each kept TAP's state and write it if it
 * changed.
 */
void ncd_host_keep_run(struct ncd *d, bool changed, uint64_t now);

/** Forget what was kept in memory (the files stay). */
void ncd_host_keep_close(void);

/**
 * The exception interface's carrier, as the wire's link goes (port pi's TAP
 * follows its wire, as a NIC's interface would): IFLA_CARRIER over netlink.
 * Its admin state is not touched. @return 0, or -errno (logged)
 */
int ncd_exception_carrier(struct ncd *d, unsigned int pi, bool up);

/**
 * The netlink socket that hears of the host's address and link changes (poll it;
 * ncd_nh_run() reads it and has ncd_ports_watch() look at once), or -1.
 */
int ncd_nh_events_fd(void);

/** Free what ncd_nh_init() set up, with any packet still waiting. */
void ncd_nh_close(struct ncd *d);

/** Next hops' part in channels' lives: the packets of a channel that goes (ncd_channel_hooks_add()). */
extern const struct ncd_channel_hooks ncd_nh_channel_hooks;

#endif
