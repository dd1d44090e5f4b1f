/* SPDX-License-Identifier: BSD-3-Clause */
/* The next-hop module's netlink socket, for its other files (host_keep.c). */
#ifndef NCD_NEXTHOP_NL_H
#define NCD_NEXTHOP_NL_H

#include <stddef.h>
#include <stdint.h>

#include <libmnl/libmnl.h>

/* A request, or an answer: one route or neighbour. */
#define NCD_NL_BUF 8192

/**
 * A request of type, with a family header of hlen bytes (*hdr, zeroed), in
 * buf (NCD_NL_BUF bytes).
 */
struct nlmsghdr *ncd_nl_request(uint8_t *buf, uint16_t type, uint16_t flags, size_t hlen,
				void **hdr);

/**
 * Send a request on the module's socket and run cb on each message of its
 * answer (a dump's too).
 * @return 0, or -errno: the kernel's, -ETIMEDOUT, -ENOTCONN (no socket), or cb's
 */
int ncd_nl_call(struct nlmsghdr *req, mnl_cb_t cb, void *data);

#endif
