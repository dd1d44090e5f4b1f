/* SPDX-License-Identifier: BSD-3-Clause */
/* The checks of what an isolated client writes in its region (see region_check.h). */
#include "core/region_check.h"

/* Descriptors shorter than this cannot hold even an IPv4 header. */
#define TX_MIN_LEN 20u

void
ncd_rc_geom_init(struct ncd_rc_geom *g, uint64_t buf_off, uint64_t tx_buf_off,
		 uint32_t buf_size, uint32_t rx_bufs, uint32_t tx_size)
{
	*g = (struct ncd_rc_geom){ .buf_off = buf_off, .tx_buf_off = tx_buf_off,
				   .buf_size = buf_size, .rx_bufs = rx_bufs, .tx_size = tx_size };
	if (buf_size != 0 && (buf_size & (buf_size - 1)) == 0)
		g->buf_shift = (uint32_t)__builtin_ctz(buf_size);
}

bool
ncd_rc_tx_desc_ok(const struct ncd_rc_geom *g, const struct nc_desc *d)
{
	uint64_t end = (uint64_t)d->offset + d->length;
	uint64_t lo = g->tx_buf_off, hi = g->tx_buf_off + (uint64_t)g->buf_size * g->tx_size;

	return d->offset >= lo && end <= hi && d->length >= TX_MIN_LEN &&
	       d->length <= g->buf_size && (d->flags & ~(uint32_t)NC_DESC_F_IP) == 0;
}
