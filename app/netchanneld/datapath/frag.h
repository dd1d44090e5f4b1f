/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * IP fragments: each worker reassembles the fragments it receives (rte_ip_frag,
 * one bounded table per worker) so that a datagram is classified by its
 * ports like any other. What goes to the kernel leaves as the fragments it
 * came in; what leaves a port after NAT is split to the port's MTU.
 */
#ifndef NCD_DATAPATH_FRAG_H
#define NCD_DATAPATH_FRAG_H

#include <stdbool.h>
#include <stdint.h>

#include <rte_ether.h>
#include <rte_mbuf.h>

#include "core/stats.h"

struct ncd;
struct ncd_parsed;
struct ncd_worker;
struct rte_mempool;

/**
 * Make each worker's reassembly table: cfg.frag_datagrams datagrams, each
 * given up after cfg.frag_timeout_ms.
 * @return 0, or -1 (out of memory)
 */
int ncd_frag_init(struct ncd *d);

/**
 * Once the workers have stopped: give up every datagram still waiting,
 * counted as frag_drop_timeout, so that the counters add up at exit and the
 * mbufs are back in the pool.
 */
void ncd_frag_drain(struct ncd *d);

/** Free the workers' tables (ncd_frag_drain() first). */
void ncd_frag_free(struct ncd *d);

/**
 * Take a fragment (parsed as such by ncd_parse()) into the worker's table.
 * Counted on the port: frag_in, and frag_drop_* for what is given up.
 *
 * @return
 *   The datagram it completes: chained mbufs of one frame, its IP header
 *   whole (IPv4 checksum set, IPv6 fragment header gone), and for IPv6 the
 *   datagram's fragment id in hash.usr, for ncd_frag_split(); or NULL:
 *   the fragment waits for the others, or was dropped.
 */
struct rte_mbuf *ncd_frag_gather(const struct ncd *d, struct ncd_worker *w,
				 struct ncd_port_stats *ps, struct rte_mbuf *m,
				 const struct ncd_parsed *pp, uint64_t now);

/**
 * Give up the datagrams that waited longer than the timeout (counted as
 * frag_drop_timeout on the ports their fragments came from) and free what
 * was given up. Cheap when the table has nothing old.
 * @return the fragments given up
 */
uint32_t ncd_frag_expire(const struct ncd *d, struct ncd_worker *w, uint64_t now);

/**
 * A frame (Ethernet, then an IPv4 or IPv6 datagram, in one mbuf or chained)
 * as single-segment frames of at most mtu bytes of IP each: one copy when
 * it fits, else its fragments (IPv6: with the id in m->hash.usr). m is left
 * as it was; the caller frees it.
 *
 * @return
 *   The number of frames in out, or -ENOBUFS (the pool is empty), -E2BIG
 *   (more than max pieces, or a header past the first segment), -EMSGSIZE
 *   (IPv4 with DF set, too long for mtu), -EINVAL (not IP).
 */
int ncd_frag_split(const struct rte_mbuf *m, uint32_t mtu, struct rte_mempool *mp,
		   struct rte_mbuf **out, unsigned int max);

/**
 * Whether a frame must go out through ncd_frag_send() on a device of this
 * MTU: in several mbufs (a reassembled datagram; not every PMD sends
 * chains), or longer than the MTU takes (untagged).
 */
static inline bool
ncd_frag_must_split(const struct rte_mbuf *m, uint32_t mtu)
{
	return m->nb_segs > 1 || m->pkt_len > mtu + (uint32_t)RTE_ETHER_HDR_LEN;
}

/* Most frames ncd_frag_send() splits a datagram into: 64 KiB in pieces of a 1,024-byte MTU. */
#define NCD_FRAG_SPLIT_MAX 64

/**
 * Send a frame out of a device (port_id, queue txq) whose MTU is mtu, in
 * single-segment frames (ncd_frag_split(): one copy if it fits). The
 * frames made count in ps->frag_out. m and whatever is not sent are freed.
 *
 * @return
 *   0 (every piece went out), -EAGAIN (the device did not take them all),
 *   or ncd_frag_split()'s error.
 */
int ncd_frag_send(const struct ncd *d, uint16_t port_id, uint16_t txq, uint32_t mtu,
		  struct ncd_port_stats *ps, struct rte_mbuf *m);

/**
 * A datagram reassembled from fragments that no channel claims, to the
 * kernel (device port_id, queue txq, MTU mtu) as the fragments it came in:
 * each byte for byte (Ethernet header, IP headers, payload and trailer), in
 * their order of arrival, from the headers ncd_frag_gather() kept in each
 * fragment's headroom. A fragment longer than mtu is cut again with its own
 * headers (TOS, TTL, DF, id; options as the kernel copies them). When a
 * fragment's headers could not be kept (a driver leaving less headroom
 * than they take), the datagram is cut whole, as ncd_frag_send() does, DF
 * cleared. Counted: frag_out (frames sent), frag_kept (of them, originals
 * as they came), frag_recut (datagrams not sent as they came). m and
 * whatever is not sent are freed.
 *
 * @return as ncd_frag_send()
 */
int ncd_frag_to_kernel(const struct ncd *d, uint16_t port_id, uint16_t txq, uint32_t mtu,
		       struct ncd_port_stats *ps, struct rte_mbuf *m);

#endif
