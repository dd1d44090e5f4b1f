/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Views of the daemon's state as JSON values (the caller owns them). Every
 * JSON the daemon writes is one of them: the CLI prints them as text or as
 * JSON, telemetry converts them, CHANNEL_LIST and STATS send them, and
 * --stats writes one. So no two outputs can disagree.
 */
#ifndef NCD_VIEWS_H
#define NCD_VIEWS_H

#include <stdint.h>

#include <stdbool.h>

#include <jansson.h>

struct ncd;
struct ncd_conn;

/** A port's configuration and state: device, driver, MAC, link, workers, offload. */
json_t *ncd_view_port_info(const struct ncd *d, unsigned int port);

/** A port's counters, with the reasons packets went to the kernel and the NIC's own. */
json_t *ncd_view_port_stats(const struct ncd *d, unsigned int port);

/** A port's extended NIC counters (rte_eth_xstats). */
json_t *ncd_view_port_xstats(const struct ncd *d, unsigned int port);

/** A channel: rule, action, owner, rings, counters, offload. */
json_t *ncd_view_channel(const struct ncd *d, uint32_t id);

/** Every channel viewer may see (ncd_conn_sees(); NULL: all), as ncd_view_channel() has it. */
json_t *ncd_view_channels(const struct ncd *d, const struct ncd_conn *viewer);

/**
 * Every channel viewer may see, in brief: name, id, action, owner, rule,
 * ring occupancy, hits, delivered, drops (CHANNEL_LIST).
 */
json_t *ncd_view_channel_list(const struct ncd *d, const struct ncd_conn *viewer);

/**
 * A page of the channels viewer may see, from id `from` on: whole, as
 * ncd_view_channel() has them, or in brief, as many as fit in about budget
 * bytes of compact JSON (one at least).
 *
 * @param next  the id the next page starts at, or -1: this was the last
 * @return the page's array
 */
json_t *ncd_view_channel_page(const struct ncd *d, const struct ncd_conn *viewer, uint32_t from,
			      bool brief, size_t budget, int64_t *next);

/**
 * The connected clients viewer may see (its user's; NULL: all): pid, uid,
 * channels, mbufs held, the user's use and limits (control.c keeps them).
 */
json_t *ncd_view_clients(const struct ncd *d, const struct ncd_conn *viewer);

/** The classifier's size: rules, tuples, nodes, bytes. */
json_t *ncd_view_classifier(const struct ncd *d);

/** The mbuf pool: size, in use, available, reclaimed from dead clients. */
json_t *ncd_view_mempool(const struct ncd *d);

/** The daemon's version (and git describe), DPDK's, the control protocol's and the shared memory's. */
json_t *ncd_view_version(void);

/** Each worker: lcore, rx queues, its loops, busy loops, packets and their rates (load). */
json_t *ncd_view_workers(const struct ncd *d);

/** Every counter: ports, channels, mempool, control socket, NAT (STATS, --stats). */
json_t *ncd_view_stats(const struct ncd *d, const struct ncd_conn *viewer);

/** Write ncd_view_stats() to path. @return 0 or -1 (logged). */
int ncd_stats_write_json(const struct ncd *d, const char *path);

/** Serve CHANNEL_LIST and STATS on the control socket. @return 0 or a negative errno. */
int ncd_views_register(void);

#endif
