/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The exception path: what no channel claims goes to the kernel through the
 * port's exception device (a TAP with the port's MAC), unchanged, and what
 * the kernel sends there goes out of the port.
 */
#include <errno.h>

#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include "datapath/datapath.h"
#include "datapath/dp.h"
#include "datapath/frag.h"
#include "ncd.h"
#include "port/port.h"

void
ncd_dp_to_kernel(const struct ncd_port *p, uint16_t txq, struct ncd_port_stats *ps,
		 struct rte_mbuf **m, uint16_t n)
{
	uint16_t sent;

	if (n == 0)
		return;
	if (!p->has_exc) {
		ps->drop_no_exception += n;
		rte_pktmbuf_free_bulk(m, n);
		return;
	}
	/* Acquire: once it is back, the exception device's new id with it. */
	if (unlikely(__atomic_load_n(&p->exc_down, __ATOMIC_ACQUIRE))) {
		ps->drop_exc_down += n;
		rte_pktmbuf_free_bulk(m, n);
		return;
	}
	sent = rte_eth_tx_burst(p->exc_id, txq, m, n);
	ps->to_kernel += sent;
	ps->drop_exc_full += n - sent;
	if (sent < n)
		rte_pktmbuf_free_bulk(&m[sent], n - sent);
}

void
ncd_dp_to_kernel_whole(const struct ncd *d, const struct ncd_port *p, uint16_t txq,
		       struct ncd_port_stats *ps, struct rte_mbuf *m)
{
	int ret;

	if (!p->has_exc || unlikely(__atomic_load_n(&p->exc_down, __ATOMIC_ACQUIRE))) {
		ncd_dp_to_kernel(p, txq, ps, &m, 1);
		return;
	}
	/* What the kernel would have had from the wire: the fragments as they came. */
	ret = ncd_frag_to_kernel(d, p->exc_id, txq, p->exc_mtu, ps, m);
	if (ret == 0)
		ps->to_kernel++;
	else if (ret == -EAGAIN || ret == -ENOBUFS)
		ps->drop_exc_full++;
	else
		ps->drop_too_big++;
}

/* What the kernel sends on the TAP goes out of the port unchanged. */
void
ncd_dp_from_kernel(struct ncd *d, struct ncd_worker *w, unsigned int pi)
{
	const struct ncd_port *p = &d->ports[pi];
	struct ncd_port_stats *ps = &w->pstats[pi];
	struct rte_mbuf *m[NCD_BURST];
	uint16_t n, sent;

	if (unlikely(__atomic_load_n(&p->exc_down, __ATOMIC_ACQUIRE)))
		return;
	n = rte_eth_rx_burst(p->exc_id, w->exc_txq[pi], m, NCD_BURST);
	if (n == 0)
		return;
	ps->kernel_rx += n;
	sent = rte_eth_tx_burst(p->port_id, w->exc_txq[pi], m, n);
	ps->kernel_tx += sent;
	ps->kernel_tx_drop += n - sent;
	if (sent < n)
		rte_pktmbuf_free_bulk(&m[sent], n - sent);
}

