/* SPDX-License-Identifier: BSD-3-Clause */
/* Freeing a burst of mbufs the worker alone holds. */
#ifndef NCD_DATAPATH_MBUF_FREE_H
#define NCD_DATAPATH_MBUF_FREE_H

#include <rte_mbuf.h>

/**
 * Free n mbufs. When every one is a direct, single-segment mbuf of the
 * first one's pool that nothing else refers to (a frame as the NIC gave it),
 * they go back to the pool at once: rte_pktmbuf_free_bulk() reads each one's
 * second line (its next) and puts them back one by one, which was a fifth of
 * a delivering worker's cycles. Anything else (a chain, a clone, a capture's
 * reference, another pool) is freed by rte_pktmbuf_free_bulk(). A head of
 * one segment has no next (the chain's invariant, which every mbuf call
 * keeps), so nothing in the pool is left with one.
 *
 * @param m
 *   The mbufs; NULL entries are not allowed.
 * @param n
 *   How many.
 */
static inline void
ncd_mbuf_free_burst(struct rte_mbuf **m, unsigned int n)
{
	struct rte_mempool *mp;
	unsigned int i;

	if (n == 0)
		return;
	mp = m[0]->pool;
	for (i = 0; i < n; i++)
		if (m[i]->pool != mp || m[i]->nb_segs != 1 || !RTE_MBUF_DIRECT(m[i]) ||
		    rte_mbuf_refcnt_read(m[i]) != 1)
			break;
	if (i == n)
		rte_mempool_put_bulk(mp, (void **)m, n);
	else
		rte_pktmbuf_free_bulk(m, n);
}

#endif
