/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The maps of netchanneld's XDP program (bpf/ncd_xdp.c) on an interface:
 * found from the program the kernel has attached there, and the claims a
 * channel's rule makes in them.
 */
#ifndef NCD_PORT_XDP_H
#define NCD_PORT_XDP_H

#include <stddef.h>
#include <stdint.h>

#include "ncd_xdp.h"

struct nc_trie_rule;

/** The maps of the XDP program attached to an interface. */
struct ncd_xdp_maps {
	int claims_fd;         /**< ncd_claims, or -1 */
	int stats_fd;          /**< ncd_xdp_stats, or -1 */
};

/**
 * Find the maps of netchanneld's XDP program on interface ifindex (in this
 * process's network namespace).
 * @return 0; -ENOENT if no program, or not ours, is attached; -ENOTSUP
 *   without libbpf; another -errno if the kernel refused a query
 */
int ncd_xdp_maps_find(unsigned int ifindex, struct ncd_xdp_maps *m);

/**
 * Take netchanneld's XDP program off interface ifindex, in whichever mode
 * it was attached: what a daemon that died left there, before net_af_xdp
 * attaches its own (it will not replace a program that is there). A program
 * that is not netchanneld's is left alone.
 * @param other  set to "id N, NAME" of a program that is not netchanneld's
 * @return 1 if it was taken off, 0 if there was no program, -EEXIST if the
 *   program there is not netchanneld's, or another -errno
 */
int ncd_xdp_detach(unsigned int ifindex, char *other, size_t len);

/**
 * Attach netchanneld's program on interface ifindex in generic (SKB) mode
 * instead of the native one net_af_xdp chose: on a veth, native XDP copies
 * every frame the kernel keeps to give it XDP's headroom, and generic mode
 * does not. The AF_XDP sockets bound to the queues stay.
 * @return 0, -ENOENT if netchanneld's program is not there, or -errno
 */
int ncd_xdp_move_generic(unsigned int ifindex);

/**
 * The driver of a kernel interface, as ethtool names it ("veth", "mlx5_core").
 * @return 0, or -errno
 */
int ncd_iface_driver(const char *iface, char *drv, size_t len);

/** Close what ncd_xdp_maps_find() opened. */
void ncd_xdp_maps_close(struct ncd_xdp_maps *m);

/**
 * The claims a rule makes, in its family (in each, for a rule of either):
 * its protocol (or any), and each port of its destination port range up to
 * NCD_XDP_MAX_PORTS_A_RULE ports, else any port; and the family's
 * NCD_XDP_ANY_OF_FAMILY key. Coarse on purpose: the daemon's classifier
 * decides the rest.
 * @return how many keys were written to keys (at most max), or -ENOSPC
 */
int ncd_xdp_rule_claims(const struct nc_trie_rule *r, struct ncd_xdp_claim_key *keys,
			unsigned int max);

/** The most keys ncd_xdp_rule_claims() writes for one rule. */
#define NCD_XDP_RULE_KEYS (2 * (NCD_XDP_MAX_PORTS_A_RULE + 1))

/**
 * Add (delta 1) or take back (delta -1) claims: each key's count of
 * channels goes up or down; a key that counts none is deleted.
 * @return 0, or -errno of the first map update that failed: an addition
 *   that fails takes back what it had added; a release goes on to the end
 */
int ncd_xdp_claim_keys(int claims_fd, const struct ncd_xdp_claim_key *keys, unsigned int n,
		       int delta);

/** ncd_xdp_claim_keys() of a rule's claims (ncd_xdp_rule_claims()). @return 0, or -errno */
int ncd_xdp_claim(int claims_fd, const struct nc_trie_rule *r, int delta);

/** How many keys are claimed now. @return them, or -errno */
int ncd_xdp_claims_count(int claims_fd);

/**
 * The program's counters, summed over CPUs, by enum ncd_xdp_stat.
 * @return 0, or -errno
 */
int ncd_xdp_stats_read(int stats_fd, uint64_t out[NCD_XDP_STATS]);

#endif
