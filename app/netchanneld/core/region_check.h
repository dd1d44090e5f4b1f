/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The checks of what an isolated client writes in its region (nc_region.h):
 * its ring indexes, the buffers it gives back, the descriptors it sends.
 * Stateless: each takes the daemon's own private copy of the geometry and
 * indexes, never anything read back from the region, and needs no EAL, so
 * that the unit tests and a fuzz target run them as the workers do. The
 * per-packet ones are inline here; a worker calls them for every packet.
 */
#ifndef NCD_CORE_REGION_CHECK_H
#define NCD_CORE_REGION_CHECK_H

#include <stdbool.h>
#include <stdint.h>

#include "nc_region.h"

/** What a check refused: no buffer index, no count. */
#define NCD_RC_BAD UINT32_MAX

/** A region's geometry as the daemon made it, kept privately. */
struct ncd_rc_geom {
	uint64_t buf_off;              /**< the first rx buffer, in the daemon's part */
	uint64_t tx_buf_off;           /**< the first tx buffer, in the client's part */
	uint32_t buf_size;             /**< bytes of a buffer */
	uint32_t buf_shift;            /**< log2(buf_size) when a power of two, else 0 */
	uint32_t rx_bufs;              /**< rx buffers */
	uint32_t tx_size;              /**< tx ring entries, and tx buffers */
};

/**
 * The rx buffers: a stack of those the daemon holds, and which the client
 * holds. Every buffer is in exactly one of the two.
 */
struct ncd_rc_bufs {
	uint32_t *free;                /**< [rx_bufs]: the daemon's, the next to use on top */
	uint32_t nfree;
	uint8_t *held;                 /**< [rx_bufs]: 1 while the client holds it */
};

/**
 * The index of the rx buffer at offset off of the daemon's part: a
 * buffer's start, inside the buffer area. A shift where the buffer size
 * allows: a division for every buffer given back was a tenth of serving
 * the free ring.
 * @return the index, or NCD_RC_BAD
 */
static inline uint32_t
ncd_rc_rx_buf(const struct ncd_rc_geom *g, uint32_t off)
{
	uint32_t rel = off - (uint32_t)g->buf_off, b;

	if (off < g->buf_off)
		return NCD_RC_BAD;
	if (g->buf_shift != 0) {
		b = rel >> g->buf_shift;
		if ((rel & (g->buf_size - 1)) != 0)
			return NCD_RC_BAD;
	} else {
		b = rel / g->buf_size;
		if (rel % g->buf_size != 0)
			return NCD_RC_BAD;
	}
	return b < g->rx_bufs ? b : NCD_RC_BAD;
}

/**
 * Whether a client's tail of a ring the daemon produces may be taken: it
 * moves only forward from the last one taken (seen), and never past what
 * the daemon produced (own). Free-running 32-bit counters.
 */
static inline bool
ncd_rc_tail_ok(uint32_t seen, uint32_t own, uint32_t tail)
{
	return (uint32_t)(tail - seen) <= (uint32_t)(own - seen);
}

/**
 * How many entries a ring the client produces holds: its head, taken only
 * if it is at most a ring (size entries) ahead of the daemon's tail (own).
 * @return the count, or NCD_RC_BAD
 */
static inline uint32_t
ncd_rc_avail(uint32_t own, uint32_t size, uint32_t head)
{
	return (uint32_t)(head - own) <= size ? head - own : NCD_RC_BAD;
}

/** Take the daemon's next free rx buffer (nfree > 0), the client's from now on. */
static inline uint32_t
ncd_rc_buf_take(struct ncd_rc_bufs *b)
{
	uint32_t i = b->free[--b->nfree];

	b->held[i] = 1;
	return i;
}

/**
 * A buffer the client gave back on the free ring: the daemon's again if it
 * is a buffer the client holds; anything else (not a buffer's start, one it
 * does not hold, one given back twice) changes nothing.
 * @return whether it was taken back
 */
static inline bool
ncd_rc_buf_return(const struct ncd_rc_geom *g, struct ncd_rc_bufs *b, uint32_t off)
{
	uint32_t i = ncd_rc_rx_buf(g, off);

	if (i == NCD_RC_BAD || !b->held[i])
		return false;
	b->held[i] = 0;
	b->free[b->nfree++] = i;
	return true;
}

/**
 * Fill in a geometry: buf_shift from buf_size.
 */
void ncd_rc_geom_init(struct ncd_rc_geom *g, uint64_t buf_off, uint64_t tx_buf_off,
		      uint32_t buf_size, uint32_t rx_bufs, uint32_t tx_size);

/**
 * Whether a tx descriptor the client wrote holds up, its channel aside
 * (which the caller looks up): its frame lies in the tx buffer area, no
 * longer than a buffer and of 20 bytes at least (an IPv4 header), and it has
 * no flag but NC_DESC_F_IP.
 */
bool ncd_rc_tx_desc_ok(const struct ncd_rc_geom *g, const struct nc_desc *d);

#endif /* NCD_CORE_REGION_CHECK_H */
