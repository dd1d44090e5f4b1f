/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The maps of netchanneld's XDP program (bpf/ncd_xdp.c) on an interface:
 * found from the program the kernel has attached there, and the claims a
 * channel's rule makes in them.
 */
#ifndef NCD_PORT_XDP_H
#define NCD_PORT_XDP_H

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
 * @return 1 if it was taken off, 0 if there was none of ours, or -errno
 */
int ncd_xdp_detach(unsigned int ifindex);

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

/**
 * Add (delta 1) or take back (delta -1) a rule's claims: each key's count of
 * channels goes up or down; a key that counts none is deleted.
 * @return 0, or -errno of the first map update that failed (the keys before
 *   it stay changed)
 */
int ncd_xdp_claim(int claims_fd, const struct nc_trie_rule *r, int delta);

/**
 * The program's counters, summed over CPUs, by enum ncd_xdp_stat.
 * @return 0, or -errno
 */
int ncd_xdp_stats_read(int stats_fd, uint64_t out[NCD_XDP_STATS]);

#endif
